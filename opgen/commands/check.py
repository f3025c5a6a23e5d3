"""`opgen check`: run rows of a published dataset again in fresh processes; exit 1 when any fails."""

from __future__ import annotations

import json
import sys

from opgen.commands.device_option import add_device_option, chosen_device
from opgen.commands.limits import megabytes, seconds
from opgen.errors import UsageError
from opgen.jsonl import require_writable
from opgen.sandbox.machine_sizing import size_for_machine


def register(sub) -> None:
    parser = sub.add_parser("check", help="re-run rows of a published dataset: checks, rules, eager time",
                            description="Draw rows of a published dataset (a folder or a Hub id) at random and "
                                        "run each again in a fresh sandboxed process: it must run, be "
                                        "deterministic, pass the degenerate check and the grader-proof rules and "
                                        "compile within tolerance; its recorded eager time must be in the window, "
                                        "and on CUDA its eager time now must agree with the recorded one. Exit 1 "
                                        "when any row fails.")
    parser.add_argument("dataset", metavar="DATASET", help="a dataset folder (opgen publish) or a Hub id ORG/NAME")
    parser.add_argument("--sample", type=int, default=300, help="rows drawn at random (default 300; 0: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw (default 0)")
    parser.add_argument("--config", default="default", help="the dataset config to check (a precision: bf16, fp16)")
    add_device_option(parser, "where the rows run; cuda also times them against the recorded times")
    parser.add_argument("--workers", type=int, default=None, help="sandbox workers (default: sized as for build)")
    parser.add_argument("--timing-workers", type=int, default=None, help="timing workers per GPU")
    parser.add_argument("--memory-mb", type=megabytes, default=None, help="memory limit per worker, 0 for none")
    parser.add_argument("--timeout", type=seconds, default=300.0, help="seconds per task (default 300)")
    parser.add_argument("--time-tolerance", type=float, default=0.25,
                        help="largest relative difference of eager times that agrees (default 0.25)")
    parser.add_argument("--report", default=None, help="also write the report as JSON here")
    parser.add_argument("--download-to", default=None, help="where a Hub dataset is downloaded")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def run(args) -> int:
    from opgen.pipeline.check import check_dataset
    from opgen.publish.reading import require_dataset

    if args.sample < 0:
        raise UsageError("--sample must be 0 (all rows) or more")
    if args.time_tolerance <= 0:
        raise UsageError("--time-tolerance must be above 0")
    require_dataset(args.dataset)
    if args.report:
        require_writable(args.report, "--report")
    device, gpus = chosen_device(args.device)
    sizing = size_for_machine(device, len(gpus), args.workers, args.timing_workers, args.memory_mb)
    report = check_dataset(args.dataset, sample=args.sample or None, seed=args.seed, device=device,
                           workers=sizing.workers, timing_workers=sizing.timing_workers,
                           memory_mb=sizing.memory_mb or None, timeout_s=args.timeout,
                           time_tolerance=args.time_tolerance, out=args.download_to, progress=not args.no_progress,
                           config=args.config)
    if args.report:
        with open(args.report, "w", encoding="utf-8") as handle:
            json.dump(report.as_dict(), handle, indent=1)
    print(f"checked {report.drawn} of {report.rows} rows of {report.folder}: {len(report.failures)} failed")
    for failure in report.failures:
        print(f"  {failure['id']}: {failure['reason']}: {(failure['detail'] or '')[:200]}")
    timing = report.timing
    if timing and "median_ratio" in timing:
        print(f"eager time, recorded/now: median {timing['median_ratio']:.3f} (p10 {timing['p10_ratio']:.3f}, "
              f"p90 {timing['p90_ratio']:.3f}), log-correlation {timing['log_correlation']:.4f}; "
              f"{timing['outside']} of {timing['tasks']} beyond ±{timing['tolerance']:.0%}; "
              f"{timing['retimed_outside_window']} outside the window now")
        if timing["outside"]:
            print(f"warning: {timing['outside']} eager times disagree with the recorded ones", file=sys.stderr)
    return 1 if report.failures or (timing and timing.get("outside")) else 0
