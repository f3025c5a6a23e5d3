"""Every GPU kernel of the execute checks runs inside a hold of the GPU's lock, so none runs beside another
process's timed trial: checked on the CPU, where the same holds are taken on a real lock file, by recording every
tensor op the checks run and whether the lock was held then."""

from __future__ import annotations

import time

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from filters.base import Filter, Verdict, judge
from filters.execute import STAGES, determinism, eager
from filters.execute.compile import CompileCheck
from filters.execute.task_run import TaskRun
from filters.execute.worker import OnTheGpu
from opgen.sandbox.gpus import compiled_graphs_locked, gpu_lock, holding_gpu_lock

TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.linear = nn.Linear(features, features)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2.0

def get_inputs():
    return [torch.randn(16, 32)]

def get_init_inputs():
    return [32]
'''


class _LockAudit(TorchDispatchMode):
    """Records each tensor op run outside a hold of `path`, except while weights are built on the host."""

    def __init__(self, path: str):
        super().__init__()
        self.path, self.building, self.unlocked = path, 0, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if not self.building and not holding_gpu_lock(self.path):
            self.unlocked.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def _built_on_the_host(audit: _LockAudit, build):
    def build_model(*args, **kwargs):
        audit.building += 1
        try:
            return build(*args, **kwargs)
        finally:
            audit.building -= 1
    return build_model


def test_every_check_runs_its_tensor_work_inside_a_hold(tmp_path, monkeypatch):
    """The checks' forward passes, input draws, comparisons and output scans all hold the lock (the compile
    check's first call is covered by `compiled_graphs_locked`, below)."""
    path = str(tmp_path / "gpu.lock")
    audit = _LockAudit(path)
    for module in (eager, determinism):
        monkeypatch.setattr(module, "build_model", _built_on_the_host(audit, module.build_model))
    run = TaskRun(code=TASK, name="audited", device="cpu", gpu_lock_path=path)
    checks = [OnTheGpu(check) for check in STAGES if not isinstance(check, CompileCheck)]
    with audit:
        verdict = judge(run, checks)
    assert verdict.keep, verdict.detail
    assert len(run.outputs) == 1 + run.draws and run.lock_wait_s >= 0
    assert audit.unlocked == []
    assert run.lock_waits.holds >= 1 + run.draws and run.lock_waits.held_s > 0   # every hold counted


@pytest.mark.heavy
def test_the_compile_check_counts_its_graphs_holds_with_the_checks(tmp_path):
    """The compile check's first call holds the lock for its graph, not for the compile: that hold is one of the
    task's holds, its wait counted with the forward passes' (it is as likely to meet a timed run at the gate)."""
    run = TaskRun(code=TASK, name="counted", device="cpu", gpu_lock_path=str(tmp_path / "gpu.lock"))
    assert judge(run, [OnTheGpu(STAGES[0])]).keep
    before = run.lock_waits.holds
    assert judge(run, [CompileCheck()]).keep
    # per draw, one hold for the compiled pass (draw 0: its graph's) and one for the comparison
    assert run.lock_waits.holds - before == 2 * len(run.outputs)


def test_a_check_without_holds_of_its_own_runs_whole_inside_one(tmp_path):
    path = str(tmp_path / "gpu.lock")
    seen = {}

    class Scan(Filter):
        name = "scan"

        def filter(self, run):
            seen["scan"] = holding_gpu_lock(path)
            return Verdict.ok()

    class Builder(Scan):
        name = "builder"
        holds_gpu_lock_itself = True

        def filter(self, run):
            seen["builder"] = holding_gpu_lock(path)
            return Verdict.ok()

    run = TaskRun(code=TASK, name="t", device="cpu", gpu_lock_path=path)
    assert judge(run, [OnTheGpu(Scan()), OnTheGpu(Builder())]).keep
    assert seen == {"scan": True, "builder": False}
    assert not holding_gpu_lock(path)


def test_an_exclusive_hold_inside_a_shared_one_is_refused(tmp_path):
    path = str(tmp_path / "gpu.lock")
    with gpu_lock(path, shared=True), pytest.raises(RuntimeError, match="exclusive"):
        with gpu_lock(path):
            pass
    with gpu_lock(path), gpu_lock(path, shared=True):   # the other way round is a free nested hold
        assert holding_gpu_lock(path)
    assert not holding_gpu_lock(path)


@pytest.mark.heavy
def test_compiled_graphs_run_inside_a_hold_while_inside(tmp_path, monkeypatch):
    """A compiled model's first call: its graph runs holding the lock and is waited for; outside the context
    the graph runs as torch runs it."""
    from torch._inductor.output_code import CompiledFxGraph

    path, calls, waits = str(tmp_path / "gpu.lock"), [], []
    original = CompiledFxGraph.__call__

    def spy(self, inputs):
        calls.append(holding_gpu_lock(path))
        return original(self, inputs)

    monkeypatch.setattr(CompiledFxGraph, "__call__", spy)
    compiled = torch.compile(lambda x: torch.sin(x) * 3.0 + 1.0)
    x = torch.randn(64)
    with compiled_graphs_locked(path, lambda: waits.append(True)):
        first = compiled(x)
    again = compiled(x)
    assert calls == [True, False] and waits == [True]
    assert torch.allclose(first, again) and torch.allclose(first, torch.sin(x) * 3.0 + 1.0)
    assert CompiledFxGraph.__dict__["__call__"] is spy


def test_a_verdict_line_carries_the_checks_holds_of_the_lock():
    """The worker's answer counts the checks' holds (none counted: none said, as on a CPU without a lock), and the
    verdict line keeps them beside the wait, for `opgen profile`."""
    from filters.execute.worker import _lock_holds
    from filters.validate import _verdict
    from opgen.sandbox.gpus import LockWaits
    from opgen.sandbox.pool import SandboxResult

    holds = _lock_holds(LockWaits(seconds=0.5, holds=4, waited=1, held_s=0.25, longest_s=0.125))
    value = {"reason": None, "detail": None, "metrics": {}, "stages": [["eager", 1.0]], "lock_wait_s": 0.5,
             "lock_holds": holds}
    line = _verdict(SandboxResult("ok", value, "", seconds=2.0)).metrics
    assert (line["worker_lock_wait_s"], line["worker_lock_holds"], line["worker_lock_holds_waited"],
            line["worker_lock_held_s"], line["worker_lock_hold_max_s"]) == (0.5, 4, 1, 0.25, 0.125)
    assert _lock_holds(LockWaits()) == {}


class _Holding(Filter):
    """A check that holds the GPU's lock itself, once, for `seconds`."""

    holds_gpu_lock_itself = True

    def __init__(self, name: str, seconds: float):
        self.name, self.seconds = name, seconds
        self.wall_s = 0.0   # the seconds its holds took, by the clock around them

    def filter(self, run: TaskRun) -> Verdict:
        started = time.perf_counter()
        with run.sharing_gpu():
            time.sleep(self.seconds)
        self.wall_s += time.perf_counter() - started
        return Verdict.ok()


def test_the_verdict_line_names_the_check_that_took_the_longest_hold(tmp_path):
    """Which check's hold a timed run waiting at the gate waited for, at worst: the check of the task's longest hold,
    whichever came first; the task's longest hold stays the longest over all its checks."""
    from filters.execute.worker import _lock_holds

    run = TaskRun(code="", name="t", gpu_lock_path=str(tmp_path / "gpu.lock"))
    checks = [OnTheGpu(_Holding("short", 0.01)), OnTheGpu(_Holding("long", 0.08)), OnTheGpu(_Holding("after", 0.01))]
    assert judge(run, checks).keep
    assert run.longest_hold_check == "long" and run.lock_waits.longest_s >= 0.08 and run.lock_waits.holds == 3
    holds = _lock_holds(run.lock_waits, run.longest_hold_check)
    assert holds["lock_hold_max_check"] == "long" and holds["lock_hold_max_s"] == round(run.lock_waits.longest_s, 4)


def test_the_verdict_line_says_how_long_each_check_held_the_lock(tmp_path):
    """Where the checks' GPU time goes: each check's seconds holding the lock, its holds added up (a check that took
    none is not named)."""
    from filters.execute.worker import _lock_holds
    from filters.validate import _verdict
    from opgen.sandbox.pool import SandboxResult

    class _Twice(_Holding):
        def filter(self, run: TaskRun) -> Verdict:
            super().filter(run)
            return super().filter(run)

    class _Unlocked(_Holding):
        def filter(self, run: TaskRun) -> Verdict:
            return Verdict.ok()

    run = TaskRun(code="", name="t", gpu_lock_path=str(tmp_path / "gpu.lock"))
    once, twice = _Holding("once", 0.02), _Twice("twice", 0.05)
    checks = [OnTheGpu(once), OnTheGpu(twice), OnTheGpu(_Unlocked("none", 0.0))]
    assert judge(run, checks).keep
    assert set(run.held_by_check) == {"once", "twice"}
    # each check's figure is its own holds': at least their sleeps, at most the clock around them (no other check's)
    assert 0.02 <= run.held_by_check["once"] <= once.wall_s + 1e-4
    assert 0.1 <= run.held_by_check["twice"] <= twice.wall_s + 1e-4
    assert sum(run.held_by_check.values()) == pytest.approx(run.lock_waits.held_s, abs=1e-3)
    value = {"reason": None, "detail": None, "metrics": {}, "stages": [], "lock_wait_s": 0.0,
             "lock_holds": _lock_holds(run.lock_waits, run.longest_hold_check, run.held_by_check)}
    line = _verdict(SandboxResult("ok", value, "", seconds=1.0)).metrics
    assert line["worker_lock_held_s_by_check"] == run.held_by_check
