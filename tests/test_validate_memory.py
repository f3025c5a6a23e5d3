"""Memory pressure: a task that runs out of GPU memory beside other workers is tried again in a kept worker (twice
at most, each time once the memory it needs is free), or in a fresh one without kept workers; a task past the pool's
resident limit is judged again alone in a fresh worker; past the limit even then, it is an `exec_error` flagged
`memory_limit` (a limit of the pipeline's own, not a crash)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from filters import validate
from filters.execute.worker import check_task
from opgen.sandbox.pool import SandboxResult, out_of_memory, over_memory_limit

BAD = Path(__file__).parent / "bad_tasks"


@pytest.fixture
def pools_made(monkeypatch) -> list[tuple]:
    """The sandbox pools execute_verdicts starts, as (workers, max_tasks_per_worker), in order."""
    made: list[tuple] = []
    real_pool = validate.SandboxPool

    def counting_pool(size, *args, **kwargs):
        made.append((size, kwargs.get("max_tasks_per_worker")))
        return real_pool(size, *args, **kwargs)

    monkeypatch.setattr(validate, "SandboxPool", counting_pool)
    return made


PAYLOAD_LOG_ENV = "OPGEN_TEST_PAYLOAD_LOG"


def recording_check_task(payload: dict) -> dict:
    """The execute checks, run after writing down what a retry short of GPU memory reads from the payload."""
    with open(os.environ[PAYLOAD_LOG_ENV], "a") as log:
        log.write(json.dumps({key: payload.get(key) for key in ("id", "bytes_moved", "timeout_s", "memory_wait")})
                  + "\n")
    return check_task(payload)


@pytest.fixture
def payloads_sent(monkeypatch, tmp_path) -> Path:
    """A log of the payloads the workers got (what a retry short of GPU memory reads from them), one JSON line each."""
    log = tmp_path / "payloads.jsonl"
    monkeypatch.setenv(PAYLOAD_LOG_ENV, str(log))
    monkeypatch.setattr(validate, "CHECK_FUNCTION", f"{__name__}:recording_check_task")
    return log


def test_out_of_memory_is_recognised():
    oom = SandboxResult("ok", {"reason": "exec_error", "detail": "OutOfMemoryError: CUDA out of memory."}, "")
    limit = SandboxResult("crash", None, "memory limit exceeded: 5000 MB resident > 4096 MB")
    other = SandboxResult("ok", {"reason": "exec_error", "detail": "RuntimeError: shape mismatch"}, "")
    segfault = SandboxResult("crash", None, "worker died (signal 11)")
    # what a library allocation (cuBLAS workspace, a CUDA context) raises instead of OutOfMemoryError
    accelerator = SandboxResult("ok", {"reason": "exec_error", "detail": "AcceleratorError: CUDA error: out of memory"}, "")
    assert all(out_of_memory(r, "detail") for r in (oom, limit, accelerator))
    assert not out_of_memory(other, "detail") and not out_of_memory(segfault, "detail")
    assert over_memory_limit(limit) and not any(over_memory_limit(r) for r in (oom, other, segfault, accelerator))


def test_a_task_past_the_memory_limit_is_not_a_crash():
    limit = SandboxResult("crash", None, "memory limit exceeded: 5000 MB resident > 4096 MB")
    segfault = SandboxResult("crash", None, "worker killed by SIGSEGV")
    line = validate._verdict(limit).line({"id": "hog"})
    assert (line["reason"], line["stage"], line["memory_limit"]) == ("exec_error", "sandbox", True)
    assert "5000 MB resident > 4096 MB" in line["detail"]
    assert validate._verdict(segfault).reason == "crash"


def test_the_sandbox_stage_holds_the_workers_time_outside_the_checks():
    checked = SandboxResult("ok", {"reason": None, "metrics": {}, "stages": [["eager", 0.5], ["compile", 1.0]]}, "",
                            2.25, 1.5)
    verdict = validate._verdict(checked)
    assert verdict.stages == [("sandbox", 0.75), ("eager", 0.5), ("compile", 1.0)]
    assert (verdict.metrics["worker_s"], verdict.metrics["worker_cpu_s"]) == (2.25, 1.5)
    hung = SandboxResult("timeout", None, "task exceeded 60 s", 61.0)
    assert validate._verdict(hung).stages == [("sandbox", 61.0)]
    assert validate._verdict(hung).line({"id": "hung"})["worker_s"] == 61.0


@pytest.mark.parametrize("workers", [2, 1])
def test_memory_hog_is_rejudged_alone_in_a_fresh_worker(pools_made, workers):
    hog = (BAD / "exec_error__huge_allocation.py").read_text()
    good = (BAD / "trivial__identity.py").read_text()
    lines = validate.execute_verdicts([{"id": "hog", "code": hog}, {"id": "other", "code": good}], workers=workers,
                                      timeout_s=60, memory_mb=2048)
    assert pools_made == [(workers, None), (1, 1)]  # the first pass, then the hog alone in a worker of its own
    assert lines[0]["reason"] == "exec_error" and lines[0]["memory_limit"] is True
    assert "alone in a fresh worker, memory limit exceeded" in lines[0]["detail"]
    assert lines[1]["reason"] == "trivial" and "memory_limit" not in lines[1]


def test_timing_recognises_out_of_memory_results():
    oom = SandboxResult("ok", {"timing_status": "error",
                               "timing_error": "eager: AcceleratorError: CUDA error: out of memory"}, "")
    fine = SandboxResult("ok", {"timing_status": "ok", "timing_error": None}, "")
    broken = SandboxResult("ok", {"timing_status": "error", "timing_error": "eager: RuntimeError: shape"}, "")
    crashed = SandboxResult("crash", None, "worker exited with status 70")
    assert out_of_memory(oom, "timing_error")
    assert not any(out_of_memory(r, "timing_error") for r in (fine, broken, crashed))


def _short_once(marker: Path) -> str:
    """A task whose first forward pass anywhere runs out of GPU memory (as beside other workers' checks)."""
    return (BAD / "trivial__identity.py").read_text().replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n"
        "        import os\n"
        f"        if not os.path.exists({str(marker)!r}):\n"
        f"            open({str(marker)!r}, 'w').close()\n"
        "            raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')\n")


