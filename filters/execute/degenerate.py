"""Execute filter `degenerate_output`: the output is not all zero, not constant, and depends on the input.

Several further input draws are run; if every one gives an output the environment's check
(atol = rtol = 1e-2) cannot tell from the first draw's, the task is degenerate.
"""

from __future__ import annotations

import torch

from filters.base import Filter, Verdict
from filters.execute.finite import non_finite_detail
from filters.execute.task_run import TaskRun
from filters.execute.tensors import abs_max, all_close, bit_equal, every_value, float64_chunks, max_abs_diff


def constant_detail(outputs: list[torch.Tensor]) -> str | None:
    tensors = [t for t in outputs if t.numel()]
    if not tensors:
        return "empty output"
    # float64 a chunk at a time (filters.execute.tensors): the answers of all values at once, in less memory
    if every_value(tensors, 0.0):
        return "output is all zero"
    first = next(float64_chunks(tensors[0]))[0]
    if sum(t.numel() for t in tensors) > 1 and every_value(tensors, first):
        return f"output is constant ({first.item():.6g})"
    return None


class DegenerateCheck(Filter):
    name = "degenerate"
    holds_gpu_lock_itself = True   # a hold per input draw, not one for all of them
    reads = ("namespace", "model", "inputs", "outputs")
    writes = ("outputs", "input_digests")  # draws 1..draws: their outputs, their inputs' fingerprints

    def filter(self, run: TaskRun) -> Verdict:
        with run.sharing_gpu():
            detail = constant_detail(run.outputs[0])
        if detail:
            return Verdict.reject("degenerate_output", detail)
        first_tensors = _tensors(run.inputs)
        same_inputs = True
        for draw in range(1, run.draws + 1):
            with run.sharing_gpu():  # one hold per draw: its inputs, one forward pass, the scans of its output
                inputs = run.inputs_of(draw)
                outputs = run.forward(run.model, inputs)
                bad = non_finite_detail(outputs)
                same_inputs = same_inputs and not bad and bit_equal(first_tensors, _tensors(inputs))
            if bad:
                return Verdict.reject("non_finite", f"draw {draw}: {bad}")
            run.outputs.append(outputs)
            del inputs  # drawn again when a later check needs them (TaskRun.inputs_of)
        first = run.outputs[0]
        tolerance = run.tolerance
        with run.sharing_gpu():
            metrics = {"draw_max_abs_diff": max((max_abs_diff(first, other) or 0.0) for other in run.outputs[1:]),
                       "output_abs_max": abs_max(first)}
            same_outputs = all(all_close(first, other, tolerance.atol, tolerance.rtol) for other in run.outputs[1:])
        if same_outputs:
            why = "get_inputs returns the same inputs every draw" if same_inputs else \
                f"output the same within {tolerance.text()} for {run.draws + 1} independent input draws"
            return Verdict.reject("degenerate_output", why, **metrics)
        return Verdict.ok(**metrics)


def _tensors(values: list) -> list[torch.Tensor]:
    return [x for x in values if isinstance(x, torch.Tensor)]
