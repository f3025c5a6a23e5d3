"""Known-good tasks are kept: KernelBench levels 1 and 2, shrunk to CPU size, validated on the CPU with 2 workers.

The exceptions are tasks that really are stochastic, degenerate or trivial; each is named below with its
reason, and the verdict line's metrics are the evidence that is asserted.
"""

from __future__ import annotations

import pytest

from filters.execute import STAGE_NAMES
from filters.execute.visible import MAX_ACCEPTED_SHARE
from filters.static import Funnel
from filters.validate import validate_records
from scripts.devtools.shrink import shrink_sizes

CHECK_TOLERANCE = 1e-2

# level, name -> reason. Evidence, asserted below:
# - stochastic_op: nn.Dropout(p=0.2) built in __init__ (eval mode is not assumed).
# - trivial: get_inputs draws torch.rand in [0, 1); on such inputs ReLU, LeakyReLU, ELU and Hardtanh(-1, 1)
#   return their input unchanged, so a kernel that copies its input passes the environment's check.
# - degenerate_output: the output is all zero, constant, or varies across input draws by less than the
#   environment's tolerance (global average pools, means of GroupNorm outputs, LogSumExp of bounded values,
#   a Frobenius-normalised output whose values are all far below atol). Judged at the shrunk sizes.
EXPECTED_REJECTIONS: dict[tuple[int, str], str] = {
    (1, "19_ReLU.py"): "trivial",
    (1, "20_LeakyReLU.py"): "trivial",
    (1, "31_ELU.py"): "trivial",
    (1, "32_HardTanh.py"): "trivial",
    (2, "66_Matmul_Dropout_Softmax.py"): "stochastic_op",
    (2, "83_Conv3d_GroupNorm_Min_Clamp_Dropout.py"): "stochastic_op",
}
DEGENERATE = {(1, "37_FrobeniusNorm_.py")} | {(2, name) for name in (
    "8_Conv3d_Divide_Max_GlobalAvgPool_BiasAdd_Sum.py", "9_Matmul_Subtract_Multiply_ReLU.py",
    "23_Conv3d_GroupNorm_Mean.py", "30_Gemm_GroupNorm_Hardtanh.py", "36_ConvTranspose2d_Min_Sum_GELU_Add.py",
    "37_Matmul_Swish_Sum_GroupNorm.py", "38_ConvTranspose3d_AvgPool_Clamp_Softmax_Multiply.py",
    "42_ConvTranspose2d_GlobalAvgPool_BiasAdd_LogSumExp_Sum_Multiply.py",
    "44_ConvTranspose2d_Multiply_GlobalAvgPool_GlobalAvgPool_Mean.py", "45_Gemm_Sigmoid_LogSumExp.py",
    "49_ConvTranspose3d_Softmax_Sigmoid.py", "58_ConvTranspose3d_LogSumExp_HardSwish_Subtract_Clamp.py",
    "62_Matmul_GroupNorm_LeakyReLU_Sum.py", "65_Conv2d_AvgPool_Sigmoid_Sum.py", "75_Gemm_GroupNorm_Min_BiasAdd.py",
    "77_ConvTranspose3d_Scale_BatchNorm_GlobalAvgPool.py", "80_Gemm_Max_Subtract_GELU.py",
    "88_Gemm_GroupNorm_Swish_Multiply_Swish.py", "89_ConvTranspose3d_MaxPool_Softmax_Subtract_Swish_Max.py",
    "94_Gemm_BiasAdd_Hardtanh_Mish_GroupNorm.py", "96_ConvTranspose3d_Multiply_Max_GlobalAvgPool_Clamp.py")}
