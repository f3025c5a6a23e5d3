"""A retry's wait for free GPU memory: the need it waits for, that it goes as soon as the memory is free, that the
wait is bounded and says so, and that a first try never waits. The device's free memory is a function here, so it
runs without a GPU."""

from __future__ import annotations

import pytest

from filters.validate import _retry_payload
from opgen.sandbox import gpu_memory
from opgen.sandbox.gpu_memory import (
    estimated_need_mb,
    failed_allocation_mb,
    need_shown_by_failure,
    retry_need_mb,
    wait_before_retry,
    wait_for_free_memory,
)
from opgen.sandbox.pool import SandboxResult

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


def test_the_wait_is_bounded_and_says_so(monkeypatch):
    """The wait reads a clock that its naps move (POLL_S each), so the bound is exact, however loaded the machine."""
    from types import SimpleNamespace

    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(gpu_memory, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    polls = []

    def crowded() -> float:
        polls.append(clock.now)
        return 100.0

    def nap(seconds: float) -> None:
        clock.now += seconds

    waited = wait_for_free_memory(4_096, max_wait_s=0.3, free_mb=crowded, sleep=nap)
    # polled every POLL_S until the bound had passed, then no more
    assert polls == pytest.approx([i * gpu_memory.POLL_S for i in range(len(polls))])
    assert polls[-2] < 0.3 <= polls[-1] + 1e-9
    assert waited == {"memory_wait_s": round(polls[-1], 3), "memory_waited_out": True}


@pytest.mark.parametrize("payload", [{"bytes_moved": 2**30}, {"bytes_moved": 2**30, "memory_wait": False}])
def test_a_first_try_never_waits_or_touches_the_device(payload):
    assert wait_before_retry(payload, default_timeout_s=120.0) == {}


OOM = ("OutOfMemoryError: CUDA out of memory. Tried to allocate 2.87 GiB. GPU 0 has a total capacity of 79.18 GiB "
       "of which 493.19 MiB is free.")


def test_the_failed_allocation_is_read_from_the_error():
    assert failed_allocation_mb(OOM) == pytest.approx(2.87 * 1024)
    assert failed_allocation_mb("... Tried to allocate 792.00 MiB. GPU 0 ...") == 792.0
    assert failed_allocation_mb("RuntimeError: shapes do not match") is None
    assert failed_allocation_mb(None) is None


def test_a_retry_waits_for_what_its_failed_try_showed_not_the_estimate():
    shown = need_shown_by_failure(8_854, OOM)
    assert shown == pytest.approx(gpu_memory.SHOWN_NEED_MARGIN * (8_854 + 2.87 * 1024))
    assert need_shown_by_failure(None, "CUDA error: out of memory") is None   # nothing to go on
    assert need_shown_by_failure(6_000, "CUDA error: out of memory") == gpu_memory.SHOWN_NEED_MARGIN * 6_000
    # the build's case: an estimate of 42 GB from bytes moved, a try that held 8.9 GB and asked 2.9 GB more
    moved = 42_336 / gpu_memory.NEED_PER_BYTE_MOVED * 2**20
    assert retry_need_mb({"bytes_moved": moved}, TOTAL_MB) == pytest.approx(42_336)
    assert retry_need_mb({"bytes_moved": moved, "memory_need_mb": round(shown)}, TOTAL_MB) == round(shown)
    assert retry_need_mb({"memory_need_mb": 10}, TOTAL_MB) == gpu_memory.NEED_FLOOR_MB
    assert retry_need_mb({"memory_need_mb": 10**7}, TOTAL_MB) == TOTAL_MB


def test_the_execute_retry_carries_the_need_its_failed_try_showed():
    payload = {"code": "...", "bytes_moved": 2**34}
    failed = SandboxResult("ok", {"reason": "exec_error", "detail": OOM, "metrics": {"gpu_peak_mb": 8_854}}, "")
    again = _retry_payload(payload, failed)
    assert again["memory_wait"] is True and again["memory_need_mb"] == round(need_shown_by_failure(8_854, OOM))
    assert again["bytes_moved"] == payload["bytes_moved"] and "memory_need_mb" not in payload
    blind = _retry_payload(payload, SandboxResult("error", None, "CUDA error: out of memory"))
    assert blind["memory_wait"] is True and "memory_need_mb" not in blind   # the estimate, as before


def _releases(free_mb: float, cached: int) -> tuple[bool, list]:
    given_back = []
    done = gpu_memory.release_cache_if_short(free_and_total=lambda: (free_mb * 2**20, TOTAL_MB * 2**20),
                                             cached_bytes=lambda: cached, release=lambda: given_back.append(1))
    return done, given_back


def test_a_worker_gives_its_cached_gpu_blocks_back_only_when_the_device_runs_short():
    short = gpu_memory.RELEASE_BELOW_FREE_SHARE * TOTAL_MB - 1
    assert _releases(short, cached=2**30) == (True, [1])
    assert _releases(gpu_memory.RELEASE_BELOW_FREE_SHARE * TOTAL_MB, cached=2**30) == (False, [])   # room enough
    assert _releases(short, cached=0) == (False, [])                                              # nothing cached


def test_a_build_s_environment_can_set_the_share_or_turn_the_release_off(monkeypatch):
    short = gpu_memory.RELEASE_BELOW_FREE_SHARE * TOTAL_MB - 1
    monkeypatch.setenv(gpu_memory.RELEASE_SHARE_ENV, "0")
    assert _releases(short, cached=2**30) == (False, [])
    monkeypatch.setenv(gpu_memory.RELEASE_SHARE_ENV, "0.5")
    assert _releases(0.4 * TOTAL_MB, cached=2**30) == (True, [1])


@pytest.mark.parametrize("value", ["half", "1.5", "-0.1", "nan"])
def test_a_malformed_gpu_cache_setting_stops_a_build_with_one_line_and_status_2(value, tmp_path, monkeypatch, capsys):
    from opgen.cli import main

    monkeypatch.setenv(gpu_memory.RELEASE_SHARE_ENV, value)
    assert main(["build", "--n", "2", "--out", str(tmp_path / "run"), "--device", "cpu", "--profile", "smoke"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and gpu_memory.RELEASE_SHARE_ENV in err[0] and "Traceback" not in err[0]
    assert not (tmp_path / "run" / "shards").exists()   # before any work


def test_giving_the_cache_back_never_fails_the_task():
    def broken():
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    assert gpu_memory.release_cache_if_short(free_and_total=broken) is False


@pytest.mark.gpu
def test_on_cuda_the_cache_goes_back_to_the_device_when_it_is_short():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    kept = torch.empty(64 * 2**20, device="cuda")   # 256 MB that stays allocated
    freed = torch.empty(64 * 2**20, device="cuda")
    del freed
    assert torch.cuda.memory_reserved() > torch.cuda.memory_allocated()
    assert gpu_memory.release_cache_if_short(below_share=0.0) is False   # never short: the cache stays
    assert gpu_memory.release_cache_if_short(below_share=1.01) is True   # always short: it goes back
    assert torch.cuda.memory_reserved() - torch.cuda.memory_allocated() < 2**20
    del kept
