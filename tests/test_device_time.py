"""The checks' device seconds (filters/execute/device_time.py): asked for by the payload, measured by torch's profiler
in the sandbox worker, put on the verdict line by check, and the verdicts the same as without it."""

from __future__ import annotations

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
    """A check whose device work is `count` products of two 384 x 384 matrices."""

    def __init__(self, name: str, count: int):
        self.name, self.count = name, count

    def filter(self, run: TaskRun) -> Verdict:
        import torch

        a = torch.randn(384, 384)
        for _ in range(self.count):
            a = (a @ a).tanh()
        return Verdict.ok()


def test_each_check_s_device_seconds_follow_its_work():
    run = TaskRun(code="", name="t")
    assert judge(run, [DeviceTimed(_Matmuls("light", 2)), DeviceTimed(_Matmuls("heavy", 40))]).keep
    assert set(run.device_s_by_check) == {"light", "heavy"}
    assert 0 < run.device_s_by_check["light"] < run.device_s_by_check["heavy"]


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
    assert sum(by_check.values()) < profiled[0]["worker_s"]
    assert list(profiled[1]["worker_device_s_by_check"]) == ["eager"]   # rejected at the first check


def test_the_payload_asks_for_it_only_when_told():
    from filters.validate import _payload

    assert "device_time" not in _payload({"code": TASK, "id": "t"}, "cpu", 1, None, 0, 3)
    assert _payload({"code": TASK, "id": "t"}, "cpu", 1, None, 0, 3, device_time=True)["device_time"] is True