def test_a_task_short_of_gpu_memory_is_tried_again_in_a_kept_worker(pools_made, payloads_sent, tmp_path):
    records = [{"id": "short", "code": _short_once(tmp_path / "ran"), "bytes_moved": 3 * 2**30},
               {"id": "other", "code": (BAD / "exec_error__raises.py").read_text()}]
    kept = len(validate._KEPT_POOLS)
    try:
        lines = validate.execute_verdicts(records, workers=2, timeout_s=60, memory_mb=None, reuse_pool=True)
        pool = validate._KEPT_POOLS.values()[kept]
        pids = {worker.proc.pid for worker in pool._pool}
    finally:
        validate._KEPT_POOLS.close_except(set())
    assert pools_made == [(2, None)]   # the kept pool, and no fresh worker
    assert (tmp_path / "ran").exists()
    # judged on the second try, past the eager pass that ran short
    assert (lines[0]["reason"], lines[0]["memory_retry"]) == ("trivial", "kept worker")
    assert lines[0]["worker_pid"] in pids
    assert lines[1]["reason"] == "exec_error" and "memory_retry" not in lines[1]
    # every payload carries the task's bytes and time limit; the retry waits for the memory the task needs
    sent = sorted((json.loads(line) for line in payloads_sent.read_text().splitlines()),
                  key=lambda p: (p["id"], bool(p["memory_wait"])))
    assert sent == [{"id": "other", "bytes_moved": None, "timeout_s": 60, "memory_wait": None},
                    {"id": "short", "bytes_moved": 3 * 2**30, "timeout_s": 60, "memory_wait": None},
                    {"id": "short", "bytes_moved": 3 * 2**30, "timeout_s": 60, "memory_wait": True}]


