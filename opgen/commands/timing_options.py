"""The timing options `opgen time`, `opgen build` and `opgen retime` share, and their checks."""

from __future__ import annotations

from opgen.errors import UsageError
from opgen.timing.precision import PRECISIONS


def add_timing_options(parser, compile_option: bool = True) -> None:
    parser.add_argument("--trials", type=int, default=100,
                        help="timed trials per method: the cap (adaptive) or the exact count (fixed); default 100")
    parser.add_argument("--min-trials", type=int, default=10, help="adaptive trials: at least this many (default 10)")
    parser.add_argument("--trial-mode", choices=("adaptive", "fixed"), default="adaptive",
                        help="adaptive: stop once the median's 95%% CI is within ±1%%; fixed: exactly --trials "
                             "(KernelBench's protocol); default adaptive")
    parser.add_argument("--warmups", type=int, default=10, help="warm-up calls before the trials (default 10)")
    parser.add_argument("--precision", choices=PRECISIONS, default="default",
                        help="fp32 precision of the timed runs: default = PyTorch's defaults (matmul ieee, cuDNN "
                             "convolutions and RNNs tf32, as KernelBench-style harnesses run), ieee, or tf32")
    parser.add_argument("--tf32", action="store_true", help="same as --precision tf32")
    if compile_option:
        parser.add_argument("--no-compile", action="store_true", help="time eager only")
        parser.add_argument("--seed", type=int, default=0, help="torch seed for weights and inputs (default 0)")


def check_trial_counts(args) -> None:
    """One UsageError line for trial counts no timing can use."""
    if args.trials < 1 or args.warmups < 0 or args.min_trials < 1:
        raise UsageError("--trials and --min-trials must be >= 1 and --warmups >= 0")


def timing_options(args, device: str):
    """The TimingOptions the parsed arguments ask for; bad values are one UsageError line."""
    from opgen.timing.driver import TimingOptions

    check_trial_counts(args)
    return TimingOptions(device=device, trials=args.trials, warmups=args.warmups, trial_mode=args.trial_mode,
                         min_trials=args.min_trials, seed=getattr(args, "seed", 0),
                         precision="tf32" if args.tf32 else args.precision,
                         with_compile=not getattr(args, "no_compile", False))
