"""The execute stage order is a stated contract: every check reads only TaskRun fields an earlier one writes."""

from __future__ import annotations

import dataclasses

from filters.execute import STAGES
from filters.execute.task_run import TaskRun

FILLED_BY_PAYLOAD = {f.name for f in dataclasses.fields(TaskRun)} - {"namespace", "model", "inputs", "outputs",
                                                                     "work_ops"}


def unmet_reads(stages) -> list[str]:
    written = set(FILLED_BY_PAYLOAD)
    missing = []
    for check in stages:
        missing += [f"{check.name} reads {field} before any check writes it"
                    for field in check.reads if field not in written]
        written.update(check.writes)
    return missing


def test_every_read_is_written_earlier():
    assert unmet_reads(STAGES) == []


def test_a_reordered_chain_breaks_the_contract():
    eager, *rest = STAGES
    assert unmet_reads([*rest, eager])  # compile before eager would read a model nobody built


def test_declared_fields_exist():
    fields = {f.name for f in dataclasses.fields(TaskRun)}
    for check in STAGES:
        assert set(check.reads) | set(check.writes) <= fields, check.name
    assert len({check.name for check in STAGES}) == len(STAGES)


def test_on_cuda_the_checks_that_run_the_model_share_the_gpu_lock_and_the_rest_do_not(monkeypatch):
    """Beside timed runs: degenerate and runtime hold the shared lock throughout; eager and determinism take it
    themselves around their GPU work; the output scans (finite, trivial) and the compile check (which locks only
    inductor's autotuning itself) do not. Every check returns its cached GPU memory when it ends."""
    from filters.execute.worker import ReturningCachedMemory, SharingTheGpu, stages_for
    from opgen.sandbox.gpus import gpu_lock_path

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    wrapped = {check.name: check for check in stages_for("cuda") if isinstance(check, SharingTheGpu)}
    assert set(wrapped) == {"degenerate", "runtime"}   # eager and determinism lock around their GPU work
    # every check gives back the GPU memory it freed, inside the lock where it holds one
    for check in stages_for("cuda"):
        inner = check.check if isinstance(check, SharingTheGpu) else check
        assert isinstance(inner, ReturningCachedMemory) and inner.check in STAGES
    assert {check.lock_path for check in wrapped.values()} == {gpu_lock_path("3")}
    assert [check.name for check in stages_for("cuda")] == [check.name for check in STAGES]
    assert stages_for("cpu") == STAGES


def test_a_check_sharing_the_gpu_counts_its_wait_for_the_lock(tmp_path):
    """While a timed run holds the lock, a check sharing it waits, and the task's run says for how long."""
    import threading

    from filters.base import Filter, Verdict
    from filters.execute.task_run import TaskRun
    from filters.execute.worker import SharingTheGpu
    from opgen.sandbox.gpus import gpu_lock

    class Quick(Filter):
        name = "quick"

        def filter(self, run):
            return Verdict.ok()

    lock = str(tmp_path / "gpu.lock")
    holding, release = threading.Event(), threading.Event()

    def timed_run() -> None:
        with gpu_lock(lock):
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=timed_run)
    holder.start()
    holding.wait(10)
    threading.Timer(0.3, release.set).start()
    run = TaskRun(code="", name="t")
    assert SharingTheGpu(Quick(), lock).filter(run).keep
    holder.join(10)
    assert run.lock_wait_s >= 0.25
    SharingTheGpu(Quick(), lock).filter(run)   # nobody holds it now: no more waiting
    assert run.lock_wait_s < 1.0


LOCK_AWARE_TASK = """
import torch
from opgen.sandbox import gpus

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        assert not gpus._held(), "weights built while holding the GPU lock"
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x):
        assert gpus._held(), "forward ran without the GPU lock"
        return self.linear(x)

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""


def test_eager_and_determinism_build_models_outside_the_lock_and_run_them_inside(tmp_path):
    from filters.execute.determinism import DeterminismCheck
    from filters.execute.eager import EagerCheck

    run = TaskRun(code=LOCK_AWARE_TASK, name="lock-aware", gpu_lock_path=str(tmp_path / "gpu.lock"))
    assert EagerCheck().filter(run).keep, "eager"
    assert DeterminismCheck().filter(run).keep, "determinism"
