"""The execute stage order is a stated contract: every check reads only TaskRun fields an earlier one writes."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from filters.execute import STAGES
from filters.execute.task_run import TaskRun

FILLED_BY_PAYLOAD = {f.name for f in dataclasses.fields(TaskRun)} - {"namespace", "model", "inputs", "outputs",
                                                                     "work_ops", "input_digests"}


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


def test_on_cuda_every_check_returns_its_cached_memory(monkeypatch):
    """Every check gives back the GPU memory it freed when it ends; on the CPU the checks run as they are."""
    from filters.execute.worker import OnTheGpu, stages_for

    wrapped = stages_for("cuda")
    assert all(isinstance(check, OnTheGpu) for check in wrapped)
    assert [check.check for check in wrapped] == list(STAGES)
    assert [(c.name, c.reads, c.writes) for c in wrapped] == [(c.name, c.reads, c.writes) for c in STAGES]
    assert stages_for("cpu") == STAGES


def _hold_exclusively(lock: str, seconds: float, started) -> tuple:
    """A timed run in a thread: once `started` is set, wait for the lock exclusively and hold it `seconds`;
    returns the thread and a dict that gets `asked`, `held` and `released` (perf_counter times)."""
    import threading
    import time

    from opgen.sandbox.gpus import gpu_lock

    times: dict = {}

    def timed_run() -> None:
        started.wait(10)
        times["asked"] = time.perf_counter()
        with gpu_lock(lock):
            times["held"] = time.perf_counter()
            time.sleep(seconds)
            times["released"] = time.perf_counter()

    thread = threading.Thread(target=timed_run)
    thread.start()
    return thread, times


def test_a_forward_pass_counts_its_wait_for_the_lock(tmp_path):
    """While a timed run holds the lock, a check's forward pass waits, and the task's run says for how long."""
    import threading

    lock = str(tmp_path / "gpu.lock")
    go = threading.Event()
    go.set()
    holder, times = _hold_exclusively(lock, 0.4, go)
    while "held" not in times:
        holder.join(0.01)
    run = TaskRun(code="", name="t", gpu_lock_path=lock)
    assert run.forward(lambda x: x + 1, [torch.ones(2)])[0].tolist() == [2.0, 2.0]
    holder.join(10)
    assert run.lock_wait_s >= 0.2
    waited = run.lock_wait_s
    run.forward(lambda x: x, [torch.ones(2)])   # nobody holds it now: no more waiting
    assert run.lock_wait_s - waited < 0.2


SLOW_TASK = """
import time
import torch

PASSES = []

class Model(torch.nn.Module):
    def forward(self, x):
        started = time.perf_counter()
        time.sleep(0.12)
        PASSES.append((started, time.perf_counter()))
        return x * 2

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("check_name", ["runtime", "degenerate"])
def test_a_timed_run_waits_for_one_forward_pass_of_a_check_not_for_the_whole_check(tmp_path, check_name):
    """The runtime check runs the model six times and the degenerate check three: a timed run asking for the
    GPU meanwhile gets it after the pass under way (0.12 s), and no pass runs while it holds the GPU."""
    import threading

    from filters.execute.degenerate import DegenerateCheck
    from filters.execute.eager import EagerCheck
    from filters.execute.runtime import RuntimeCheck

    lock = str(tmp_path / "gpu.lock")
    run = TaskRun(code=SLOW_TASK, name="slow", gpu_lock_path=lock, timing_runs=5)
    assert EagerCheck().filter(run).keep
    passes = run.namespace["PASSES"]
    passes.clear()
    first_pass = threading.Event()
    threading.Thread(target=lambda: (_wait_for(lambda: passes, 10), first_pass.set())).start()
    holder, times = _hold_exclusively(lock, 0.3, first_pass)
    check = {"runtime": RuntimeCheck(), "degenerate": DegenerateCheck()}[check_name]
    check.filter(run)
    holder.join(10)
    assert len(passes) == (6 if check_name == "runtime" else 3)
    # counted, not timed: no pass began while it waited (one, should it begin as the timed run asks), and the check's
    # later passes ran after it
    waited_for = [p for p in passes if times["asked"] < p[0] < times["held"]]
    assert len(waited_for) <= 1, f"the timed run waited for {len(waited_for)} passes that began after it asked"
    assert any(p[0] >= times["released"] for p in passes), "the timed run waited for the whole check"
    assert not [p for p in passes if p[0] < times["released"] and p[1] > times["held"]], "a pass ran beside it"


def _wait_for(condition, seconds: float) -> None:
    import time

    deadline = time.perf_counter() + seconds
    while not condition() and time.perf_counter() < deadline:
        time.sleep(0.005)


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


def test_the_checks_build_models_outside_the_lock_and_run_them_inside(tmp_path):
    from filters.execute.degenerate import DegenerateCheck
    from filters.execute.determinism import DeterminismCheck
    from filters.execute.eager import EagerCheck
    from filters.execute.runtime import RuntimeCheck

    run = TaskRun(code=LOCK_AWARE_TASK, name="lock-aware", gpu_lock_path=str(tmp_path / "gpu.lock"))
    for check in (EagerCheck(), DeterminismCheck(), DegenerateCheck(), RuntimeCheck()):
        assert check.filter(run).keep, check.name


def test_the_compile_check_runs_later_draws_one_locked_pass_each(tmp_path, monkeypatch):
    """The first compiled call compiles (host work, outside the lock); every later draw is one forward pass under
    the shared lock, as every check's, and its outputs are compared before the next draw runs."""
    from filters.execute.compile import CompileCheck
    from filters.execute.degenerate import DegenerateCheck
    from filters.execute.eager import EagerCheck
    from opgen.sandbox import gpus

    run = TaskRun(code=LOCK_AWARE_TASK.replace('        assert gpus._held(), "forward ran without the GPU lock"\n', ""),
                  name="compiled", gpu_lock_path=str(tmp_path / "gpu.lock"))
    assert EagerCheck().filter(run).keep and DegenerateCheck().filter(run).keep
    held: list[bool] = []
    real_forward = TaskRun.forward

    def forward(self, model, inputs):
        outputs = real_forward(self, model, inputs)
        held.append(isinstance(model, torch._dynamo.eval_frame.OptimizedModule))
        return outputs

    monkeypatch.setattr(TaskRun, "forward", forward)
    verdict = CompileCheck().filter(run)
    assert verdict.keep and verdict.metrics["compile_s"] > 0
    assert held == [True] * run.draws   # draws 1..3 of the 4, each through the locked pass
    assert not gpus._held()
