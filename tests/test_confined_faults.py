"""What a confined worker says it holds, and a machine that cannot run solutions confined: its ready line names every
piece of the confinement (and the grader warns once for each left out), and when the device works only outside the
confinement, a grade, a folder and a reward batch stop as a machine fault (exit 2), never as a verdict."""

from __future__ import annotations

import pytest

import opgen
import opgen.grading.run as grading_run
from opgen.cli import main
from opgen.errors import MachineFault
from opgen.sandbox.confine import CONFINE_ENV, PIECES, SKIP_ENV
from opgen.sandbox.faults import machine_fault
from opgen.sandbox.pool import SandboxPool

CUDA_ERROR = ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
              "calling NumCudaDevices() that might have already set an error? Error 304: OS call failed or operation "
              "not supported on this OS")
# a task that, like CUDA under a confinement it cannot start beside, fails only inside a confined worker
TASK = f'''import os
import torch
import torch.nn as nn

if os.environ.get({CONFINE_ENV!r}) == "1":
    raise RuntimeError({CUDA_ERROR!r})


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''
SOLUTION = "```python\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
           "        return torch.relu(x)\n```"


def probe_device_unless_confined(payload: dict) -> dict:
    """The device probe of a machine whose device fails inside the confinement."""
    import os

    if os.environ.get(CONFINE_ENV) == "1":
        raise RuntimeError(CUDA_ERROR)
    return {"ok": True}


def echo(payload: dict) -> dict:
    return payload


def test_the_cuda_start_error_names_the_machine():
    assert machine_fault(CUDA_ERROR) == "CUDA cannot start in this process"


def test_a_confined_worker_s_ready_line_names_every_piece(monkeypatch, capsys):
    with SandboxPool(1, 60, None, confined=True) as pool:
        pool.run_many(f"{__name__}:echo", [{}])
        held = pool._pool[0].confinement
    assert set(held) == set(PIECES)
    import opgen.sandbox.pool as pool_module
    monkeypatch.setattr(pool_module, "_unconfined_warned", set())
    monkeypatch.setenv(SKIP_ENV, "network,file_size")
    with SandboxPool(1, 60, None, confined=True) as pool:
        pool.run_many(f"{__name__}:echo", [{}])
        skipped = pool._pool[0].confinement
    assert not skipped["network"] and not skipped["file_size"]
    assert {piece for piece in PIECES if held[piece] and not skipped[piece]} == {"network", "file_size"}
    err = capsys.readouterr().err
    assert "run without 'network'" in err and "run without 'file_size'" in err


@pytest.fixture
def unconfined_only(monkeypatch, tmp_path):
    monkeypatch.setattr(grading_run, "PROBE_FUNCTION", f"{__name__}:probe_device_unless_confined")
    task = tmp_path / "task.py"
    task.write_text(TASK)
    return task


def test_a_grade_stops_as_a_machine_fault_when_only_unconfined_workers_reach_the_device(unconfined_only, capsys):
    with pytest.raises(MachineFault, match="not from a confined grading worker"):
        opgen.grade(solution_code=SOLUTION.strip("`").removeprefix("python\n"), task=unconfined_only, device="cpu")
    solution = unconfined_only.with_name("solution.py")
    solution.write_text(SOLUTION.strip("`").removeprefix("python\n"))
    assert main(["grade", "--task", str(unconfined_only), "--solution", str(solution), "--device", "cpu"]) == 2
    assert "opgen: error: machine fault: the device works, but not from a confined grading worker" in \
        capsys.readouterr().err


def test_a_reward_batch_raises_rather_than_scoring_the_machine_s_fault(unconfined_only):
    reward = opgen.reward_function(device="cpu")
    with pytest.raises(MachineFault):
        reward(["write a kernel"] * 2, [SOLUTION] * 2, code=[unconfined_only.read_text()] * 2)