# - the every-operator rule (trivial): made the identity, the named statement leaves the output within the
#   check's tolerance on every draw. Eval-mode batch norms at their default running statistics (the identity
#   within 1e-5), a ReLU after a positive LogSumExp, a clamp or hardtanh whose bounds the values never reach,
#   a max or LogSumExp over a dimension of size 1, a constant added before a LayerNorm or scaled by 1.
OPERATOR_WORK: dict[tuple[int, str], str] = {
    (1, '33_BatchNorm.py'): 'self.bn(x)',
    (2, '2_ConvTranspose2d_BiasAdd_Clamp_Scaling_Clamp_Divide.py'): 'torch.clamp(x, min=0.0, max=1.0)',
    (2, '3_ConvTranspose3d_Sum_LayerNorm_AvgPool_GELU.py'): 'x + self.sum_weight',
    (2, '7_Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd.py'): 'torch.relu(x)',
    (2, '10_ConvTranspose2d_MaxPool_Hardtanh_Mean_Tanh.py'): 'self.hardtanh(x)',
    (2, '11_ConvTranspose2d_BatchNorm_Tanh_MaxPool_GroupNorm.py'): 'self.batch_norm(x)',
    (2, '15_ConvTranspose3d_BatchNorm_Subtract.py'): 'self.batch_norm(x)',
    (2, '18_Matmul_Sum_Max_AvgPool_LogSumExp_LogSumExp.py'): 'torch.max(x, dim=1, keepdim=True)[0]',
    (2, '22_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish.py'): 'torch.clamp(x, self.clamp_min, self.clamp_max)',
    (2, '33_Gemm_Scale_BatchNorm.py'): 'self.bn(x)',
    (2, '34_ConvTranspose3d_LayerNorm_GELU_Scaling.py'): 'x * self.scaling_factor',
    (2, '39_Gemm_Scale_BatchNorm.py'): 'self.bn(x)',
    (2, '41_Gemm_BatchNorm_GELU_ReLU.py'): 'self.batch_norm(x)',
    (2, '43_Conv3d_Max_LogSumExp_ReLU.py'): 'torch.relu(x)',
    (2, '51_Gemm_Subtract_GlobalAvgPool_LogSumExp_GELU_ResidualAdd.py'): 'torch.logsumexp(x, dim=1, keepdim=True)',
    (2, '52_Conv2d_Activation_BatchNorm.py'): 'self.bn(x)',
    (2, '53_Gemm_Scaling_Hardtanh_GELU.py'): 'self.hardtanh(x)',
    (2, '64_Gemm_LogSumExp_LeakyReLU_LeakyReLU_GELU_GELU.py'): 'torch.nn.functional.leaky_relu(x, negative_slope=0.01)',
    (2, '68_Matmul_Min_Subtract.py'): 'torch.min(x, self.constant)',
    (2, '73_Conv2d_BatchNorm_Scaling.py'): 'self.bn(x)',
    (2, '81_Gemm_Swish_Divide_Clamp_Tanh_Clamp.py'): 'torch.clamp(x, min=-1.0, max=1.0)',
    (2, '84_Gemm_BatchNorm_Scaling_Softmax.py'): 'self.bn(x)',
    (2, '95_Matmul_Add_Swish_Tanh_GELU_Hardtanh.py'): 'torch.nn.functional.hardtanh(x, min_val=-1, max_val=1)',
    (2, '97_Matmul_BatchNorm_BiasAdd_Divide_Swish.py'): 'self.bn(x)',
    (2, '100_ConvTranspose3d_Clamp_Min_Divide.py'): 'torch.clamp(x, min=self.min_value)',
}
# - the visibility rule (degenerate_output): all zeros, another draw's median or another draw's output passes
#   the check on more than 90% of the output values (pooled or normalised outputs that barely follow their input).
VISIBILITY = {
    (2, '13_ConvTranspose3d_Mean_Add_Softmax_Tanh_Scaling.py'),
    (2, '27_Conv3d_HardSwish_GroupNorm_Mean.py'),
    (2, '50_ConvTranspose3d_Scaling_AvgPool_BiasAdd_Scaling.py'),
    (2, '67_Conv2d_GELU_GlobalAvgPool.py'),
    (2, '72_ConvTranspose3d_BatchNorm_AvgPool_AvgPool.py'),
    (2, '85_Conv2d_GroupNorm_Scale_MaxPool_Clamp.py'),
    (2, '91_ConvTranspose2d_Softmax_BiasAdd_Scaling_Sigmoid.py'),
    (2, '93_ConvTranspose2d_Add_Min_GELU_Multiply.py'),
}
# Volumetric tasks (3-D convolutions and pools) get a spatial cap of 16: at 32 a stride-2 transposed 3-D convolution's
# output is 33M values, and 18 of level 2's volumetric tasks took 278 of its 295 worker-seconds on the 2-core machine
# (58 at 16; each record's `worker_s` from `validate_records` over the level without the compile check, 2 workers).
VOLUMETRIC_SPATIAL_CAP = 16
# The exceptions. Two apply LayerNorm(out_channels) to the last spatial dim of a stride-2 transposed conv output,
# which only works while 2 * width == out_channels: they need a smaller cap to keep that coupling. Two keep the
# default cap: at 16, Conv3d 23's channel count is no longer divisible by its groups, and Conv3d 27's output is no
# longer degenerate.
# The others are the slowest convolutions at the default sizes, shrunk further with the same verdicts: the eight took
# 101 of the two levels' 173 worker-seconds without the compile check; with them shrunk the levels take 77 (each
# record's `worker_s`, 2 workers, the 2-core machine).
SHRINK_OVERRIDES = {(2, "3_ConvTranspose3d_Sum_LayerNorm_AvgPool_GELU.py"): {"spatial_cap": 8},
                    (2, "34_ConvTranspose3d_LayerNorm_GELU_Scaling.py"): {"spatial_cap": 8},
                    (2, "23_Conv3d_GroupNorm_Mean.py"): {}, (2, "27_Conv3d_HardSwish_GroupNorm_Mean.py"): {},
                    (1, "77_conv_transposed_3D_square_input_square_kernel___padded____dilated____strided__.py"):
                        {"spatial_cap": 8},
                    (1, "81_conv_transposed_2D_asymmetric_input_square_kernel___dilated____padded____strided__.py"):
                        {"spatial_cap": 16},
                    (1, "50_conv_standard_2D__square_input__square_kernel.py"): {"cap": 8},
                    **{(2, name): {"spatial_cap": 8} for name in (
                        "15_ConvTranspose3d_BatchNorm_Subtract.py",
                        "20_ConvTranspose3d_Sum_ResidualAdd_Multiply_ResidualAdd.py",
                        "26_ConvTranspose3d_Add_HardSwish.py", "49_ConvTranspose3d_Softmax_Sigmoid.py",
                        "60_ConvTranspose3d_Swish_GroupNorm_HardSwish.py")}}


