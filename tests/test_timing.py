"""Timing harness on the CPU: statistics, the record columns, failures, the runtime window and the CLI."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from filters.window import RuntimeWindow
from opgen.records import EXECUTE_COLUMNS, TIMING_COLUMNS
from opgen.sandbox.gpu_memory import need_shown_by_failure
from opgen.timing.driver import time_records, timing_summary
from opgen.timing.measure import summarize
from tests.conftest import run_main, side_by_side

ROOT = Path(__file__).resolve().parents[1]
SPEC_TIMING_COLUMNS = ("eager_ms", "compile_ms", "eager_ms_iqr", "compile_ms_iqr", "eager_device_us",
                       "compile_device_us", "compile_speedup", "hardware", "torch_version", "cuda_version")

LINEAR_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2.0


batch = 8
n_in = 32
n_out = 16


def get_inputs():
    return [torch.randn(batch, n_in)]


def get_init_inputs():
    return [n_in, n_out]
'''
RAISING_TASK = LINEAR_TASK.replace("return torch.relu(self.linear(x)) * 2.0", "return x.no_such_method()")
CRASHING_TASK = LINEAR_TASK.replace("return torch.relu(self.linear(x)) * 2.0",
                                    "return __import__('os')._exit(3)")


def test_summarize_matches_numpy_quartiles():
    rng = random.Random(7)
    samples = [rng.lognormvariate(0, 0.3) for _ in range(101)]
    stats = summarize(samples)
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    assert stats["median"] == pytest.approx(median)
    assert stats["iqr"] == pytest.approx(q3 - q1)
    assert stats["mean"] == pytest.approx(np.mean(samples))
    assert stats["std"] == pytest.approx(np.std(samples, ddof=1))
    assert stats["min"] == min(samples)
    assert stats["count"] == 101


def test_summarize_small_and_outlier_samples():
    assert summarize([1, 2, 3, 4, 100]) == {"median": 3, "iqr": 2, "mean": 22, "std": pytest.approx(43.6177),
                                           "min": 1, "max": 100, "count": 5}
    assert summarize([2.5]) == {"median": 2.5, "iqr": 0.0, "mean": 2.5, "std": 0.0, "min": 2.5, "max": 2.5, "count": 1}
    assert summarize([])["median"] is None and summarize([])["count"] == 0


@pytest.mark.parametrize(("eager_ms", "keep"), [(0.99, False), (1.0, True), (42.0, True), (100.0, True), (100.5, False)])
def test_runtime_window_bounds(eager_ms, keep):
    verdict = RuntimeWindow().filter({"timing_device": "cuda", "timing_status": "ok", "eager_ms": eager_ms})
    assert verdict.keep is keep
    assert verdict.reason == (None if keep else "runtime_out_of_range")
    assert verdict.metrics["eager_ms"] == eager_ms


def test_runtime_window_is_configurable_and_maps_failures():
    timed = {"timing_device": "cuda", "timing_status": "ok", "eager_ms": 0.5}
    assert RuntimeWindow(lo_ms=0.1, hi_ms=1.0).filter(timed).keep
    assert not RuntimeWindow(lo_ms=1.0, hi_ms=2.0).filter(timed).keep
    for status, reason in (("timeout", "timeout"), ("crash", "crash"), ("error", "exec_error")):
        verdict = RuntimeWindow().filter({"timing_device": "cuda", "timing_status": status, "eager_ms": None,
                                          "timing_error": f"{status}: boom"})
        assert (verdict.keep, verdict.reason, verdict.detail) == (False, reason, f"{status}: boom")
    with pytest.raises(ValueError):
        RuntimeWindow(lo_ms=5, hi_ms=1)


def test_runtime_window_skips_cpu_timings_unless_asked():
    cpu_timed = {"timing_device": "cpu", "timing_status": "ok", "eager_ms": 0.01}
    assert RuntimeWindow().filter(cpu_timed).metrics == {"runtime_window": "not_applied"}
    assert RuntimeWindow().filter({"code": "x"}).keep
    assert RuntimeWindow(apply_to_cpu=True).filter(cpu_timed).reason == "runtime_out_of_range"


@pytest.mark.heavy
def test_time_records_on_cpu_fills_columns_and_keeps_failures():
    records = [{"id": "raises", "code": RAISING_TASK, "extra": 1},
               {"id": "linear", "code": LINEAR_TASK},
               {"id": "crashes", "code": CRASHING_TASK}]
    timed = time_records(records, device="cpu", trials=4, warmups=1, timeout_s=300, progress=False)
    assert [r["id"] for r in timed] == ["raises", "linear", "crashes"]
    assert timed[0]["extra"] == 1
    for record in timed:
        assert set(TIMING_COLUMNS) <= set(record) and set(SPEC_TIMING_COLUMNS) <= set(record)
        json.dumps(record, allow_nan=False)

    linear = timed[1]
    assert linear["timing_status"] == "ok" and linear["timing_error"] is None
    assert linear["hardware"].startswith("cpu: ") and linear["cuda_version"] is None
    assert linear["timing_device"] == "cpu" and "cpu timing" in linear["timing_method"]
    assert linear["torch_version"] == torch.__version__
    assert linear["eager_ms"] > 0 and linear["compile_ms"] > 0 and linear["compile_s"] > 0
    assert linear["eager_ms_count"] == linear["compile_ms_count"] == 4
    assert linear["eager_ms_min"] <= linear["eager_ms"] and linear["eager_ms_iqr"] >= 0
    assert linear["eager_device_us"] > 0 and linear["compile_device_us"] > 0
    assert linear["compile_speedup"] == pytest.approx(linear["eager_ms"] / linear["compile_ms"])
    assert linear["flops"] == 2 * 8 * 32 * 16  # counted on the meta device: the one matmul
    assert linear["eager_tflops"] == pytest.approx(linear["flops"] / (linear["eager_ms"] * 1e-3) / 1e12)
    assert linear["tf32"] is False and linear["compute_dtype"] == "float32"

    raises, crashes = timed[0], timed[2]
    assert raises["eager_ms"] is None and raises["timing_status"] == "error"
    assert "no_such_method" in raises["timing_error"]
    assert crashes["eager_ms"] is None and crashes["timing_status"] == "crash"
    assert "exited with status 3" in crashes["timing_error"]

    summary = timing_summary(timed)
    assert (summary["tasks"], summary["timed"], summary["failed"]) == (3, 1, 2)
    as_if_cuda = [{**r, "timing_device": "cuda"} for r in timed]
    reasons = [RuntimeWindow(lo_ms=0.0, hi_ms=1e6).filter(r).reason for r in as_if_cuda]
    assert reasons == ["exec_error", None, "crash"]


def test_compile_is_not_timed_when_eager_misses_the_window():
    """A build passes its window: a task whose eager median falls outside it is rejected, so compile is not timed."""
    outside, inside = time_records([{"id": "outside", "code": LINEAR_TASK}], device="cpu", trials=3, warmups=1,
                                   timeout_s=300, progress=False, compile_window_ms=(1e5, 1e6)), \
        time_records([{"id": "inside", "code": LINEAR_TASK}], device="cpu", trials=3, warmups=1, timeout_s=300,
                     progress=False, compile_window_ms=(0.0, 1e6))
    assert outside[0]["eager_ms"] > 0 and outside[0]["timing_status"] == "ok"
    assert outside[0]["compile_ms"] is None and outside[0]["compile_speedup"] is None
    assert outside[0]["timing_error"].startswith("compile not timed: eager median")
    assert inside[0]["compile_ms"] > 0 and inside[0]["timing_error"] is None
    # the second compile of the same graph comes from inductor's cache on disk, as timing's does after the check's
    assert inside[0]["compile_cache_hit"] is True and inside[0]["compile_lock_wait_s"] == 0.0   # no lock on a CPU


def test_reused_timing_pools_keep_their_workers_across_calls():
    from opgen.timing import driver as timing

    records = [{"id": "linear", "code": LINEAR_TASK}]
    try:
        first = time_records(records, device="cpu", trials=2, warmups=0, with_compile=False, progress=False,
                             reuse_pools=True)
        [pool] = timing._SHARED_POOLS.values()
        pids = [w.proc.pid for w in pool._pool]
        second = time_records(records, device="cpu", trials=2, warmups=0, with_compile=False, progress=False,
                              reuse_pools=True)
        assert list(timing._SHARED_POOLS.values()) == [pool]
        assert [w.proc.pid for w in pool._pool] == pids and all(w.proc.poll() is None for w in pool._pool)
        assert first[0]["eager_ms"] > 0 and second[0]["eager_ms"] > 0
        workers = list(pool._pool)
        timing._SHARED_POOLS.close_except(set())  # what a process given other GPUs does with the pools it kept
        assert not timing._SHARED_POOLS and all(w.proc.poll() is not None for w in workers)
    finally:
        timing._SHARED_POOLS.close_except(set())


def test_timing_lanes_keep_a_pool_each_side_by_side():
    """Two lanes timing at once in one process: each its own kept pool, and neither stops the other's."""
    from opgen.timing import driver as timing

    records = [{"id": "linear", "code": LINEAR_TASK}]
    results: dict[int, list] = {}

    def lane(number: int) -> None:
        results[number] = time_records(records, device="cpu", trials=2, warmups=0, with_compile=False,
                                       progress=False, reuse_pools=True, lane=number)

    try:
        side_by_side(lane)
        assert sorted(key[0] for key in timing._SHARED_POOLS.keys()) == [0, 1]
        assert all(results[n][0]["eager_ms"] > 0 for n in (0, 1))
        pools = timing._SHARED_POOLS.values()
        lane(0)   # lane 0 again: lane 1's pool is still there, its workers alive
        assert timing._SHARED_POOLS.values() == pools
        assert all(w.proc.poll() is None for pool in pools for w in pool._pool)
    finally:
        timing._SHARED_POOLS.close_except(set())


