"""`opgen retime`: time a published dataset (folder or Hub id) on this GPU and add the baseline as a config."""

from __future__ import annotations

from opgen.commands.device_option import add_device_option, chosen_device
from opgen.commands.limits import seconds
from opgen.commands.timing_options import add_timing_options, check_trial_counts, timing_options
from opgen.errors import UsageError


def register(sub) -> None:
    parser = sub.add_parser("retime", help="time a published dataset on this GPU; adds config baseline-<gpu>",
                            description="Time every task of a published dataset (a folder or a Hub id) on this "
                                        "machine and write the timings as an extra config of the dataset, "
                                        "without rebuilding anything. Resumable: a rerun skips finished chunks.")
    parser.add_argument("dataset", metavar="DATASET", help="a dataset folder (opgen publish) or a Hub id ORG/NAME")
    add_device_option(parser, "where the tasks are timed")
    parser.add_argument("--out", default=None, help="where a Hub dataset is downloaded (default data/retime/ORG__NAME)")
    parser.add_argument("--name", default=None, help="config suffix (default: the GPU's name, e.g. nvidia-h200)")
    parser.add_argument("--limit", type=int, default=None, help="time only the first N tasks")
    parser.add_argument("--config", default="default",
                        help="the dataset config to time (default: default; a precision config such as bf16 gives "
                             "baseline-<gpu>-bf16)")
    parser.add_argument("--timeout", type=seconds, default=600.0, help="seconds per task (default 600)")
    parser.add_argument("--workers-per-gpu", type=int, default=None, help="timing sandbox workers per GPU")
    parser.add_argument("--push", action="store_true", help="upload the updated dataset to its Hub repository")
    parser.add_argument("--token", default=None, help="Hugging Face token (default: HF_TOKEN)")
    parser.add_argument("--no-progress", action="store_true")
    add_timing_options(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    from opgen.pipeline.retime import retime
    from opgen.publish.reading import require_dataset

    check_trial_counts(args)
    if args.name is not None and not args.name.replace("-", "").isalnum():
        raise UsageError(f"--name must be letters, digits and dashes, got {args.name!r}")
    require_dataset(args.dataset)
    device, _ = chosen_device(args.device)
    options = timing_options(args, device)
    folder, config, rows = retime(args.dataset, options, out=args.out, name=args.name, limit=args.limit,
                                  timeout_s=args.timeout, workers_per_gpu=args.workers_per_gpu, push=args.push,
                                  token=args.token, progress=not args.no_progress, config=args.config)
    print(f"timed {rows} tasks: config {config} in {folder}")
    print(f"load it: datasets.load_dataset({str(folder)!r}, {config!r}, split='train')")
    return 0
