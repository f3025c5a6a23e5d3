"""`opgen heldout`: held-out input sizes for every task of a finished build or a published dataset folder."""

from __future__ import annotations

from opgen.commands.device_option import add_device_option, chosen_device
from opgen.commands.limits import megabytes, seconds
from opgen.commands.paths import require_existing
from opgen.errors import UsageError
from opgen.sandbox.machine_sizing import size_for_machine


def register(sub) -> None:
    parser = sub.add_parser("heldout", help="add held-out input sizes to a finished build or a dataset folder",
                            description="For every task, derive input configurations besides the timed one (the "
                                        "sizes its weights do not fix: batch, sequence length, spatial extents), "
                                        "validate each in a sandboxed worker as the task was validated, and write "
                                        "the ones that pass into its row (held_out_sizes, held_out_count, "
                                        "held_out_note). Runs on the GPU or the CPU; resumable: a rerun reuses "
                                        "the finished part. `opgen build` runs it by default on CUDA builds.")
    parser.add_argument("path", metavar="PATH", help="a finished build's run folder, or a dataset folder")
    add_device_option(parser, "where the configurations run")
    parser.add_argument("--configs", type=int, default=2, help="held-out configurations per task (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="the seed the inputs are drawn from (default 0)")
    parser.add_argument("--workers", type=int, default=None, help="sandbox workers (default: sized to the machine)")
    parser.add_argument("--memory-mb", type=megabytes, default=None, help="memory limit per worker, 0 for none")
    parser.add_argument("--timeout", type=seconds, default=600.0, help="seconds per task, all its configurations "
                                                                     "together (default 600)")
    parser.add_argument("--again", action="store_true", help="derive them again where the rows already hold them")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from opgen.heldout.apply import add_held_out, held_text, target_files

    require_existing(args.path, "PATH")
    target_files(Path(args.path))   # a folder of neither kind is named before anything else is looked at
    if args.configs < 1:
        raise UsageError("--configs must be 1 or more")
    device, visible = chosen_device(args.device)
    gpus = len(visible)
    sizing = size_for_machine(device, gpus, args.workers, None, args.memory_mb)
    workers = sizing.every_worker(gpus) if args.workers is None else args.workers
    summary = add_held_out(args.path, device=device, configs=args.configs, workers=workers, timeout_s=args.timeout,
                           memory_mb=sizing.memory_mb or None, seed=args.seed, again=args.again,
                           progress=not args.no_progress)
    verb = "held-out sizes" if summary["ran"] else "held-out sizes already there (--again derives them again)"
    print(f"{summary['tasks']} tasks on {device}, {verb}: {held_text(summary)}")
    return 0