def test_a_try_again_does_not_wait_for_the_shard_s_other_first_tries(tmp_path):
    """A task short of GPU memory is tried again as soon as a kept worker is free, while a slow task of the same
    shard still runs its first try: a lane's other worker does not idle until the whole shard's first tries end.
    Its verdict line says how long the short try took."""
    slow_done, retried_at = tmp_path / "slow_done", tmp_path / "retried_at"
    # the slow task's first pass lasts until the short task has been tried again, 45 s at most (inside the 60 s
    # limit), and writes which came first: a try again queued behind the shard's first tries comes after it ends.
    # No clocks are compared: two processes' time.time() around a file's creation can read in either order
    slow = (BAD / "trivial__identity.py").read_text().replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n"
        "        import os, time\n"
        f"        if not os.path.exists({str(slow_done)!r}):\n"
        "            until = time.monotonic() + 45\n"
        f"            while not os.path.exists({str(retried_at)!r}) and time.monotonic() < until:\n"
        "                time.sleep(0.02)\n"
        f"            seen = 'retried' if os.path.exists({str(retried_at)!r}) else 'timed out'\n"
        f"            open({str(slow_done)!r}, 'w').write(seen)\n")
    short = _short_once(tmp_path / "ran").replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n"
        "        import os, time\n"
        f"        if os.path.exists({str(tmp_path / 'ran')!r}) and not os.path.exists({str(retried_at)!r}):\n"
        f"            open({str(retried_at)!r}, 'w').close()\n", 1)
    try:
        lines = validate.execute_verdicts([{"id": "slow", "code": slow}, {"id": "short", "code": short}], workers=2,
                                          timeout_s=60, memory_mb=None, reuse_pool=True)
    finally:
        validate._KEPT_POOLS.close_except(set())
    assert [line["reason"] for line in lines] == ["trivial", "trivial"]
    assert lines[1]["memory_retry"] == "kept worker" and "memory_retry" not in lines[0]
    assert 0 < lines[1]["memory_retry_lost_s"] < 60
    # the slow first try saw the try again while it still ran (not its 45 s running out)
    assert slow_done.read_text() == "retried"


def test_a_task_always_short_of_gpu_memory_is_tried_three_times_in_kept_workers(pools_made, payloads_sent):
    always_short = (BAD / "trivial__identity.py").read_text().replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        raise RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')\n")
    try:
        [line] = validate.execute_verdicts([{"id": "short", "code": always_short}], workers=2, timeout_s=60,
                                           memory_mb=None, reuse_pool=True)
    finally:
        validate._KEPT_POOLS.close_except(set())
    assert pools_made == [(2, None)]   # no fresh worker: its start-up would buy nothing on a crowded GPU
    assert line["reason"] == "exec_error" and "out of memory" in line["detail"]
    assert line["memory_retry"] == "kept worker"
    sent = [json.loads(line)["memory_wait"] for line in payloads_sent.read_text().splitlines()]
    assert sent == [None, True, True]


def test_a_task_short_of_gpu_memory_in_a_pool_of_its_own_goes_to_a_fresh_worker(pools_made, payloads_sent, tmp_path):
    [line] = validate.execute_verdicts([{"id": "short", "code": _short_once(tmp_path / "ran")}], workers=2,
                                       timeout_s=60, memory_mb=None)
    assert pools_made == [(2, None), (1, 1)]
    assert (line["reason"], line["memory_retry"]) == ("trivial", "fresh worker")
    sent = [json.loads(line)["memory_wait"] for line in payloads_sent.read_text().splitlines()]
    assert sent == [None, True]   # the fresh worker's try waits for the memory the task needs


def test_run_profile_sums_up_the_checks_peak_gpu_memory():
    from opgen.analysis import run_profile

    lines = [{"gpu_peak_mb": mb} for mb in (100, 300, 200, 5000, *[10] * 20)] + [{"reason": "cpu"}]
    figures = run_profile.peak_memory(lines)
    assert figures == {"candidates": 24, "median": 10, "p90": 100, "max": 5000,
                       "largest_12_sum": 5000 + 300 + 200 + 100 + 8 * 10}
    assert run_profile.peak_memory([{"reason": None}]) == {}


