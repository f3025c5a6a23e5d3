"""Faults of the machine are never verdicts: no CUDA stops a command at once (one line, exit 2), a machine error
met mid-run stops it without a verdict for the candidates in flight, and a file that cannot be written is one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from filters.validate import execute_verdicts
from opgen.errors import MachineFault
from opgen.pipeline.build import BuildConfig, run_build
from opgen.sandbox.faults import MACHINE_RUN, ErrorRun, machine_fault
from opgen.sandbox.pool import SandboxPool
from tests.conftest import KERNELBENCH, run_main

# messages as torch, the CUDA runtime and our sandbox write them
MACHINE_MESSAGES = [
    "AssertionError: Torch not compiled with CUDA enabled",
    "RuntimeError: No CUDA GPUs are available",
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx",
    "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). ... CUDA driver version is "
    "insufficient for CUDA runtime version",
    "torch.AcceleratorError: CUDA error: unspecified launch failure\nCUDA kernel errors might be asynchronously "
    "reported at some other API call, so the stacktrace below might be incorrect.",
    "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
    "RuntimeError: cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable",
    "RuntimeError: CUDA error: invalid device ordinal",
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error (GPU has fallen off the bus)",
]
TASK_MESSAGES = [
    "RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported",
    "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB (GPU 0; 139.8 GiB total capacity)",
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (16x32 and 64x8) [<task ops-1>:12]",
    "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
    None,
]


@pytest.mark.parametrize("message", MACHINE_MESSAGES)
def test_messages_that_name_the_machine_are_machine_faults(message):
    assert machine_fault(message)


@pytest.mark.parametrize("message", TASK_MESSAGES)
def test_a_tasks_own_errors_are_not(message):
    assert machine_fault(message) is None


def test_a_run_of_identical_gpu_errors_over_different_chains_is_a_machine_fault():
    message = "RuntimeError: CUDA error: the launch timed out and was terminated [<task ops-{}>:{}]"
    chains = [("conv2d", "relu"), ("matmul", "gelu"), ("layer_norm",)]
    run = ErrorRun()
    faults = [run.add(False, message.format(i, i), chains[i % 3]) for i in range(MACHINE_RUN)]
    assert faults[:-1] == [None] * (MACHINE_RUN - 1) and "8 candidates of 3 different operator chains" in faults[-1]
    # one chain failing again and again is that chain's fault
    same = ErrorRun()
    assert all(same.add(False, message.format(i, i), ("conv2d",)) is None for i in range(3 * MACHINE_RUN))
    # a kept candidate or another message ends the run
    broken = ErrorRun()
    for i in range(MACHINE_RUN - 1):
        assert broken.add(False, message.format(i, 1), chains[i % 3]) is None
    assert broken.add(True, None, ("relu",)) is None
    assert broken.add(False, message.format(0, 1), chains[0]) is None
    # identical errors that do not mention the GPU stack (a sampler bug, say) are the tasks'
    plain = ErrorRun()
    assert all(plain.add(False, "ValueError: bad size", chains[i % 3]) is None for i in range(3 * MACHINE_RUN))


def test_error_run_check_raises_on_verdict_lines():
    lines = [{"keep": False, "reason": "exec_error", "detail": "RuntimeError: CUDA error: launch timed out"}] * 8
    records = [{"families": [f"op{i % 4}"]} for i in range(8)]
    with pytest.raises(MachineFault, match="in a row"):
        ErrorRun().check(lines, records)
    with pytest.raises(MachineFault, match="no CUDA"):
        ErrorRun().check([{"keep": False, "detail": MACHINE_MESSAGES[0]}], [{}])


def _one_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    return lines[0]


def test_cuda_commands_without_cuda_stop_at_once_in_one_line(tmp_path, capsys, monkeypatch):
    from opgen.commands import build as build_command

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "code": "import torch\n"}) + "\n")
    (tmp_path / "dataset").mkdir()
    (tmp_path / "dataset" / "README.md").write_text("---\n---\n")   # a dataset folder, to retime
    commands = [
        ["build", "--n", "5", "--seed", "0", "--out", str(tmp_path / "run"), "--device", "cuda",
         "--reference", str(KERNELBENCH)],
        ["validate", "--input", str(tasks), "--out", str(tmp_path / "v.jsonl"), "--device", "cuda"],
        ["time", "--input", str(tasks), "--out", str(tmp_path / "t.jsonl"), "--device", "cuda"],
        ["retime", str(tmp_path / "dataset"), "--device", "cuda"],
    ]
    # before any work: no build, executor or sandbox worker is started (the build once ran 40 s and rejected 295
    # candidates before it said so)
    started: list[str] = []

    def work(what: str):
        def start(*args, **kwargs):
            started.append(what)
            raise AssertionError(f"{what} started without CUDA")
        return start

    monkeypatch.setattr(build_command, "run_build", work("the build"))
    monkeypatch.setattr(build_command, "make_executor", work("an executor"))
    monkeypatch.setattr(SandboxPool, "__init__", work("a sandbox pool"))
    for command in commands:
        result = run_main(capsys, *command)
        assert result.returncode == 2, (command, result.stderr[-2000:])
        assert "no CUDA device" in _one_line(result) and "Torch not compiled with CUDA enabled" in result.stderr
    assert started == []
    assert not (tmp_path / "run").exists() and not (tmp_path / "v.jsonl").exists()
    assert not (tmp_path / "v.jsonl.partial").exists() and not (tmp_path / "t.jsonl").exists()


def test_sample_into_a_folder_it_cannot_create_is_one_line(capsys):
    result = run_main(capsys, "sample", "--n", "2", "--seed", "0", "--out", "/proc/opgen/candidates.jsonl")
    assert result.returncode == 2
    assert "cannot write --out /proc/opgen/candidates.jsonl" in _one_line(result)


def test_validate_out_into_a_folder_it_cannot_create_is_one_line(tmp_path, capsys):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("")
    result = run_main(capsys, "validate", "--input", str(tasks), "--out", "/proc/opgen/v.jsonl")
    assert result.returncode == 2 and "/proc/opgen" in _one_line(result)


def _kernelbench_records(kernelbench_problems, count: int) -> list[dict]:
    level1 = [p for p in kernelbench_problems if p["level"] == 1][:count]
    return [{"id": p["name"], "code": p["code"], "sample_index": i} for i, p in enumerate(level1)]


def test_execute_checks_that_meet_no_cuda_mid_run_give_no_verdict(kernelbench_problems):
    # the real sandbox, asked for CUDA on a CPU-only torch: every worker fails the way a lost GPU makes it fail
    records = _kernelbench_records(kernelbench_problems, 2)
    with pytest.raises(MachineFault, match="Torch not compiled with CUDA enabled"):
        execute_verdicts(records, device="cuda", workers=1, timeout_s=120)


def test_a_worker_that_cannot_start_is_a_machine_fault():
    with SandboxPool(1, 30, None, env={"PYTHONHOME": "/nonexistent"}) as pool:
        with pytest.raises(MachineFault, match="cannot start"):
            pool.run_many("filters.execute.worker:check_task", [{"code": ""}])


def test_a_build_that_loses_its_gpu_stops_and_writes_no_verdict(tmp_path):
    run = tmp_path / "run"
    config = BuildConfig(n=2, seed=0, device="cuda", profile="smoke", shard_size=2, reference=str(KERNELBENCH))
    with pytest.raises(MachineFault, match="Torch not compiled with CUDA enabled"):
        run_build(config, run, progress=False, save_state=tmp_path / "state")
    assert list(run.glob("shards/*/static.done"))                 # sampled and screened: the tasks' own work
    assert not list(run.glob("shards/*/execute.*")) and not list(run.glob("shards/*/timing.*"))   # no verdict
    assert not (run / "tasks.parquet").exists()
    log = (run / "logs" / "build.log").read_text()
    assert "stopped: machine fault: this torch build has no CUDA" in log
    assert "state saved" in log.splitlines()[-1]                  # the state is saved on the way out


def test_an_execute_harness_failure_is_judged_again_in_fresh_workers_then_stops_the_build(monkeypatch):
    """A kept pool whose pipes were closed under it: the shard is judged again in fresh workers, with the same
    verdicts as an undisturbed run; failing twice, the build stops as the machine's fault and writes no verdict."""
    from filters import validate
    from opgen.pipeline.stages import _execute_shard

    identity = (Path(__file__).parent / "bad_tasks" / "trivial__identity.py").read_text()   # judged before compile
    payload = {"records": [{"id": "identity", "code": identity}], "device": "cpu", "workers": 1, "timeout_s": 120,
               "memory_mb": None, "lane": 7}
    try:
        first = _execute_shard(payload)
        [broken] = [pool for key, pool in zip(validate._KEPT_POOLS.keys(), validate._KEPT_POOLS.values())
                    if key[-1] == 7]
        for worker in broken._pool:
            worker.proc.stdin.close()
        again = _execute_shard(payload)
        assert [v["reason"] for v in again["verdicts"]] == [v["reason"] for v in first["verdicts"]] == ["trivial"]
        assert broken not in validate._KEPT_POOLS.values()

        def always_broken(self, *args, **kwargs):
            raise ValueError("write to closed file")

        monkeypatch.setattr(SandboxPool, "run_many", always_broken)
        with pytest.raises(MachineFault, match="lane 7 failed twice, no verdict written: ValueError"):
            _execute_shard(payload)
    finally:
        validate._KEPT_POOLS.close_except(set())
