"""The bad-task suite: every file in tests/bad_tasks/ is rejected for the reason its name starts with, and
mixing the whole suite into a good set leaves the good set's verdicts unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from filters.static import Funnel
from filters.validate import validate_records
from opgen.jsonl import read_inputs
from scripts.devtools.shrink import shrink_sizes

BAD_TASKS = Path(__file__).parent / "bad_tasks"
# A CPU window wide enough for the shrunk KernelBench tasks, too narrow for the slow bad tasks. Those run about
# 300 ms a pass (2x the window) and the checks make some twenty passes before the runtime check rejects them: 5-7 s
# of a worker on the 2-core development machine, well inside the 25 s time limit (at 3x the window and more, one of
# them ran past it on a loaded CI machine and was rejected as a timeout).
WINDOW_MS = (0.0, 150.0)
SETTINGS = {"workers": 2, "timeout_s": 25.0, "memory_mb": 2048, "runtime_window_ms": WINDOW_MS}
GOOD_NAMES = ("1_Square_matrix_multiplication_.py", "23_Softmax.py", "50_conv_standard_2D__square_input__square_kernel.py",
              "1_Conv2D_ReLU_BiasAdd.py", "5_ConvTranspose2d_Subtract_Tanh.py",
              "12_Gemm_Multiply_LeakyReLU.py")
STABLE_FIELDS = ("source", "id", "keep", "reason", "output_shape", "work_ops")
# Batch and channel constants shrunk to 4: the slowest good task (the 11x11 convolution) then takes about 26 ms
# an eager pass on one core, a sixth of the window, so a loaded 2-core machine still keeps it (at 16 it took
# 74 ms, half the window, and a CI run on a loaded machine once dropped a good task).
GOOD_CAP = 4


def expected_reason(source: str) -> str:
    return source.split("__", 1)[0]


def good_records(rows: list[dict]) -> list[dict]:
    chosen = [r for r in rows if r["level"] <= 2 and r["name"] in GOOD_NAMES]
    return [{"source": f"L{r['level']}/{r['name']}", "id": f"kb-{r['level']}-{r['problem_id']}",
             "code": shrink_sizes(r["code"], cap=GOOD_CAP)} for r in chosen]


def stable(line: dict) -> dict:
    return {key: line.get(key) for key in STABLE_FIELDS}


def test_the_suite_covers_every_reason_three_times():
    reasons = [expected_reason(p.name) for p in BAD_TASKS.glob("*.py")]
    owned = ("parse_error", "invalid_task", "unsafe_code", "stochastic_op", "exec_error", "crash", "timeout",
             "compile_error", "compile_mismatch", "nondeterministic", "non_finite", "degenerate_output", "trivial",
             "runtime_out_of_range")
    assert {r: reasons.count(r) for r in owned if reasons.count(r) < 3} == {}


@pytest.mark.heavy
def test_bad_tasks_rejected_for_the_right_reason_and_good_set_unchanged(kernelbench_problems):
    bad = read_inputs(BAD_TASKS)
    good = good_records(kernelbench_problems)
    assert len(good) == len(GOOD_NAMES)

    mixed_records = []
    for index, record in enumerate(bad):  # interleave: good tasks run in workers that just crashed or hung
        mixed_records.append(record)
        if index % 9 == 0 and good:
            mixed_records.append(good[len(mixed_records) % len(good)])
    mixed_records += good
    funnel = Funnel()
    mixed = validate_records(mixed_records, funnel=funnel, **SETTINGS)

    assert len(mixed) == len(mixed_records)
    assert [line["source"] for line in mixed] == [r["source"] for r in mixed_records]
    wrong = {line["source"]: (line["reason"], line.get("detail", "")[:300]) for line in mixed
             if line["source"] in {r["source"] for r in bad} and line["reason"] != expected_reason(line["source"])}
    assert wrong == {}
    # the good set, last and together, is the baseline: each good task judged right after a crash, a hang or a
    # memory blow-up gets the verdict it gets there, and every one is kept
    by_source = {line["source"]: stable(line) for line in mixed[-len(good):]}
    assert sorted(by_source) == sorted(r["source"] for r in good)
    dropped = {line["source"]: (line["reason"], line.get("detail", "")[:300]) for line in mixed[-len(good):]
               if not line["keep"]}
    assert dropped == {}
    interleaved = [line for line in mixed[:-len(good)] if line["source"] in by_source]
    assert len(interleaved) >= 5
    for line in interleaved:
        assert stable(line) == by_source[line["source"]]
    assert funnel.inputs == len(mixed_records)
    assert funnel.rejected["crash"] == 3 and funnel.rejected["timeout"] == 3
    assert not Path("/tmp/opgen_pwned.txt").exists()