def test_the_gpu_peak_is_measured_only_where_it_can_be():
    import torch

    from filters.execute import worker

    # never raises: a torch without CUDA (this machine's) says no, and check_task then records no gpu_peak_mb
    assert worker._reset_gpu_peak() is torch.cuda.is_available()


def test_run_profile_counts_what_the_other_workers_gpu_memory_cost():
    from opgen.analysis import run_profile
    from opgen.analysis.profile_text import execute_lines

    lines = [{"memory_retry": "kept worker", "memory_retry_lost_s": 5.5, "gpu_cache_releases": 3},
             {"memory_retry": "kept worker", "memory_retry_lost_s": 2.25, "gpu_cache_releases": 1},
             {"reason": None}, {"reason": None}]
    assert run_profile.memory_crowd(lines) == {"memory_retry_lost_s": 7.8, "gpu_cache_releases_per_candidate": 1.0}
    assert run_profile.memory_crowd([]) == {"memory_retry_lost_s": 0.0, "gpu_cache_releases_per_candidate": 0.0}
    execute = {"candidates": 4, "passed": 2, "passed_not_yet_timed": 0, "check_s_per_candidate_seen": {},
               "cpu_share": 0.4, "lock_wait_share": 0.5, "out_of_memory": {"degenerate": 1},
               "memory_retry": {"kept worker": 2}, **run_profile.memory_crowd(lines)}
    text = execute_lines(execute, timed=True)
    assert ("  rejected out of GPU memory, by check: degenerate 1; tried again after running short: kept worker 2, "
            "their short tries 8 worker-s") in text
    assert "  GPU cache given back to a device short of memory: 1.0 holds a candidate" in text
    execute["lock_holds"] = {"holds_per_candidate": 20.0, "waited_share": 0.25, "wait_s_per_waited_hold": 0.6,
                             "held_share": 0.3, "longest_hold_s": {"median": 0.5, "p90": 1.0, "max": 2.0},
                             "longest_hold_check": {"degenerate": 0.667, "runtime": 0.333}}
    assert "    the check that took it: degenerate 67%, runtime 33%" in execute_lines(execute, timed=True)
    assert "held a candidate, by check" not in "".join(execute_lines(execute, timed=True))
    execute["lock_holds"]["held_s_by_check"] = run_profile.held_by_check(
        [{"worker_lock_held_s_by_check": {"compile": 0.5, "visible": 0.25}},
         {"worker_lock_held_s_by_check": {"compile": 1.5}}, {"worker_lock_holds": 3}])
    assert execute["lock_holds"]["held_s_by_check"] == {"compile": 1.0, "visible": 0.125}
    assert "    held a candidate, by check: compile 1.00 s, visible 0.12 s" in execute_lines(execute, timed=True)


def test_run_profile_counts_the_timings_tried_again_for_gpu_memory():
    from opgen.analysis import run_profile
    from opgen.analysis.profile_text import timing_lines

    oom = "eager: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    records = {"waited": {"memory_wait_s": 2.5, "timing_status": "ok"},
               "waited_out": {"memory_wait_s": 60.1, "timing_status": "ok"},
               "short_twice": {"memory_wait_s": 60.0, "timing_status": "error", "timing_error": oom},
               "never_short": {"timing_status": "ok"}}
    timing = run_profile.timing_profile(records)
    assert (timing["memory_retries"], timing["memory_waited_out"], timing["memory_wait_s"]) == (3, 2, 122.6)
    assert timing["out_of_memory"] == 1
    window = {"below": 0, "above": 0}
    assert ("  timed again after running short of GPU memory: 3 (2 of them waited out the minute's bound for it, "
            "123 s of waiting in all); failed for GPU memory: 1") in timing_lines(timing, window)
    calm = run_profile.timing_profile({"never_short": {"timing_status": "ok"}})
    assert not any("GPU memory" in line for line in timing_lines(calm, window))
