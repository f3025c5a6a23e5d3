"""The work folder's own commands: compile (the extensions, on a CPU worker), verify (the grade's checks, the
kernels-only rule included) and profile (timed against eager and torch.compile, with where the time goes). Each
calls opgen's grading protocol on the folder's task.py, task.json and model_new.py."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from opgen.agent.feedback import profile_text, verdict_text
from opgen.agent.workdir import BUILD_FOLDER, COMMANDS, SOLUTION_FILE, read_workdir
from opgen.errors import MachineFault, UsageError
from opgen.grading.api import resolved_options
from opgen.grading.extensions import EXTENSIONS_DIR_ENV, compile_stage, needs_compile
from opgen.grading.run import GradeOptions, grade_task, payload_for, static_line, worker_threads

DESCRIPTIONS = {
    "compile": "Compile the C++/CUDA extensions model_new.py builds (torch.utils.cpp_extension), on a CPU worker that "
               "sees no GPU, as the grader does before a grade; prints the compiler's errors. Exit 0 built (or "
               "nothing to build), 1 failed, 2 could not run.",
    "verify": "Check model_new.py as the grade does (every input configuration, the kernels-only rule); exit 0 "
              "correct, 1 not (with what to fix), 2 could not run.",
    "profile": "Time model_new.py against eager PyTorch and torch.compile, give the milestone reward, and show where "
               "the time goes kernel by kernel; exit 0 timed, 1 not correct, 2 could not run.",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:   # one line, exit 2
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def parser_for(command: str) -> argparse.ArgumentParser:
    parser = _Parser(prog=f"python {COMMANDS[command]}", description=DESCRIPTIONS[command])
    parser.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto",
                        help="where it runs (default auto: cuda when a GPU is visible, else cpu)")
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    if command == "profile":
        parser.add_argument("--no-compile-baseline", action="store_true", help="leave torch.compile's time out")
        parser.add_argument("--trials", type=int, default=100, help="the most timed trials (adaptive, from 10)")
    return parser


def main(command: str, folder: Path, argv: list[str]) -> int:
    """Run one of the folder's commands; the exit status (0 passed, 1 failed, 2 could not run)."""
    args = parser_for(command).parse_args(argv)
    try:
        task, code, spec = read_workdir(folder)
        options = _options(command, args, spec, folder)
        if command == "compile":
            return _compile(task, code, options, args.json)
        grade = grade_task(task, code, options)
    except (UsageError, MachineFault) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(grade, indent=1))
    else:
        print(verdict_text(grade, spec.get("configs") or []) if command == "verify" else profile_text(grade, task))
    return 0 if grade["correct"] else 1


def _options(command: str, args, spec: dict, folder: Path) -> GradeOptions:
    profile = command == "profile"
    return resolved_options({
        "device": args.device, "kernels_only": bool(spec.get("kernels_only", True)), "draws": spec.get("draws", 5),
        "seed": spec.get("seed", 0), "timing": profile, "breakdown": profile,
        "compile_baseline": (not args.no_compile_baseline) if profile else None,
        "trials": args.trials if profile else 100, "extensions_dir": _extensions_dir(folder)})


def _extensions_dir(folder: Path) -> str | None:
    """The folder's own build/ unless OPGEN_EXTENSIONS_DIR names a shared one."""
    return None if os.environ.get(EXTENSIONS_DIR_ENV) else str(folder / BUILD_FOLDER)


def _compile(task: dict, code: str, options: GradeOptions, as_json: bool) -> int:
    found = static_line(code, options)
    if found is None and not needs_compile(code):
        result = {"status": "nothing to build", "detail": f"{SOLUTION_FILE} builds no C++/CUDA extension (Triton "
                                                          "kernels are compiled by Triton when first launched)"}
    elif found is None:
        payload = payload_for(task, code, options, worker_threads(options))
        failed = compile_stage([payload], options).get(0)
        if failed:
            result = {"status": "failed", **failed}
        else:
            compiled = payload["compiled"]
            result = {"status": "built", **compiled}
    else:
        result = {"status": "failed", **found}
    if as_json:
        print(json.dumps(result, indent=1))
    else:
        print(_compile_text(result))
    return 1 if result["status"] == "failed" or result.get("module_error") else 0


def _compile_text(result: dict) -> str:
    if result["status"] == "nothing to build":
        return f"Nothing to compile: {result['detail']}."
    if result["status"] == "failed":
        return f"FAILED ({result['reason']}):\n  " + (result.get("detail") or "").strip().replace("\n", "\n  ")
    names = ", ".join(e["name"] for e in result["extensions"]) or "none"
    text = (f"Built on a CPU worker in {result['seconds']:.1f} s: {names}. verify.py and profiling.py load these "
            "builds without compiling again.")
    if result.get("module_error"):
        text += f"\nBut model_new.py then failed: {result['module_error']} (verify.py reports it in full)."
    return text
