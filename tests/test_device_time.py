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
    """A check whose device work is `count` products of two 384 x 384 matrices of `dtype`."""

    def __init__(self, name: str, count: int, dtype: str = "float32"):
        self.name, self.count, self.dtype = name, count, dtype

    def filter(self, run: TaskRun) -> Verdict:
        import torch

        a = torch.randn(384, 384, dtype=getattr(torch, self.dtype))
        for _ in range(self.count):
            a = (a @ a).tanh()
        return Verdict.ok()


def test_each_check_s_device_seconds_follow_its_work():
    run = TaskRun(code="", name="t")
    checks = [_Matmuls("light", 2), _Matmuls("heavy", 40), _Matmuls("float64", 20, "float64")]
    assert judge(run, [DeviceTimed(check) for check in checks]).keep
    assert set(run.device_s_by_check) == set(run.float64_device_s_by_check) == {"light", "heavy", "float64"}
    assert 0 < run.device_s_by_check["light"] < run.device_s_by_check["heavy"]
    # the float64 share: none of the float32 checks' work, most of the float64 one's (its products and tanh)
    assert run.float64_device_s_by_check["heavy"] == 0
    assert 0.5 * run.device_s_by_check["float64"] < run.float64_device_s_by_check["float64"]
    assert run.float64_device_s_by_check["float64"] <= run.device_s_by_check["float64"]


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
