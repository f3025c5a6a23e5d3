"""`opgen heldout`: held-out input sizes for every task of a finished build or a published dataset folder."""

from __future__ import annotations

from opgen.commands.machine_sizing import size_for_machine
from opgen.errors import UsageError


def register(sub) -> None:
    parser = sub.add_parser("heldout", help="add held-out input sizes to a finished build or a dataset folder",
                            description="For every task, derive input configurations besides the timed one (the "
                                        "sizes its weights do not fix: batch, sequence length, spatial extents), "
                                        "validate each in a sandboxed worker as the task was validated, and write "
                                        "the ones that pass into its row (held_out_sizes, held_out_count, "
                                        "held_out_note). Runs on the GPU or the CPU; resumable: a rerun reuses "
                                        "the finished part. `opgen build` runs it by default on CUDA builds.")
    parser.add_argument("path", metavar="PATH", help="a finished build's run folder, or a dataset folder")
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="where the configurations run (default auto: CUDA when present, else the CPU)")
    parser.add_argument("--configs", type=int, default=2, help="held-out configurations per task (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="the seed the inputs are drawn from (default 0)")
    parser.add_argument("--workers", type=int, default=None, help="sandbox workers (default: sized to the machine)")
    parser.add_argument("--memory-mb", type=int, default=None, help="memory limit per worker, 0 for none")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per task, all its configurations "
                                                                     "together (default 600)")
    parser.add_argument("--again", action="store_true", help="derive them again where the rows already hold them")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def resolve_device(device: str) -> tuple[str, int]:
    """`auto`: CUDA when a GPU is visible, else the CPU; `cuda`: the GPUs, or one line saying why there are none.
    Returns the device and how many GPUs it has."""
    from opgen.sandbox.gpus import require_cuda, visible_gpus

    if device == "cpu":
        return "cpu", 0
    if device == "auto":
        gpus = visible_gpus()
        return ("cuda", len(gpus)) if gpus else ("cpu", 0)
    return "cuda", len(require_cuda())


def run(args) -> int:
    from pathlib import Path

    from opgen.heldout.apply import add_held_out

    if not Path(args.path).exists():
        raise UsageError(f"{args.path} does not exist")
    if args.configs < 1:
        raise UsageError("--configs must be 1 or more")
    device, gpus = resolve_device(args.device)
    sizing = size_for_machine(device, gpus, args.workers, None, args.memory_mb)
    workers = sizing.workers + (sizing.timing_workers or 0) * gpus if args.workers is None else args.workers
    summary = add_held_out(args.path, device=device, configs=args.configs, workers=workers, timeout_s=args.timeout,
                           memory_mb=sizing.memory_mb or None, seed=args.seed, again=args.again,
                           progress=not args.no_progress)
    held = ", ".join(f"{tasks} with {count}" for count, tasks in sorted(summary["by_count"].items(), reverse=True))
    verb = "held-out sizes" if summary["ran"] else "held-out sizes already there (--again derives them again)"
    print(f"{summary['tasks']} tasks on {device}, {verb}: {held}")
    return 0