def shrink_options(level: int, name: str) -> dict:
    if (level, name) in SHRINK_OVERRIDES:
        return SHRINK_OVERRIDES[(level, name)]
    return {"spatial_cap": VOLUMETRIC_SPATIAL_CAP} if "3d" in name.lower() else {}


def kernelbench_records(rows: list[dict]) -> list[dict]:
    return [{"source": f"{r['level']}/{r['name']}", "id": f"kb-{r['level']}-{r['problem_id']}",
             "level": r["level"], "name": r["name"],
             "code": shrink_sizes(r["code"], **shrink_options(r["level"], r["name"]))}
            for r in rows if r["level"] in (1, 2)]


def expected_reason(record: dict) -> str | None:
    key = (record["level"], record["name"])
    if key in DEGENERATE or key in VISIBILITY:
        return "degenerate_output"
    if key in OPERATOR_WORK:
        return "trivial"
    return EXPECTED_REJECTIONS.get(key)


# The compile check is a C++ build per kernel on the CPU (about 100 of the 274 s both levels took on the 2-core
# machine): every check but it runs on all of a level's tasks, the whole chain on every COMPILED_EVERY-th kept one.
COMPILED_EVERY = 20


@pytest.mark.heavy
def test_kernelbench_level_1_is_kept_apart_from_named_exceptions(kernelbench_problems):
    check_level(kernelbench_problems, 1)   # level 2: test_validate_kernelbench_level2.py, for a worker of its own


def check_level(kernelbench_problems: list[dict], level: int) -> None:
    """Validate the level's 100 problems, shrunk to CPU size; each verdict is the expected one, with its evidence."""
    records = [record for record in kernelbench_records(kernelbench_problems) if record["level"] == level]
    assert len(records) == 100
    funnel = Funnel()
    uncompiled = tuple(name for name in STAGE_NAMES if name != "compile")
    lines = validate_records(records, workers=2, timeout_s=300, memory_mb=4096, funnel=funnel, checks=uncompiled)
    kept = [index for index, record in enumerate(records) if expected_reason(record) is None]
    sample = kept[::COMPILED_EVERY]
    compiled = validate_records([records[i] for i in sample], workers=2, timeout_s=300, memory_mb=4096)
    assert all(line["compile_s"] >= 0 and line["max_abs_diff"] <= CHECK_TOLERANCE * 10 for line in compiled)
    for index, line in zip(sample, compiled):
        assert (line["keep"], line["reason"]) == (lines[index]["keep"], lines[index]["reason"])
        lines[index] = line
    unexpected = {r["source"]: (line["reason"], (line.get("detail") or "")[:200]) for r, line in zip(records, lines)
                  if line["reason"] != expected_reason(r)}
    assert unexpected == {}
    for line in lines:
        key = (int(line["source"].split("/")[0]), line["source"].split("/", 1)[1])
        if key in VISIBILITY:
            assert line["detail"].startswith("visibility rule") and max(
                line[f"accept_{answer}_share"] for answer in ("zero", "constant", "stale")) > MAX_ACCEPTED_SHARE
        elif line["reason"] == "degenerate_output" and "draw_max_abs_diff" in line:
            # evidence: every draw is within the environment's tolerance of the first draw
            assert line["draw_max_abs_diff"] <= CHECK_TOLERANCE * (1 + line["output_abs_max"])
        if line["reason"] == "trivial" and key in OPERATOR_WORK:
            assert line["detail"].startswith(f"every-operator rule: without `{OPERATOR_WORK[key]}`")
        elif line["reason"] == "trivial":
            assert "input unchanged" in line["detail"]
        if line["reason"] == "stochastic_op":
            assert "Dropout(p=0.2)" in line["detail"]
    assert funnel.inputs == 100 and funnel.kept == sum(line["keep"] for line in lines)