def test_a_kept_pool_broken_under_a_lane_is_no_tasks_verdict(monkeypatch):
    """A kept pool whose pipes were closed under it (as by a stop from elsewhere): "write to closed file" would have
    recorded a timing error for every task of the shard, a verdict that drops them. The shard is timed again in
    fresh workers; when the harness fails twice, the command stops with a machine fault and writes no timing."""
    from opgen.errors import MachineFault
    from opgen.sandbox.pool import SandboxPool
    from opgen.timing import driver as timing

    records = [{"id": "linear", "code": LINEAR_TASK}, {"id": "again", "code": LINEAR_TASK}]
    options = {"device": "cpu", "trials": 2, "warmups": 0, "with_compile": False, "progress": False,
               "reuse_pools": True}
    try:
        time_records(records[:1], **options)
        [broken] = timing._SHARED_POOLS.values()
        for worker in broken._pool:
            worker.proc.stdin.close()
        timed = time_records(records, **options)
        assert [row["timing_status"] for row in timed] == ["ok", "ok"] and all(row["eager_ms"] > 0 for row in timed)
        assert broken not in timing._SHARED_POOLS.values()   # replaced by a fresh pool

        def always_broken(self, *args, **kwargs):
            raise ValueError("write to closed file")

        monkeypatch.setattr(SandboxPool, "run_many", always_broken)
        with pytest.raises(MachineFault, match="failed twice, no task timed: ValueError: write to closed file"):
            time_records(records, **options)
    finally:
        timing._SHARED_POOLS.close_except(set())


