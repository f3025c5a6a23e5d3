"""Execute filter `trivial`: the forward does some work (a compute op), and does not return an input unchanged."""

from __future__ import annotations

import torch

from filters.base import Filter, Verdict
from filters.execute.task_run import TaskRun

MIN_WORK_OPS = 1


def _returns_an_input(inputs: list, outputs: list[torch.Tensor]) -> bool:
    for output in outputs:
        for value in inputs:
            if (isinstance(value, torch.Tensor) and value.numel() == output.numel() and value.dtype == output.dtype
                    and torch.equal(value.flatten(), output.flatten())):
                return True
    return False


class TrivialCheck(Filter):
    name = "trivial"
    reads = ("namespace", "work_ops", "inputs", "outputs", "input_digests")

    def filter(self, run: TaskRun) -> Verdict:
        if run.work_ops < MIN_WORK_OPS:
            return Verdict.reject("trivial", f"forward runs {run.work_ops} compute ops (only views/copies)")
        if len(run.outputs[0]) == 1 and all(_returns_an_input(run.inputs_of(draw), outputs)
                                            for draw, outputs in enumerate(run.outputs)):
            return Verdict.reject("trivial", "the output is an input unchanged")
        return Verdict.ok()
