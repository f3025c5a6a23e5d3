"""Task precisions: their names, how a task spells them, and the tolerance each one's checks use."""

from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("fp32", "bf16", "fp16")
DEFAULT_DTYPE = "fp32"
TORCH_SPELLING = {"fp32": "torch.float32", "bf16": "torch.bfloat16", "fp16": "torch.float16"}
ELEMENT_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


@dataclass(frozen=True)
class Tolerance:
    """The check a candidate's output must pass (`atol`, `rtol`), the run-to-run tolerance of one kernel on CUDA
    (`repeat_atol`, `repeat_rtol`), and where the check's figures come from."""

    dtype: str
    atol: float
    rtol: float
    repeat_atol: float
    repeat_rtol: float
    source: str

    def text(self) -> str:
        return f"atol=rtol={self.atol}" if self.atol == self.rtol else f"atol={self.atol}, rtol={self.rtol}"


# fp32: the consuming environment's check. bf16 and fp16: KernelBench's tolerance for both (1e-2, after torchbench),
# the same as the consumer's fp32 one. Run to run, an order-dependent reduction may move a value by a unit or two
# in its last place: 2^-8 of it in bf16 (8 significant bits), 2^-11 in fp16, far less in fp32.
TOLERANCES = {
    "fp32": Tolerance("fp32", 1e-2, 1e-2, 1e-5, 1e-4, "the consuming environment's check (atol = rtol = 1e-2)"),
    "bf16": Tolerance("bf16", 1e-2, 1e-2, 1e-3, 8e-3, "KernelBench's bf16 and fp16 tolerance (1e-2, after torchbench)"),
    "fp16": Tolerance("fp16", 1e-2, 1e-2, 1e-4, 2e-3, "KernelBench's bf16 and fp16 tolerance (1e-2, after torchbench)"),
}
_BY_TORCH_DTYPE = {spelling: name for name, spelling in TORCH_SPELLING.items()}


def dtype_of(tensors) -> str:
    """The task precision of a list of tensors: that of the first floating one (fp32 when none is)."""
    for tensor in tensors:
        name = _BY_TORCH_DTYPE.get(str(getattr(tensor, "dtype", "")))
        if name is not None:
            return name
    return DEFAULT_DTYPE


def tolerance_of(tensors) -> Tolerance:
    """The tolerance of the precision `tensors` are in (a task's outputs)."""
    return TOLERANCES[dtype_of(tensors)]