def recording_measure_task(payload: dict) -> dict:
    """The timing, run after writing down what a retry short of GPU memory reads from the payload."""
    from opgen.timing.measure import measure_task

    with open(os.environ["OPGEN_TEST_PAYLOAD_LOG"], "a") as log:
        log.write(json.dumps({key: payload.get(key) for key in ("bytes_moved", "timeout_s", "memory_wait",
                                                                 "memory_need_mb")}) + "\n")
    return measure_task(payload)


def test_a_task_short_of_gpu_memory_is_timed_again_once_its_memory_is_free(tmp_path, monkeypatch):
    from opgen.timing import driver as timing

    marker, log = tmp_path / "ran", tmp_path / "payloads.jsonl"
    short_once = LINEAR_TASK.replace("    def forward(self, x):\n", "    def forward(self, x):\n"
                                     f"        if not __import__('os').path.exists({str(marker)!r}):\n"
                                     f"            open({str(marker)!r}, 'w').close()\n"
                                     "            raise RuntimeError('CUDA out of memory. Tried to allocate 2 GiB')\n")
    monkeypatch.setenv("OPGEN_TEST_PAYLOAD_LOG", str(log))
    monkeypatch.setattr(timing, "FN_PATH", f"{__name__}:recording_measure_task")
    # the execute checks' peak (6,000 MB) and the failed allocation (2 GiB): what the retry waits for, not the
    # estimate from the bytes moved (its operators' traffic, far more than is ever live at once); a build's timing
    # records carry the peak from their execute verdicts (EXECUTE_COLUMNS)
    assert "gpu_peak_mb" in EXECUTE_COLUMNS
    record = {"id": "short", "code": short_once, "bytes_moved": 2**40, "flops": 1e6, "gpu_peak_mb": 6000}
    [row] = time_records([record], device="cpu", trials=2, warmups=0, with_compile=False, progress=False,
                         timeout_s=300)
    assert row["timing_status"] == "ok" and row["eager_ms"] > 0
    sent = [json.loads(line) for line in log.read_text().splitlines()]
    need = round(need_shown_by_failure(6000, "Tried to allocate 2 GiB"))
    assert need == round(1.25 * (6000 + 2048))
    assert sent == [{"bytes_moved": 2**40, "timeout_s": 300, "memory_wait": None, "memory_need_mb": None},
                    {"bytes_moved": 2**40, "timeout_s": 300, "memory_wait": True, "memory_need_mb": need}]


