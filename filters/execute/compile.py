"""Execute filters `compile_error` and `compile_mismatch`: torch.compile runs and matches eager on every draw.

Compiled and eager outputs are compared at atol = rtol = 1e-2 on each input draw, as the consuming
environment compares a candidate with the reference.
"""

from __future__ import annotations

import time

import torch

from filters.base import Filter, Verdict
from filters.execute.task_run import TaskRun
from filters.execute.tensors import all_close, max_abs_diff
from opgen.errors import TaskProblem
from opgen.sandbox.gpus import compiled_graphs_locked, inductor_benchmarks_locked
from opgen.sandbox.task import run_forward


class CompileCheck(Filter):
    name = "compile"
    error_reason = "compile_error"
    holds_gpu_lock_itself = True   # compiling is seconds of host work
    reads = ("namespace", "model", "inputs", "outputs", "input_digests")

    def filter(self, run: TaskRun) -> Verdict:
        torch._dynamo.reset()
        metrics: dict = {}
        compiled = None
        worst = 0.0
        for draw, eager in enumerate(run.outputs):
            try:
                if compiled is None:
                    compiled = torch.compile(run.model)
                compiled_out = _compiled_outputs(run, compiled, draw, metrics)
            except TaskProblem:  # a later draw's inputs did not come back from its seed: that check's verdict
                raise
            except Exception as error:  # noqa: BLE001 - any failure under compile is the verdict
                return Verdict.reject("compile_error", f"{type(error).__name__}: {error}", **metrics)
            with run.sharing_gpu():
                diff = max_abs_diff(eager, compiled_out)
                close = diff is not None and all_close(eager, compiled_out, run.tolerance.atol, run.tolerance.rtol)
            if diff is None:
                return Verdict.reject("compile_mismatch", f"draw {draw}: output shapes differ", **metrics)
            worst = max(worst, diff)
            if not close:
                return Verdict.reject("compile_mismatch", f"draw {draw}: max abs diff {diff:.4g} beyond "
                                                          f"{run.tolerance.text()}", **metrics, max_abs_diff=diff)
            # one draw's compiled outputs at a time beside the eager ones: a dozen workers share the GPU's memory
            del compiled_out
        return Verdict.ok(**metrics, max_abs_diff=worst)


def _compiled_outputs(run: TaskRun, compiled, draw: int, metrics: dict) -> list[torch.Tensor]:
    """The compiled model's outputs on one draw. The first call (draw 0) compiles (seconds of host work,
    `compile_s`), so it runs outside the GPU's lock, but inductor's autotuning benchmarks and the compiled graphs
    hold it, shared; a later draw is drawn again and run in one hold of the shared lock, as every check's forward
    pass (one draw's inputs held at a time)."""
    if draw:
        with run.sharing_gpu():
            return run.forward(compiled, run.inputs_of(draw))
    # their holds count with the checks' own: a compile's first call waits at the gate as a forward pass does
    with inductor_benchmarks_locked(run.gpu_lock_path, run.lock_waits), \
            compiled_graphs_locked(run.gpu_lock_path, run.synchronize, run.lock_waits):
        start = time.perf_counter()
        outputs = run_forward(compiled, run.inputs)
        run.synchronize()
        metrics["compile_s"] = round(time.perf_counter() - start, 3)
    return outputs
