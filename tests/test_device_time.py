"""The checks' device seconds (filters/execute/device_time.py): asked for by the payload, measured by torch's profiler
in the sandbox worker, put on the verdict line by check, and the verdicts the same as without it."""

from __future__ import annotations

import time

from filters.base import Filter, Verdict, judge
from filters.execute.device_time import DeviceTimed
from filters.execute.task_run import TaskRun
from filters.validate import execute_verdicts
from tests.test_gpu_work_locked import TASK as LOCKED_TASK

# the lock audit's task, at sizes whose passes take the CPU a measurable time
TASK = LOCKED_TASK.replace("torch.randn(16, 32)", "torch.randn(256, 512)").replace("return [32]", "return [512]")
assert TASK != LOCKED_TASK

STOCHASTIC = TASK.replace("return torch.relu(self.linear(x)) * 2.0",
                          "return torch.relu(self.linear(x)) * torch.rand(1)")


class _Matmuls(Filter):
    """A check whose device work is `count` products of two 384 x 384 matrices of `dtype` and their tanh (the matrix
    drawn beforehand: its profile holds those operators alone); it keeps its own wall seconds."""

    def __init__(self, name: str, count: int, dtype: str = "float32"):
        import torch

        self.name, self.count = name, count
        self.matrix = torch.randn(384, 384, dtype=getattr(torch, dtype))
        self.wall_s = 0.0

    def filter(self, run: TaskRun) -> Verdict:
        started = time.perf_counter()
        a = self.matrix
        for _ in range(self.count):
            a = (a @ a).tanh()
        self.wall_s = time.perf_counter() - started
        return Verdict.ok()


class _HostOnly(_Matmuls):
    """A check with host work alone (Python arithmetic, no torch operator) between two checks with device work."""

    def filter(self, run: TaskRun) -> Verdict:
        started = time.perf_counter()
        sum(range(200_000))
        self.wall_s = time.perf_counter() - started
        return Verdict.ok()


def test_each_check_s_device_seconds_follow_its_work(monkeypatch):
    """Each check's figure is its own work's: its profile holds its own products and no other check's (counted, which
    no load can change), its seconds are some of its own wall seconds, a check with no device work gets none, and the
    float64 share is the float64 check's alone. (Which of two checks reads more seconds is no test: on a loaded
    machine a 2-product check once read 0.047 s against a 40-product one's 0.037.)"""
    from filters.execute import device_time

    products: list[int] = []   # the matrix products in each check's profile, in the order the checks ran
    profiled = device_time.profiled_total_us

    def counting(prof, device: str) -> float:
        products.append(sum(event.name == "aten::mm" for event in prof.events()))
        return profiled(prof, device)

    monkeypatch.setattr(device_time, "profiled_total_us", counting)
    run = TaskRun(code="", name="t")
    checks = [_Matmuls("light", 2), _HostOnly("host", 0), _Matmuls("heavy", 40), _Matmuls("float64", 20, "float64")]
    assert judge(run, [DeviceTimed(check) for check in checks]).keep
    names = [check.name for check in checks]
    assert list(run.device_s_by_check) == list(run.float64_device_s_by_check) == names
    assert dict(zip(names, products)) == {"light": 2, "host": 0, "heavy": 40, "float64": 20}
    seconds = run.device_s_by_check
    assert seconds["host"] == 0 and all(seconds[name] > 0 for name in ("light", "heavy", "float64"))
    # the operators' seconds lie inside the check's own (a figure is rounded to 0.1 ms)
    assert all(seconds[check.name] <= check.wall_s + 5e-5 for check in checks), (seconds, [c.wall_s for c in checks])
    # the float64 share: none of the float32 checks' work, most of the float64 one's (its products and tanh)
    assert run.float64_device_s_by_check["light"] == run.float64_device_s_by_check["heavy"] == 0
    assert 0.5 * seconds["float64"] < run.float64_device_s_by_check["float64"] <= seconds["float64"]


def test_the_verdict_line_says_each_check_s_device_seconds_and_the_verdicts_do_not_change():
    records = [{"id": "kept", "code": TASK}, {"id": "stochastic", "code": STOCHASTIC}]
    checks = ("eager", "determinism", "degenerate", "finite", "visible")
    plain = execute_verdicts(records, workers=1, checks=checks)
    profiled = execute_verdicts(records, workers=1, checks=checks, device_time=True)
    assert [(line["keep"], line["reason"]) for line in profiled] == [(line["keep"], line["reason"]) for line in plain]
    assert plain[0]["keep"] and plain[1]["reason"] == "stochastic_op"
    assert all("worker_device_s_by_check" not in line for line in plain)
    by_check = profiled[0]["worker_device_s_by_check"]
    # every check that ran got a figure; the forward passes' (eager, determinism, degenerate) some device work
    assert set(by_check) == set(checks)
    assert all(by_check[name] > 0 for name in ("eager", "determinism", "degenerate"))
    # the comparisons run in float64 (filters/execute/tensors.py): the visibility check's work is all of them
    float64 = profiled[0]["worker_float64_device_s_by_check"]
    assert set(float64) == set(checks) and 0 < float64["visible"] <= by_check["visible"]
    assert sum(by_check.values()) < profiled[0]["worker_s"]
    assert list(profiled[1]["worker_device_s_by_check"]) == ["eager"]   # rejected at the first check


def test_the_payload_asks_for_it_only_when_told():
    from filters.validate import _payload

    assert "device_time" not in _payload({"code": TASK, "id": "t"}, "cpu", 1, None, 0, 3)
    assert _payload({"code": TASK, "id": "t"}, "cpu", 1, None, 0, 3, device_time=True)["device_time"] is True