def test_a_timing_retry_without_a_measured_peak_waits_for_the_failed_allocation_or_the_estimate():
    from opgen.sandbox.pool import SandboxResult
    from opgen.timing.driver import memory_retry_payload

    payload = {"id": "t", "bytes_moved": 2**30}
    error = "eager: OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB"
    failed = SandboxResult("ok", {"timing_status": "error", "timing_error": error}, "")
    again = memory_retry_payload(payload, {"id": "t"}, failed)
    assert again == {**payload, "memory_wait": True, "memory_need_mb": round(1.25 * 1.5 * 1024)}
    crashed = SandboxResult("crash", None, "worker died: CUDA error: out of memory")
    assert memory_retry_payload(payload, {"id": "t"}, crashed) == {**payload, "memory_wait": True}   # the estimate


def test_untimed_warm_ups_take_as_many_calls_a_hold_as_fit_in_a_short_hold(tmp_path, monkeypatch):
    """A call per hold of the GPU's lock made short tasks queue for it once a call; a slow task still gives the lock
    up after every call. The warm-up reads a clock that moves only by what each call says it took, so how fast this
    machine runs a call decides nothing."""
    import contextlib
    from types import SimpleNamespace

    from opgen.timing import measure

    holds = []

    @contextlib.contextmanager
    def counting_lock(path, shared=False):
        holds.append(shared)
        yield

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(measure, "gpu_lock", counting_lock)
    monkeypatch.setattr(measure, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    calls = []

    def taking(seconds: float):
        def call(x):
            calls.append(x)
            clock.now += seconds
        return call

    measure._warm_up_in_short_holds(torch, taking(1e-4), [1], 8, str(tmp_path / "gpu.lock"))
    assert len(calls) == 8 and holds == [True, True]   # the first call alone, then the other 7 in one hold
    holds.clear()
    slow = measure.WARMUP_HOLD_MS / 1e3 * 1.5
    measure._warm_up_in_short_holds(torch, taking(slow), [1], 3, str(tmp_path / "gpu.lock"))
    assert holds == [True, True, True]
    holds.clear()
    monkeypatch.setenv(measure.WARMUP_HOLD_ENV, str(measure.WARMUP_HOLD_MS * 10))   # longer holds: fewer of them
    measure._warm_up_in_short_holds(torch, taking(slow), [1], 3, str(tmp_path / "gpu.lock"))
    assert holds == [True, True]


def test_timing_asked_to_stop_returns_nothing_and_times_no_more():
    import threading

    stop = threading.Event()
    stop.set()
    records = [{"id": "linear", "code": LINEAR_TASK}, {"id": "again", "code": LINEAR_TASK}]
    assert time_records(records, device="cpu", trials=2, warmups=0, progress=False, stop=stop) is None


def _opgen(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "opgen", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)


@pytest.mark.heavy
def test_time_cli_on_cpu_writes_one_line_per_task(tmp_path):
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "linear.py").write_text(LINEAR_TASK)
    (tasks / "raises.py").write_text(RAISING_TASK)
    out = tmp_path / "timed.jsonl"
    done = _opgen("time", "--input", str(tasks), "--out", str(out), "--device", "cpu", "--trials", "2",
                  "--warmups", "0", "--no-compile", "--no-progress")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["source"] for r in rows] == ["linear.py", "raises.py"]
    assert rows[0]["eager_ms"] > 0 and rows[0]["compile_ms"] is None and rows[0]["eager_ms_count"] == 2
    assert rows[1]["eager_ms"] is None and rows[1]["timing_error"]
    assert '"tasks": 2' in done.stderr


