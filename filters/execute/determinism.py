"""Execute filter `nondeterministic`: the same weights on the same inputs give the same output, twice.

On the CPU the two runs must be bit-identical; on CUDA within the repeat tolerance of the task's precision
(opgen.taskcode.dtypes: a unit or two in the last place, for order-dependent reductions). A second model built
with the same seed must agree too (the environment builds the reference and the candidate separately).
"""

from __future__ import annotations

from filters.base import Filter, Verdict
from filters.execute.task_run import TaskRun
from filters.execute.tensors import all_close, bit_equal, max_abs_diff
from opgen.sandbox.task import build_model


def _same(run: TaskRun, a, b) -> bool:
    if run.device.startswith("cuda"):
        return all_close(a, b, run.tolerance.repeat_atol, run.tolerance.repeat_rtol)
    return bit_equal(a, b)


class DeterminismCheck(Filter):
    name = "determinism"
    holds_gpu_lock_itself = True   # builds a second model's weights on the host
    reads = ("namespace", "model", "inputs", "outputs")

    def filter(self, run: TaskRun) -> Verdict:
        inputs, first = run.inputs, run.outputs[0]
        with run.sharing_gpu():   # the pass and its comparison in one hold
            difference = _difference(run, first, run.forward(run.model, inputs))
        if difference is not None:
            return Verdict.reject("nondeterministic", f"second call on the same inputs differs "
                                                      f"(max abs diff {difference})")
        twin = build_model(run.namespace, "cpu", run.seed)  # host work, outside the GPU lock
        with run.sharing_gpu():  # the move to the GPU, the forward pass and the comparison in one hold
            difference = _difference(run, first, run.forward(twin.to(run.device), inputs))
        if difference is not None:
            return Verdict.reject("nondeterministic", f"a second model built with the same seed differs "
                                                      f"(max abs diff {difference})")
        return Verdict.ok()


def _difference(run: TaskRun, first, again) -> float | None:
    """None when the two outputs are the same (see `_same`), else their largest absolute difference."""
    return None if _same(run, first, again) else max_abs_diff(first, again)
