"""Workers that run solution code are confined: they may signal only themselves and their own process group, so a
solution cannot kill the grader that called it (or every process of the user) however it spells the call; other
workers are not, and `OPGEN_SANDBOX_CONFINE=0` turns it off."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import opgen
from opgen.sandbox.confine import CONFINE_ENV
from opgen.sandbox.pool import SandboxPool


def _filters_install() -> bool:
    """Whether this machine lets a process install a seccomp filter (Linux x86-64 or arm64, not forbidden by a
    container's own policy): tried in a child process."""
    if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64", "aarch64", "arm64"):
        return False
    probe = "import sys\nfrom opgen.sandbox.confine import confine_signals\nsys.exit(0 if confine_signals() else 1)"
    return subprocess.run([sys.executable, "-c", probe], cwd=Path(__file__).resolve().parents[1]).returncode == 0


pytestmark = pytest.mark.skipif(not _filters_install(), reason="no seccomp filter can be installed here")
LINEAR_GELU = Path(__file__).parent / "grade_corpus" / "tasks" / "linear_gelu.py"


def probe_signals(payload: dict) -> dict:
    """Inside a worker: which processes it may signal (signal 0 only asks whether it could)."""
    outcome = {}
    for name, pid in (("victim", payload["victim"]), ("parent", os.getppid()), ("every process", -1),
                      ("itself", os.getpid()), ("its group", 0)):
        try:
            os.kill(pid, 0)
            outcome[name] = "allowed"
        except PermissionError:
            outcome[name] = "refused"
        except ProcessLookupError:
            outcome[name] = "no such process"
    return outcome


@pytest.fixture
def victim():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process.pid
    process.kill()
    process.wait()


def _probe(victim: int, confined: bool) -> dict:
    with SandboxPool(1, 60, None, confined=confined) as pool:
        [result] = pool.run_many(f"{__name__}:probe_signals", [{"victim": victim}])
    assert result.status == "ok", result.detail
    return result.value


def test_a_confined_worker_signals_only_itself_and_its_group(victim):
    assert _probe(victim, confined=True) == {"victim": "refused", "parent": "refused", "every process": "refused",
                                             "itself": "allowed", "its group": "allowed"}


def test_other_workers_are_not_confined_and_the_environment_can_turn_it_off(victim, monkeypatch):
    free = {"victim": "allowed", "parent": "allowed", "every process": "allowed", "itself": "allowed",
            "its group": "allowed"}
    assert _probe(victim, confined=False) == free
    monkeypatch.setenv(CONFINE_ENV, "0")
    assert _probe(victim, confined=True) == free


KILLER = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)

    def forward(self, x):
        system = getattr(torch, "o" + "s")          # a computed name: no scan of the source sees it
        getattr(system, "ki" + "ll")(getattr(system, "getp" + "pid")(), {signal})
        return torch.zeros(x.shape[0], self.linear.out_features)   # wrong, if the signal went through
'''


def test_a_solution_that_signals_its_grader_is_refused_and_the_grader_lives_on():
    # SIGWINCH: harmless to the grader if the filter failed (the grade is then a mismatch, not this reason)
    grade = opgen.grade(solution_code=KILLER.format(signal=int(signal.SIGWINCH)), task=LINEAR_GELU, device="cpu")
    assert grade["reason"] == "exec_error" and "PermissionError" in grade["detail"], grade
    named = KILLER.format(signal=9).replace('getattr(torch, "o" + "s")', "torch.os")
    grade = opgen.grade(solution_code=named, task=LINEAR_GELU, device="cpu")
    assert (grade["reason"], grade["detail"]) == ("unsafe_code", "use of .os")