def test_time_cli_rejects_bad_input(tmp_path, capsys):
    missing = run_main(capsys, "time", "--input", str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "o.jsonl"),
                     "--device", "cpu")
    assert missing.returncode == 2 and "input not found" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad_trials = run_main(capsys, "time", "--input", str(tmp_path), "--out", str(tmp_path / "o.jsonl"), "--trials",
                          "0")
    assert bad_trials.returncode == 2 and "--trials" in bad_trials.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_time_cli_cuda_without_gpu_is_a_usage_error(tmp_path):
    (tmp_path / "linear.py").write_text(LINEAR_TASK)
    done = _opgen("time", "--input", str(tmp_path), "--out", str(tmp_path / "o.jsonl"), "--device", "cuda")
    assert done.returncode == 2 and "no CUDA device" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.heavy
def test_a_run_holding_the_gpu_alone_reads_its_profiles_after_giving_it_back(tmp_path, monkeypatch):
    """Reading a profile builds its events in Python: a locked run does it once the exclusive hold is over, and the
    device times it records are those of the profiled calls all the same."""
    from opgen.sandbox import gpus
    from opgen.timing import trials
    from opgen.timing.measure import measure_task

    lock = str(tmp_path / "gpu.lock")
    held_while_reading = []
    read = trials.profiled_total_us

    def reading(prof, device):
        held_while_reading.append(dict(gpus._held()))
        return read(prof, device)

    monkeypatch.setattr(trials, "profiled_total_us", reading)
    result = measure_task({"code": LINEAR_TASK, "id": "linear", "device": "cpu", "trials": 3, "warmups": 2,
                           "trial_mode": "fixed", "gpu_lock": lock})
    assert result["timing_status"] == "ok", result["timing_error"]
    assert result["eager_device_us"] > 0 and result["compile_device_us"] > 0
    assert len(held_while_reading) == 2 and all(lock not in held for held in held_while_reading)
    assert result["profile_read_s"] >= 0 and result["timed_s"] > 0
    assert 0 <= result["warmup_lock_wait_s"] <= result["warmup_s"]
    assert 0 <= result["lock_gate_wait_s"] <= result["lock_wait_s"]   # nobody else held it: both near nothing


def test_kept_timing_pools_started_ahead_are_the_ones_each_lane_then_times_in(monkeypatch):
    """A build starts its timing lanes' pools (warming up) while its first shard is checked: the lane's first
    timing finds its pool there, warmed up by the timing workers' own set-up, and starts no other."""
    from opgen.sandbox.pool import KeptPools, SandboxResult
    from opgen.sandbox.worker import WARM_UP_ENV
    from opgen.timing import driver

    made = []

    class CountingPool:   # the pool's interface, without processes
        def __init__(self, workers, timeout_s, memory_mb, env, confined=False):
            self.env, self.sent = env, []
            made.append(self)

        def __enter__(self):
            return self

        def close(self):
            pass

        def run_many(self, fn_path, payloads, progress=False, stop=None):
            self.sent += payloads
            return [SandboxResult("ok", {"eager_ms": 2.0, "timing_status": "ok"}, "", 0.1) for _ in payloads]

    monkeypatch.setattr(driver, "SandboxPool", CountingPool)
    monkeypatch.setattr(driver, "_SHARED_POOLS", KeptPools())
    driver.start_kept_pools("cpu", timeout_s=600.0, lanes=2)
    assert len(made) == 2 and all(pool.env[WARM_UP_ENV] == driver.WARM_UP_PATH for pool in made)
    [row] = time_records([{"code": "x = 1", "id": "t"}], driver.TimingOptions(device="cpu"), timeout_s=600.0,
                         reuse_pools=True, lane=1, progress=False)
    assert row["eager_ms"] == 2.0
    assert len(made) == 2 and [len(pool.sent) for pool in made] == [0, 1]
