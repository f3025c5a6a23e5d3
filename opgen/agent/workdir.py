"""An agent's work folder for one task: the task, a starting `ModelNew`, a SKILL.md written for the task, what the
checks use (`task.json`), and the folder's own commands (compile, verify, profile), each a few lines calling
opgen's grading protocol."""

from __future__ import annotations

import json
from pathlib import Path

from opgen.agent.skill import render_skill
from opgen.errors import UsageError
from opgen.grading.describe import describe_task
from opgen.grading.run import GradeOptions
from opgen.grading.tasks import reference_solution

SOLUTION_FILE = "model_new.py"
TASK_FILE = "task.py"
SPEC_FILE = "task.json"
SKILL_FILE = "SKILL.md"
BUILD_FOLDER = "build"
COMMANDS = {"compile": "compile.py", "verify": "verify.py", "profile": "profiling.py"}
COMMAND_DOCS = {
    "compile": "Compile model_new.py's C++/CUDA extensions on a CPU worker, as the grader does (see SKILL.md).",
    "verify": "Check model_new.py exactly as `opgen grade --kernels-only` does, and say what to fix (see SKILL.md).",
    "profile": "Time model_new.py against eager and torch.compile, and show where the time goes (see SKILL.md).",
}
COMMAND_SCRIPT = '''"""{doc}"""

import sys
from pathlib import Path

from opgen.agent.folder import main

sys.exit(main("{command}", Path(__file__).resolve().parent, sys.argv[1:]))
'''
STARTER_HEADER = '''"""Your solution: ModelNew, a drop-in replacement for Model (task.py), fast and built from your own kernels.

It starts as the reference itself: `python verify.py` finds it correct but names every PyTorch operator its forward
runs, which the kernels-only rule forbids. Replace them with kernels of your own, for instance a C++/CUDA extension

    from torch.utils.cpp_extension import load_inline
    kernels = load_inline(name="my_kernels", cpp_sources=CPP, cuda_sources=CUDA, functions=["fused_forward"])

(`python compile.py` builds it), or Triton kernels (`import triton`, `import triton.language as tl`). Keep ModelNew's
constructor arguments and parameters as Model's: created in the same order, they get the reference's weights.
SKILL.md has the rules, the sizes checked and the commands.
"""

'''
# The row's fields the folder's commands grade with (the task's source is task.py).
SPEC_FIELDS = ("id", "atol", "rtol", "dtype", "eager_ms", "compile_ms", "hardware", "families")


def make_workdir(task: dict, out: str | Path, options: GradeOptions, source: str, force: bool = False) -> dict:
    """Write the work folder for `task` (a row: `id`, `code`, and the row's other fields) into `out`; returns the
    task's description (opgen.grading.describe). An existing model_new.py is kept; a folder holding other files
    needs `force`."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UsageError(f"--out {out} exists and is not empty: pass --force to write the folder's files again "
                         f"(its {SOLUTION_FILE} is kept)")
    description = describe_task(task, options)
    for index, config in enumerate(description["configs"][1:], start=1):
        config["name"] = f"held_out_{index}"   # as the folder's commands name them: the row's held-out sizes
    out.mkdir(parents=True, exist_ok=True)
    spec = {field: task.get(field) for field in SPEC_FIELDS}
    spec.update(atol=description["atol"], rtol=description["rtol"], held_out_sizes=description["held_out_sizes"],
                held_out_note=description.get("held_out_note"), configs=description["configs"], kernels_only=True,
                draws=options.draws, seed=options.seed, source=source)
    (out / TASK_FILE).write_text(task["code"], encoding="utf-8")
    (out / SPEC_FILE).write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
    (out / SKILL_FILE).write_text(render_skill(spec, task["code"], description), encoding="utf-8")
    for command, script in COMMANDS.items():
        (out / script).write_text(COMMAND_SCRIPT.format(doc=COMMAND_DOCS[command], command=command), encoding="utf-8")
    if not (out / SOLUTION_FILE).exists():
        (out / SOLUTION_FILE).write_text(STARTER_HEADER + reference_solution(task["code"]), encoding="utf-8")
    return description


def read_workdir(folder: str | Path) -> tuple[dict, str, dict]:
    """(the task as a grade takes it, model_new.py's source, task.json) of a work folder."""
    folder = Path(folder)
    for name in (TASK_FILE, SPEC_FILE, SOLUTION_FILE):
        if not (folder / name).is_file():
            raise UsageError(f"{folder} is not a work folder: {name} is missing (make one with `opgen workdir`)")
    try:
        spec = json.loads((folder / SPEC_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot read {folder / SPEC_FILE}: {error}") from None
    task = {field: spec.get(field) for field in SPEC_FIELDS}
    task.update(code=(folder / TASK_FILE).read_text(encoding="utf-8"), held_out_sizes=spec.get("held_out_sizes"))
    return task, (folder / SOLUTION_FILE).read_text(encoding="utf-8"), spec
