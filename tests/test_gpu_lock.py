"""The per-GPU lock: shared holders run together, an exclusive holder runs alone, and a waiting exclusive
holder keeps new shared holders out (a stream of validation work cannot starve a timed run)."""

from __future__ import annotations

import threading
import time

from opgen.sandbox.gpus import gpu_lock


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
    time.sleep(0.1)
    writer = _hold(path, False, 0.3, log, "writer")
    time.sleep(0.1)
    late = _hold(path, True, 0.1, log, "reader2")   # arrives while the writer waits
    for thread in (first, writer, late):
        thread.join()
    r1, w, r2 = _span(log, "reader1"), _span(log, "writer"), _span(log, "reader2")
    assert w[0] >= r1[1]          # the writer entered after the first reader left
    assert r2[0] >= w[1]          # the late reader did not overtake the waiting writer


def test_no_path_means_no_lock():
    with gpu_lock(None), gpu_lock(None, shared=True):
        pass

