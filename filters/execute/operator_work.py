"""Execute filter `trivial`, every-operator rule: each operator of `forward` changes the result beyond the tolerance.

For each statement of `forward` whose value has its input's shape and dtype, the task runs again with that
statement replaced by the identity (`opgen.taskcode.ablate`). If the output then still passes the consumer's
check (atol = rtol = 1e-2) on every input draw, a kernel that skips the operator is rewarded, and `ops` would
name an operator that does no visible work (a ReLU after a distance, which is never negative): the task is
rejected.
"""

from __future__ import annotations

import torch

from filters.base import Filter, Verdict
from filters.execute.task_run import TaskRun
from filters.execute.tensors import all_close
from opgen.sandbox.task import load_namespace
from opgen.taskcode.ablate import SKIP, Ablation, ablations


class _NotAnIdentityPlace(Exception):
    """The statement's value differs from its input in shape or dtype: the identity cannot stand in for it."""


def _skip(source, value):
    if (isinstance(source, torch.Tensor) and isinstance(value, torch.Tensor) and source.shape == value.shape
            and source.dtype == value.dtype):
        return source
    raise _NotAnIdentityPlace


class OperatorWorkCheck(Filter):
    name = "operator_work"
    holds_gpu_lock_itself = True   # a hold per statement and draw: a check of up to tens of forward passes
    reads = ("namespace", "model", "inputs", "outputs", "input_digests")

    def filter(self, run: TaskRun) -> Verdict:
        tried = 0
        for ablation in ablations(run.code):
            passes = _passes_without(run, ablation)
            if passes is None:
                continue
            tried += 1
            if passes:
                return Verdict.reject(
                    "trivial", f"every-operator rule: without `{ablation.source}` (line {ablation.line}) the output "
                               f"still passes the check at {run.tolerance.text()} on all {len(run.outputs)} input draws",
                    identity_statements=tried)
        return Verdict.ok(identity_statements=tried)


def _passes_without(run: TaskRun, ablation: Ablation) -> bool | None:
    """Whether the task's output with the statement made the identity passes the check on every draw; None when
    the identity cannot stand in for it (another shape or dtype)."""
    namespace = load_namespace(ablation.code, f"{run.name}-without-line-{ablation.line}")
    namespace[SKIP] = _skip
    forward = namespace["Model"].forward
    for draw, expected in enumerate(run.outputs):
        with run.sharing_gpu():   # one hold per draw: its inputs, the pass without the statement, the comparison
            inputs = run.inputs_of(draw)
            try:
                outputs = run.forward(lambda *args: forward(run.model, *args), inputs)
            except _NotAnIdentityPlace:
                return None
            except Exception:  # noqa: BLE001 - without the statement the rest of forward cannot run: it does work
                return False
            if not all_close(expected, outputs, run.tolerance.atol, run.tolerance.rtol):
                return False
            del outputs
    return True
