"""The state one task's execute checks share inside a worker: settings, the model, input draws, outputs."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

# The consuming environment checks candidates at atol = rtol = 1e-2.
CHECK_ATOL = CHECK_RTOL = 1e-2
# Run-to-run tolerance on CUDA (atomics make some reductions order-dependent); the CPU must be bit-identical.
CUDA_REPEAT_ATOL = 1e-5
CUDA_REPEAT_RTOL = 1e-4


@dataclass
class TaskRun:
    """Everything the checks of one task read and write."""

    code: str
    name: str
    device: str = "cpu"
    seed: int = 0
    draws: int = 3
    runtime_window_ms: tuple[float, float] | None = None
    timing_runs: int = 5
    namespace: dict = field(default_factory=dict)
    model: torch.nn.Module | None = None
    inputs: list[list] = field(default_factory=list)  # one input list per draw
    outputs: list[list[torch.Tensor]] = field(default_factory=list)  # eager outputs, one per draw
    work_ops: int = 0
    metrics: dict = field(default_factory=dict)

    @classmethod
    def from_payload(cls, payload: dict) -> TaskRun:
        window = payload.get("runtime_window_ms")
        return cls(code=payload["code"], name=str(payload.get("id", "task")), device=payload.get("device", "cpu"),
                   seed=int(payload.get("seed", 0)), draws=int(payload.get("draws", 3)),
                   runtime_window_ms=tuple(window) if window else None,
                   timing_runs=int(payload.get("timing_runs", 5)))

    def draw_seed(self, draw: int) -> int:
        return self.seed + 1 + draw

    def synchronize(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()
