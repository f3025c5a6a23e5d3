"""The timing guard: a row whose own evidence says its timing was slowed is timed again before it counts.

A baseline is what a trainer's reward divides by: one taken 2x too slow pays any kernel a 2x speed-up for
nothing. Sharing the GPU or the host only ever slows a measurement, so each piece of evidence below that a row's
CUDA-event medians are slower than the task can run marks the row as suspect:

- `checks`: the execute stage's rough eager median (`eager_ms_cuda`: host clock, a few passes, on a GPU
  shared with the other workers' checks, so if anything slower) is faster than the timed eager median;
- `profiler`: the profiler's device time per call, taken in the same exclusive hold, is slower than the
  events' median (the kernels' own time cannot exceed the call's on one stream);
- `estimate`: the eager median is far beyond the sampler's roofline estimate (`estimated_gpu_ms`; its
  measured/estimated ratio has a log-sd of about 1 on an H200, so only a ratio past ESTIMATE_RATIO counts).

- `host`: the events' median is well above the profiler's device time: the GPU waits on the host between
  kernels (launch-bound tasks: recurrent cells, chains of tiny kernels), so the time follows the host's speed,
  which the build's other workers slow even while the GPU is held alone (on one H100: an `nn.RNN` task timed
  7.24 ms in a build ran in 4.21 ms alone, its device time 2.12 ms). 45 of 805 rows of an H100 build.

A suspect row is timed once more, with the host held quiet (opgen/sandbox/quiet.py: the other workers paused for
the timed section), and keeps, for eager and for compile each, the faster of the two medians with its own
statistics (`timing_rechecked` says why; `eager_ms_first` keeps the first).
"""

from __future__ import annotations

from collections.abc import Callable

CHECKS_RATIO = 1.25     # timed eager median over the checks' rough one
PROFILER_RATIO = 1.25   # profiler device time over the events' median
HOST_RATIO = 1.3       # events' median over the profiler's device time (eager: 95% of an H100 build's rows below 1.1)
ESTIMATE_RATIO = 8.0    # timed eager median over the roofline estimate (about two log-sd)
CHECKS_SLACK_MS = 0.05  # the host clock's own cost on a pass, below which the checks' figure says nothing


def suspicions(row: dict) -> list[str]:
    """Why the row's timing looks slowed, one phrase each; empty when its evidence agrees (or it has none)."""
    eager = row.get("eager_ms")
    if not eager:
        return []
    found = []
    checks = row.get("eager_ms_cuda")
    if checks and eager > CHECKS_RATIO * checks + CHECKS_SLACK_MS:
        found.append(f"checks: eager {eager:.4g} ms against the checks' {checks:.4g} ms")
    for prefix in ("eager", "compile"):
        ms, device_us = row.get(f"{prefix}_ms"), row.get(f"{prefix}_device_us")
        if ms and device_us and device_us / 1e3 > PROFILER_RATIO * ms:
            found.append(f"profiler: {prefix} device time {device_us / 1e3:.4g} ms against events' {ms:.4g} ms")
        if ms and device_us and ms > HOST_RATIO * device_us / 1e3:
            found.append(f"host: {prefix} events' {ms:.4g} ms against device time {device_us / 1e3:.4g} ms")
    estimate = row.get("estimated_gpu_ms")
    if estimate and eager > ESTIMATE_RATIO * estimate:
        found.append(f"estimate: eager {eager:.4g} ms against the estimate's {estimate:.4g} ms")
    return found


def recheck(timed: list[dict], time_again: Callable[[list[dict]], list[dict] | None]) -> list[dict] | None:
    """`timed` with every suspect row timed once more (`time_again`, in one call, which holds the host quiet) and
    merged (`merge`); None when `time_again` returns None (the caller stopped it)."""
    suspects = {index: found for index, row in enumerate(timed) if (found := suspicions(row))}
    if not suspects:
        return timed
    again = time_again([timed[index] for index in suspects])
    if again is None:
        return None
    out = list(timed)
    for (index, found), second in zip(suspects.items(), again):
        out[index] = merge(timed[index], second, "; ".join(found))
    return out


def merge(first: dict, second: dict, why: str) -> dict:
    """The row timed twice: for eager and for compile each, the attempt with the faster median, with all of that
    attempt's columns of that prefix (its statistics, device time, achieved rates); the speed-up computed again."""
    row = dict(first)
    for prefix in ("eager", "compile"):
        mine, theirs = first.get(f"{prefix}_ms"), second.get(f"{prefix}_ms")
        if theirs is not None and (mine is None or theirs < mine):
            row.update({key: value for key, value in second.items() if key.startswith(f"{prefix}_")})
    if row.get("eager_ms") and row.get("compile_ms"):
        row["compile_speedup"] = row["eager_ms"] / row["compile_ms"]
    if first.get("timing_status") != "ok" and second.get("timing_status") == "ok":
        row.update(timing_status="ok", timing_error=second.get("timing_error"))
    row["eager_ms_first"] = first.get("eager_ms")
    row["quiet_paused"] = second.get("quiet_paused")
    row["timing_rechecked"] = why
    return row
