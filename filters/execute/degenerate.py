"""Execute filter `degenerate_output`: the output is not all zero, not constant, and depends on the input.

Several further input draws are run; if every one gives an output the environment's check
(atol = rtol = 1e-2) cannot tell from the first draw's, the task is degenerate.
"""

from __future__ import annotations

import torch

from filters.base import Filter, Verdict
from filters.execute.finite import non_finite_detail
from filters.execute.task_run import CHECK_ATOL, CHECK_RTOL, TaskRun
from filters.execute.tensors import all_close, as_float64, bit_equal, max_abs_diff
from opgen.sandbox.task import draw_inputs


def constant_detail(outputs: list[torch.Tensor]) -> str | None:
    values = torch.cat([t.detach().flatten().double() for t in outputs if t.numel()]) if outputs else None
    if values is None or values.numel() == 0:
        return "empty output"
    if bool((values == 0).all()):
        return "output is all zero"
    if values.numel() > 1 and bool((values == values[0]).all()):
        return f"output is constant ({values[0].item():.6g})"
    return None


class DegenerateCheck(Filter):
    name = "degenerate"
    reads = ("namespace", "model", "inputs", "outputs")
    writes = ("inputs", "outputs")  # appends draws 1..draws

    def filter(self, run: TaskRun) -> Verdict:
        detail = constant_detail(run.outputs[0])
        if detail:
            return Verdict.reject("degenerate_output", detail)
        for draw in range(1, run.draws + 1):
            with run.sharing_gpu():  # one hold per draw: drawing its inputs and one forward pass
                inputs = draw_inputs(run.namespace, run.device, run.draw_seed(draw))
                outputs = run.forward(run.model, inputs)
            bad = non_finite_detail(outputs)
            if bad:
                return Verdict.reject("non_finite", f"draw {draw}: {bad}")
            run.inputs.append(inputs)
            run.outputs.append(outputs)
        first = run.outputs[0]
        metrics = {"draw_max_abs_diff": max((max_abs_diff(first, other) or 0.0) for other in run.outputs[1:]),
                   "output_abs_max": max(t.detach().abs().max().item() for t in as_float64(first) if t.numel())}
        if all(all_close(first, other, CHECK_ATOL, CHECK_RTOL) for other in run.outputs[1:]):
            same_inputs = all(bit_equal([x for x in run.inputs[0] if isinstance(x, torch.Tensor)],
                                        [x for x in other if isinstance(x, torch.Tensor)]) for other in run.inputs[1:])
            why = "get_inputs returns the same inputs every draw" if same_inputs else \
                f"output the same within atol=rtol={CHECK_ATOL} for {run.draws + 1} independent input draws"
            return Verdict.reject("degenerate_output", why, **metrics)
        return Verdict.ok(**metrics)
