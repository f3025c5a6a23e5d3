"""The per-GPU lock: shared holders run together, an exclusive holder runs alone, and a waiting exclusive
holder keeps new shared holders out (a stream of validation work cannot starve a timed run)."""

from __future__ import annotations

import fcntl
import threading
import time

import pytest

from opgen.errors import UsageError
from opgen.sandbox.gpus import (
    SHARED_SLOTS_ENV,
    LockWaits,
    compiled_graphs_locked,
    gpu_lock,
    holding_gpu_lock,
    inductor_benchmarks_locked,
    shared_slots,
)


def _hold(path: str, shared: bool, seconds: float, log: list, name: str) -> threading.Thread:
    def run() -> None:
        with gpu_lock(path, shared=shared):
            log.append(("in", name, time.monotonic()))
            time.sleep(seconds)
            log.append(("out", name, time.monotonic()))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _span(log: list, name: str) -> tuple[float, float]:
    return (next(t for kind, n, t in log if kind == "in" and n == name),
            next(t for kind, n, t in log if kind == "out" and n == name))


def test_shared_holders_overlap(tmp_path):
    log: list = []
    threads = [_hold(str(tmp_path / "gpu"), True, 0.3, log, f"r{i}") for i in range(3)]
    for thread in threads:
        thread.join()
    starts, ends = zip(*(_span(log, f"r{i}") for i in range(3)))
    assert max(starts) < min(ends)   # all three were inside at once


def test_exclusive_holder_waits_for_readers_and_blocks_new_ones(tmp_path):
    path, log = str(tmp_path / "gpu"), []
    first = _hold(path, True, 0.4, log, "reader1")
    _entered(log, "reader1")
    writer = _hold(path, False, 0.3, log, "writer")
    _waiting_at_the_gate(path)
    late = _hold(path, True, 0.1, log, "reader2")   # arrives while the writer waits
    for thread in (first, writer, late):
        thread.join()
    r1, w, r2 = _span(log, "reader1"), _span(log, "writer"), _span(log, "reader2")
    assert w[0] >= r1[1]          # the writer entered after the first reader left
    assert r2[0] >= w[1]          # the late reader did not overtake the waiting writer


def _most_inside_at_once(log: list) -> int:
    inside = most = 0
    for kind, _, _ in sorted(log, key=lambda entry: (entry[2], entry[0] == "in")):   # a leave before an entry
        inside += 1 if kind == "in" else -1
        most = max(most, inside)
    return most


def test_shared_slots_bound_how_many_shared_holders_are_inside_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv(SHARED_SLOTS_ENV, "2")
    log: list = []
    threads = [_hold(str(tmp_path / "gpu"), True, 0.2, log, f"r{i}") for i in range(5)]
    for thread in threads:
        thread.join()
    assert sum(kind == "out" for kind, _, _ in log) == 5
    assert _most_inside_at_once(log) == 2


def test_a_shared_holder_waiting_for_a_slot_does_not_overtake_a_waiting_exclusive_one(tmp_path, monkeypatch):
    monkeypatch.setenv(SHARED_SLOTS_ENV, "1")
    path, log = str(tmp_path / "gpu"), []
    first = _hold(path, True, 0.4, log, "reader1")
    _entered(log, "reader1")
    waiting_for_the_slot = _hold(path, True, 0.1, log, "reader2")
    time.sleep(0.1)
    writer = _hold(path, False, 0.3, log, "writer")   # arrives while reader2 waits for the slot
    for thread in (first, waiting_for_the_slot, writer):
        thread.join()
    r1, r2, w = _span(log, "reader1"), _span(log, "reader2"), _span(log, "writer")
    assert w[0] >= r1[1]
    assert r2[0] >= w[1]   # the slot did not let it past the gate the writer held


def test_shared_slots_come_from_the_environment_and_a_malformed_value_is_one_usage_error():
    assert shared_slots({}) == 0
    assert shared_slots({SHARED_SLOTS_ENV: " 3 "}) == 3
    for bad in ("two", "-1", "1.5"):
        with pytest.raises(UsageError, match=SHARED_SLOTS_ENV):
            shared_slots({SHARED_SLOTS_ENV: bad})


