"""Execute filter `non_finite`: no NaN or Inf in any output of any input draw."""

from __future__ import annotations

import torch

from filters.base import Filter, Verdict
from filters.execute.task_run import TaskRun


def non_finite_detail(outputs: list[torch.Tensor]) -> str | None:
    for index, tensor in enumerate(outputs):
        if (tensor.is_floating_point() or tensor.is_complex()) and not bool(torch.isfinite(tensor).all()):
            nan = int(torch.isnan(tensor).sum())
            inf = int(torch.isinf(tensor).sum())
            return f"output {index}: {nan} NaN, {inf} Inf of {tensor.numel()} values"
    return None


class FiniteCheck(Filter):
    name = "finite"
    reads = ("outputs",)

    def filter(self, run: TaskRun) -> Verdict:
        for draw, outputs in enumerate(run.outputs):
            detail = non_finite_detail(outputs)
            if detail:
                return Verdict.reject("non_finite", f"draw {draw}: {detail}")
        return Verdict.ok()
