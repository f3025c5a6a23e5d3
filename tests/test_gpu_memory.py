"""A retry's wait for free GPU memory: the need it waits for, that it goes as soon as the memory is free, that the
wait is bounded and says so, and that a first try never waits. The device's free memory is a function here, so it
runs without a GPU."""

from __future__ import annotations

import pytest

from opgen.sandbox import gpu_memory
from opgen.sandbox.gpu_memory import estimated_need_mb, wait_before_retry, wait_for_free_memory

TOTAL_MB = 81_000


def test_a_task_needs_four_times_the_bytes_its_forward_moves():
    assert estimated_need_mb(2**30, TOTAL_MB) == 4 * 1024
    assert estimated_need_mb(1000, TOTAL_MB) == gpu_memory.NEED_FLOOR_MB           # small tasks: the floor
    assert estimated_need_mb(100 * 2**30, TOTAL_MB) == TOTAL_MB                     # never more than the GPU
    assert estimated_need_mb(None, TOTAL_MB) == TOTAL_MB * gpu_memory.UNKNOWN_NEED_SHARE   # no estimate


def test_the_wait_ends_as_soon_as_the_memory_is_free():
    free = iter([1_000, 2_000, 5_000, 9_000, 9_000])
    naps = []
    waited = wait_for_free_memory(4_096, max_wait_s=60, free_mb=lambda: next(free), sleep=naps.append)
    assert len(naps) == 2 and "memory_waited_out" not in waited and waited["memory_wait_s"] >= 0
    assert next(free) == 9_000   # polled no further than the first reading that fit


def test_the_wait_is_bounded_and_says_so():
    polls = []

    def crowded() -> float:
        polls.append(1)
        return 100.0

    waited = wait_for_free_memory(4_096, max_wait_s=0.3, free_mb=crowded)
    assert waited["memory_waited_out"] is True and 0.3 <= waited["memory_wait_s"] < 5 and len(polls) >= 3


@pytest.mark.parametrize("payload", [{"bytes_moved": 2**30}, {"bytes_moved": 2**30, "memory_wait": False}])
def test_a_first_try_never_waits_or_touches_the_device(payload):
    assert wait_before_retry(payload, default_timeout_s=120.0) == {}