def test_a_malformed_slot_count_stops_a_build_with_one_line_and_status_2(tmp_path, monkeypatch, capsys):
    from opgen.cli import main

    monkeypatch.setenv(SHARED_SLOTS_ENV, "two")
    assert main(["build", "--n", "2", "--out", str(tmp_path / "run"), "--device", "cpu", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and SHARED_SLOTS_ENV in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "run" / "shards").exists()   # before any work


def test_no_path_means_no_lock():
    with gpu_lock(None), gpu_lock(None, shared=True):
        pass



def _entered(log: list, name: str) -> None:
    while not any(kind == "in" and n == name for kind, n, _ in log):
        time.sleep(0.01)


def _waiting_at_the_gate(path: str) -> None:
    """Until an exclusive holder has taken the gate (the shared holders inside have passed it and let it go)."""
    while not _locked_elsewhere(path + ".gate"):
        time.sleep(0.005)


def test_counted_holds_split_the_wait_at_the_gate(tmp_path):
    """A shared hold behind an exclusive one waits at the gate; an exclusive hold behind shared holders passes the
    gate at once and waits for them to leave; a hold nobody keeps waits for nothing; nested holds are not counted.
    Each wait is told by where the holder it waited for held the lock (0.4 s of it), never by how short the rest was."""
    path, log = str(tmp_path / "gpu"), []
    behind_writer, behind_readers, free = LockWaits(), LockWaits(), LockWaits()
    writer = _hold(path, False, 0.4, log, "writer")
    _entered(log, "writer")
    started = time.perf_counter()
    with gpu_lock(path, shared=True, waits=behind_writer), gpu_lock(path, shared=True, waits=behind_writer):
        time.sleep(0.1)
    took = time.perf_counter() - started
    writer.join()
    reader = _hold(path, True, 0.4, log, "reader")
    _entered(log, "reader")
    with gpu_lock(path, waits=behind_readers):
        pass
    reader.join()
    for _ in range(5):
        with gpu_lock(path, shared=True, waits=free):
            pass
    assert behind_writer.holds == behind_writer.waited == 1
    assert behind_writer.gate_s > 0.2 and behind_writer.gate_s <= behind_writer.seconds   # its wait, at the gate
    assert behind_writer.seconds + behind_writer.held_s <= took
    assert behind_writer.held_s == behind_writer.longest_s and behind_writer.held_s >= 0.1
    assert behind_readers.holds == behind_readers.waited == 1
    assert behind_readers.seconds - behind_readers.gate_s > 0.2   # its wait, past the gate: for the reader to leave
    # free: of five holds nobody kept, none waited (one could read a wait only if the machine paused it mid-hold)
    assert free.holds == 5 and free.waited <= 1


def test_compiled_graph_calls_count_their_holds(tmp_path, monkeypatch):
    """Each compiled graph called inside holds the lock shared, its wait counted in the context's holds."""
    from torch._inductor.output_code import CompiledFxGraph

    path, log, synchronized = str(tmp_path / "gpu"), [], []
    monkeypatch.setattr(CompiledFxGraph, "__call__", lambda self, inputs: inputs)
    writer = _hold(path, False, 0.4, log, "writer")
    _entered(log, "writer")
    with compiled_graphs_locked(path, lambda: synchronized.append(True)) as waits:
        each: list[float] = []   # each hold's wait, as counted
        count = waits.count
        waits.count = lambda waiting, gated, locked, released: (each.append(locked - waiting),
                                                                count(waiting, gated, locked, released))
        assert CompiledFxGraph.__call__(None, [1]) == [1]
        assert CompiledFxGraph.__call__(None, [2]) == [2]
    writer.join()
    # the first call waited for the writer, the second, after it had left, for no holder (a loaded machine can make
    # an untaken lock's few calls last past the 1 ms that `waited` counts, so the waits themselves are compared)
    assert waits.holds == 2 and waits.waited >= 1 and synchronized == [True, True]
    assert each[0] > 0.2 and each[1] < each[0] / 2 and waits.seconds == pytest.approx(sum(each))


def _locked_elsewhere(path: str) -> bool:
    """Whether some holder keeps the lock: an exclusive try from a fresh open file fails."""
    with open(path, "a+") as other:
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(other, fcntl.LOCK_UN)
        return False


def test_nested_holds_are_free_and_release_once(tmp_path):
    path = str(tmp_path / "gpu")
    done = threading.Event()

    def nest() -> None:   # an exclusive hold whose own work takes the shared lock: no self-deadlock
        with gpu_lock(path), gpu_lock(path, shared=True), gpu_lock(path, shared=True):
            assert _locked_elsewhere(path)
        done.set()

    thread = threading.Thread(target=nest, daemon=True)
    thread.start()
    thread.join(5)
    assert done.is_set()
    assert not _locked_elsewhere(path)


def test_inductor_autotuning_holds_the_shared_lock(tmp_path):
    """torch's hook (>= 2.13): inductor's benchmark lock context is ours inside, gone outside."""
    from torch._inductor.runtime import benchmarking

    path = str(tmp_path / "gpu")
    if not hasattr(benchmarking, "maybe_gpu_benchmark_lock"):
        pytest.skip("this torch has no benchmark lock hook (the fallback is tested below)")
    started = time.perf_counter()
    with inductor_benchmarks_locked(path) as waits:
        assert not _locked_elsewhere(path)
        with benchmarking.maybe_gpu_benchmark_lock():
            assert _locked_elsewhere(path)
        assert not _locked_elsewhere(path)
        log: list = []
        timed_run = _hold(path, False, 0.4, log, "timed")   # a timed run holds the GPU alone: the benchmark waits
        while not log:
            time.sleep(0.01)
        with benchmarking.maybe_gpu_benchmark_lock():
            assert _span(log, "timed")[1] <= time.monotonic()
        timed_run.join()
    assert waits.holds == 2 and 0.2 < waits.seconds <= time.perf_counter() - started
    with benchmarking.maybe_gpu_benchmark_lock():
        assert not _locked_elsewhere(path)


def test_inductor_autotuning_fallback_wraps_the_benchmarker(tmp_path, monkeypatch):
    """Older torch: the module benchmarker's benchmark_gpu is wrapped while inside, the class's method after."""
    from torch._inductor.runtime import benchmarking

    path, seen = str(tmp_path / "gpu"), []
    monkeypatch.delattr(benchmarking, "set_gpu_benchmark_lock_context", raising=False)
    monkeypatch.setattr(type(benchmarking.benchmarker), "benchmark_gpu",
                        lambda self, fn, **kwargs: seen.append(_locked_elsewhere(path)) or 1.0)
    with inductor_benchmarks_locked(path) as waits:
        assert benchmarking.benchmarker.benchmark_gpu(lambda: None, rep=40) == 1.0
    benchmarking.benchmarker.benchmark_gpu(lambda: None)
    assert seen == [True, False] and waits.holds == 1
    assert "benchmark_gpu" not in vars(benchmarking.benchmarker)


def test_an_exclusive_hold_says_so_in_the_quiet_registry_and_a_shared_one_does_not(tmp_path):
    import os

    from opgen.sandbox.gpus import gpu_lock
    from opgen.sandbox.quiet import registry

    marker = registry() / f"{os.getpgid(0)}.timing"
    with gpu_lock(str(tmp_path / "gpu.lock"), shared=True):
        assert not marker.exists()
    with gpu_lock(str(tmp_path / "gpu.lock")):
        assert marker.exists()
    assert not marker.exists()


def test_a_check_s_outermost_holds_give_the_gpu_cache_back_when_the_device_is_short(tmp_path, monkeypatch):
    """A pass's temporaries go back to the device at the end of each outermost hold (the device short of memory),
    never inside one: the pass after a nested hold still has them, and a hold stays one hold."""
    from filters.execute import task_run
    from filters.execute.task_run import TaskRun

    asked: list[bool] = []   # whether the lock was still held when the release was asked for
    path = str(tmp_path / "gpu.lock")
    monkeypatch.setattr(task_run, "release_cache_if_short", lambda: asked.append(holding_gpu_lock(path)) or True)
    run = TaskRun(code="", name="t", device="cuda", gpu_lock_path=path)
    monkeypatch.setattr(run, "synchronize", lambda: None)
    with run.sharing_gpu():
        with run.sharing_gpu():   # a forward pass inside a check's hold
            pass
        assert asked == []
    with run.alone_on_gpu():
        pass
    assert asked == [True, True]   # one per outermost hold, given back before the lock is
    assert run.cache_releases == 2
    cpu_run = TaskRun(code="", name="t", device="cpu", gpu_lock_path=path)
    with cpu_run.sharing_gpu():
        pass
    assert asked == [True, True] and cpu_run.cache_releases == 0
