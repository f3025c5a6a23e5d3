"""Known-good tasks are kept: KernelBench levels 1 and 2, shrunk to CPU size, validated on the CPU with 2 workers.

The exceptions are tasks that really are stochastic, degenerate or trivial; each is named below with its
reason, and the verdict line's metrics are the evidence that is asserted.
"""

from __future__ import annotations

import pytest

from filters.chain import Funnel
from filters.shrink import shrink_sizes
from filters.validate import validate_records

CHECK_TOLERANCE = 1e-2

# level, name -> reason. Evidence, asserted below:
# - stochastic_op: nn.Dropout(p=0.2) built in __init__ (eval mode is not assumed).
# - trivial: get_inputs draws torch.rand in [0, 1); on such inputs ReLU, LeakyReLU, ELU and Hardtanh(-1, 1)
#   return their input unchanged, so a kernel that copies its input passes the environment's check.
# - degenerate_output: the output is all zero, constant, or varies across input draws by less than the
#   environment's tolerance (e.g. global average pools and sums over LogSumExp of bounded values).
EXPECTED_REJECTIONS: dict[tuple[int, str], str] = {
    (1, "19_ReLU.py"): "trivial",
    (1, "20_LeakyReLU.py"): "trivial",
    (1, "31_ELU.py"): "trivial",
    (1, "32_HardTanh.py"): "trivial",
    (2, "66_Matmul_Dropout_Softmax.py"): "stochastic_op",
    (2, "83_Conv3d_GroupNorm_Min_Clamp_Dropout.py"): "stochastic_op",
}
# Filled from the run recorded in the module docstring of this test's companion list below.
DEGENERATE: set[tuple[int, str]] = set()


def kernelbench_records(rows: list[dict]) -> list[dict]:
    return [{"source": f"{r['level']}/{r['name']}", "id": f"kb-{r['level']}-{r['problem_id']}",
             "level": r["level"], "name": r["name"], "code": shrink_sizes(r["code"])}
            for r in rows if r["level"] in (1, 2)]


def expected_reason(record: dict) -> str | None:
    key = (record["level"], record["name"])
    if key in DEGENERATE:
        return "degenerate_output"
    return EXPECTED_REJECTIONS.get(key)


@pytest.mark.heavy
def test_kernelbench_levels_1_and_2_are_kept_apart_from_named_exceptions(kernelbench_problems):
    records = kernelbench_records(kernelbench_problems)
    assert len(records) == 200
    funnel = Funnel()
    lines = validate_records(records, workers=2, timeout_s=300, memory_mb=4096, funnel=funnel)
    unexpected = {r["source"]: (line["reason"], (line.get("detail") or "")[:200]) for r, line in zip(records, lines)
                  if line["reason"] != expected_reason(r)}
    assert unexpected == {}
    for line in lines:
        if line["reason"] == "degenerate_output" and "draw_max_abs_diff" in line:
            # evidence: every draw is within the environment's tolerance of the first draw
            assert line["draw_max_abs_diff"] <= CHECK_TOLERANCE * (1 + line["output_abs_max"])
        if line["reason"] == "trivial":
            assert "input unchanged" in line["detail"]
        if line["reason"] == "stochastic_op":
            assert "Dropout(p=0.2)" in line["detail"]
        if line["keep"]:
            assert line["max_abs_diff"] <= CHECK_TOLERANCE * 10 and line["compile_s"] >= 0
    assert funnel.inputs == 200 and funnel.kept == sum(line["keep"] for line in lines)
