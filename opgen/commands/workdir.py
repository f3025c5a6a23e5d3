"""`opgen workdir`: an agent's work folder for one task (the task, a starting ModelNew, SKILL.md, its commands)."""

from __future__ import annotations

import sys

from kernels_ref.load import looks_like_path
from opgen.commands.device_option import add_device_option, chosen_device
from opgen.commands.paths import require_existing
from opgen.errors import UsageError


def register(sub) -> None:
    parser = sub.add_parser(
        "workdir", help="make an agent's work folder for one task (SKILL.md, model_new.py, compile/verify/profile)",
        description="Write a self-contained work folder for one task, as CUDA-Agent's environment gives its agent: "
                    "task.py (the reference), model_new.py (a starting ModelNew), SKILL.md (the workflow, the rules, "
                    "the tolerance, every input size checked, the baselines and their GPU, the reward), task.json, "
                    "and the folder's commands compile.py, verify.py and profiling.py, which call opgen's grading "
                    "protocol with the kernels-only rule on (docs/agent.md).")
    source = parser.add_argument_group("which task")
    source.add_argument("--task", default=None, help="a task file (KernelBench format)")
    source.add_argument("--dataset", default=None,
                        help="a published dataset folder, a Hub id ORG/NAME, or a JSONL file of records with code")
    source.add_argument("--id", default=None, help="the task id within --dataset")
    source.add_argument("--config", default="default", help="the dataset config (a precision: bf16, fp16)")
    source.add_argument("--download-to", default=None, help="where a Hub dataset is downloaded")
    parser.add_argument("--out", required=True, help="the folder to write")
    parser.add_argument("--force", action="store_true",
                        help="write into a folder that is not empty (its model_new.py is kept)")
    add_device_option(parser, "where the task runs while its input sizes are read")
    parser.set_defaults(func=run)


def run(args) -> int:
    from opgen.agent.workdir import make_workdir
    from opgen.grading.api import resolved_options
    from opgen.grading.tasks import dataset_row, task_from_file

    if (args.task is None) == (args.dataset is None) or (args.dataset is None) != (args.id is None):
        raise UsageError("give either --task, or --dataset with --id")
    require_existing(args.task, "--task")
    if args.dataset is not None and looks_like_path(args.dataset):
        require_existing(args.dataset, "--dataset")
    device, _ = chosen_device(args.device)
    if args.task:
        task, source = task_from_file(args.task), f"task file {args.task}"
    else:
        task = dataset_row(args.dataset, args.id, args.config, args.download_to)
        source = f"dataset {args.dataset} (config {args.config}), task {args.id}"
    description = make_workdir(task, args.out, resolved_options({"device": device}), source, force=args.force)
    configs = ", ".join(c["name"] for c in description["configs"])
    print(f"wrote {args.out}: SKILL.md, task.py, task.json, model_new.py, compile.py, verify.py, profiling.py "
          f"(task {task['id']}; input configurations checked: {configs})", file=sys.stderr)
    return 0
