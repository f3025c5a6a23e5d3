"""A grade told to the agent that must act on it: what passed, or what failed, where (the input configuration and
its sizes), what the reason means, and what to do next; and a profile's times and where they go."""

from __future__ import annotations

import re

from opgen.grading.beside_solution.kernels_only import GLUE_TEXT
from opgen.grading.milestones import milestone_text
from opgen.grading.reasons import REASONS

NEXT_STEP = {
    "parse_error": "fix the syntax error at the line named above",
    "unsafe_code": "remove what is named above: a solution imports only torch, math, triton and "
                   "torch.utils.cpp_extension, and touches no files, processes or interpreter internals",
    "tampering": "change nothing outside your own module: no patched torch functions or classes, no global hooks, "
                 "no torch function modes, no operators overridden",
    "invalid_solution": "define `class ModelNew(nn.Module)` taking the same constructor arguments as Model",
    "compile_error": "fix the compiler's first error above (`python compile.py` prints its messages)",
    "torch_operator": f"replace each PyTorch operator named above with a kernel of your own (an extension "
                      f"function or a Triton kernel); glue is allowed: {GLUE_TEXT}",
    "exec_error": "the error above names the failing line: check shapes, dtypes, devices, and that the tensors "
                  "your kernels read are contiguous",
    "timeout": "the solution ran past the time limit: look for an endless loop or a kernel far slower than planned",
    "crash": "the process died (a segfault or an abort): look for out-of-bounds reads or writes in your kernels",
    "out_of_memory": "allocate less: no buffers sized to more than the problem, no copies kept across calls",
    "output_format": "return what Model.forward returns: the same number of tensors, shapes, dtypes and devices",
    "output_aliases_input": "return a tensor of your own, never an input or a view of one",
    "input_modified": "never write into the inputs: allocate the output (torch.empty) and write there",
    "unsynchronized": "launch your kernels on the current stream (torch.cuda.current_stream(), "
                      "at::cuda::getCurrentCUDAStream()) so the outputs are ready when forward returns",
    "non_finite": "NaN or infinity where the reference is finite: look for reads of uninitialised memory "
                  "(torch.empty), a division by zero, or indices past the end",
    "mismatch": "if only held_out_* configurations fail, the kernel depends on the published sizes (sizes written "
                "into the code, block sizes that must divide them, missing bounds checks); else check the math, the "
                "indexing, and the precision of accumulations",
    "mismatch_after_timing": "the output is wrong on later calls: compute every output from its inputs, and keep "
                             "no results between calls",
    "reference_error": "the task itself fails: it is not your solution's fault; report it",
}


def verdict_text(grade: dict, configs: list[dict]) -> str:
    """The verify command's report on a grade (no timing)."""
    names = ", ".join(grade.get("configs") or [])
    draws = grade.get("draws")
    if grade.get("correct"):
        worst = grade.get("max_abs_error")
        ratio = grade.get("tolerance_ratio")
        lines = [f"PASS: model_new.py is correct on {draws} input draws of each configuration ({names}) at "
                 f"atol={grade.get('atol')}, rtol={grade.get('rtol')}; worst error {_number(worst)} (tolerance "
                 f"ratio {_number(ratio)}, where 1 is at the tolerance)."]
        if grade.get("kernels_only"):
            lines.append("The kernels-only rule holds: no PyTorch compute operator ran in the forward.")
        lines.append("Next: python profiling.py (times against eager and torch.compile, and where the time goes).")
        return "\n".join(lines)
    reason = grade.get("reason")
    lines = [f"FAIL ({reason}): {REASONS.get(reason, reason)}."]
    detail = grade.get("detail")
    if detail:
        lines.append(f"What failed: {_indent(detail)}")
    sizes = _config_sizes(detail, configs)
    if sizes:
        lines.append(f"That configuration's inputs: {sizes}")
    if NEXT_STEP.get(reason):
        lines.append(f"Next: {NEXT_STEP[reason]}.")
    return "\n".join(lines)


def _config_sizes(detail: str | None, configs: list[dict]) -> str | None:
    """The sizes and input shapes of the configuration a detail names (`held_out_1 draw 2: ...`)."""
    match = re.match(r"(\w+) draw \d+", detail or "")
    config = next((c for c in configs if match and c["name"] == match.group(1)), None)
    if config is None:
        return None
    shapes = ", ".join(str(tuple(x["shape"])) if "shape" in x else x.get("value", "?") for x in config["inputs"])
    sizes = ", ".join(f"{k}={v}" for k, v in config["sizes"].items()) or "the task's own sizes"
    return f"{sizes}; input shapes {shapes}"


def profile_text(grade: dict, task: dict) -> str:
    """The profile command's report: the times, the speed-ups, the milestone reward, and where the time goes."""
    if not grade.get("correct"):
        return "model_new.py is not correct, so it is not timed:\n" + verdict_text(grade, [])
    where = grade.get("hardware") or "this machine's CPU (host clock: a check of the path, not a GPU figure)"
    lines = [f"PROFILE on {where}:",
             f"  model_new.py   {_ms(grade.get('solution_ms'))}",
             f"  eager          {_ms(grade.get('eager_ms'))}   speed-up {_times(grade.get('speedup_eager'))}"]
    if grade.get("compile_ms") is not None:
        lines.append(f"  torch.compile  {_ms(grade.get('compile_ms'))}   speed-up {_times(grade.get('speedup_compile'))}")
    elif grade.get("compile_error"):
        lines.append(f"  torch.compile  not timed: {grade['compile_error'][:200]}")
    else:
        lines.append("  torch.compile  not timed (--no-compile-baseline)")
    reward = grade.get("reward")
    lines.append(f"  milestone reward: {reward:g} ({milestone_text(reward)})")
    if task.get("eager_ms") is not None:
        lines.append(f"  baselines recorded in the dataset: eager {_ms(task['eager_ms'])}, torch.compile "
                     f"{_ms(task.get('compile_ms'))} on {task.get('hardware') or 'an unnamed GPU'}")
    lines.append(f"  timing: {grade.get('timing_method')}")
    breakdown = grade.get("breakdown") or {}
    for who, title, outside in (("solution", "model_new.py", "your extension's own code, and Python"),
                                ("reference", "the eager reference", "Python")):
        if breakdown.get(who):
            lines += _breakdown_lines(breakdown[who], title, outside)
    if grade.get("breakdown_error"):
        lines.append(f"(no breakdown: {grade['breakdown_error']})")
    return "\n".join(lines)


def _breakdown_lines(part: dict, title: str, outside: str) -> list[str]:
    lines = [f"where {title}'s time goes, per call ({part['unit']}; {_ms(part['ms_per_call'])} in all):"]
    total = part["ms_per_call"] or 0.0
    if part.get("outside_ms") is not None and part["outside_ms"] > 0:
        share = part["outside_ms"] / total if total else None
        lines.append(f"  {_ms(part['outside_ms']):>11}  {_share(share):>4}  outside any PyTorch operator ({outside})")
    for row in part["rows"]:
        lines.append(f"  {_ms(row['ms']):>11}  {_share(row['share']):>4}  {row['name']}  ({row['calls']:g} per call)")
    return lines


def _indent(text: str) -> str:
    return text.strip().replace("\n", "\n  ")


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f} ms"


def _times(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}x"
