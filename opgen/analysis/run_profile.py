"""Where a build's worker time went, from its run folder (finished or not): the figures of docs/benchmarks.md's
device sections, read the same way every time (`opgen profile RUN [--compare OTHER] [--since EARLIER]`).

Execute stage (finished shards): candidates executed, how many passed the checks (and, of those, how many wait in
shards not yet timed), the worker processes that ran them and the mean seconds of each one's first task against its
later ones, each check's seconds per candidate it saw (from the shards' `execute.done` funnels; the `sandbox` stage
is the worker's time outside the checks), the workers' CPU and lock-wait shares (`worker_cpu_s`,
`worker_lock_wait_s` over `worker_s`), and rejections for GPU memory by stage. Timing stage: tasks timed and how
many fell inside the window, means of a task's wall, lock wait, exclusive window, the rest, and its CPU seconds,
the compile's seconds and its autotuning's wait for the lock, the share of compiles inductor's cache gave (the
compile check's, on the same machine), the shares of the exclusive hold that the profiler's calls and the trials
take (from each task's medians and trial counts), and the ceiling those holds set: tasks into the window a minute if
they filled one GPU and nothing else ran on it; free GPU memory at the window; how many tasks' event times exceed the
profiler's device time by 1.1x and 1.5x.
Window: the timed tasks the runtime window rejected, below and above it, and for cuts on the sampler's estimate
(`estimated_gpu_ms`) how many below-window timings each would spare and how many in-window tasks it would lose.
`--compare` prints, for the tasks both run folders timed, each timing figure's mean in both and the median ratio.
`--since` (an earlier run folder or state of the same build) counts only the shards each stage finished after it: the
figures of one run of a build that moves between machines (`passed_not_yet_timed` stays the whole build's).
Rates: the build's wall seconds (every invocation's, from `logs/clock.json`; with `--since`, those after the earlier
folder's) and, over them, candidates executed, passed, timed and timed into the window a minute.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

from filters.window import DEFAULT_WINDOW_MS
from opgen.outcome import outcome_of
from opgen.pipeline.report import seconds_share
from opgen.pipeline.rundir import RunDir
from opgen.sandbox.gpu_memory import MAX_WAIT_S
from opgen.sandbox.pool import is_out_of_memory
from opgen.timing.trials import PROFILER_ITERS, PROFILER_WARMUPS, SETTLE_WARMUPS

TIMING_FIGURES = ("timing_wall_s", "setup_s", "warmup_s", "warmup_lock_wait_s", "lock_wait_s", "timed_s", "rest_s", "timing_cpu_s",
                  "compile_s", "compile_lock_wait_s", "profile_read_s", "lock_gate_wait_s")


def shard_folders(run: RunDir) -> list[Path]:
    return sorted(path for path in (run.root / "shards").glob("*") if path.is_dir())


def finished_shards(run: RunDir, stage: str) -> set[str]:
    """The names of the shards whose `stage` has finished."""
    return {folder.name for folder in shard_folders(run) if run.done(folder, stage) is not None}


def execute_profile(run: RunDir, skip: set[str] = frozenset()) -> dict:
    """Per-candidate check seconds, CPU and lock-wait shares, GPU memory (peaks, retries, rejections) of the finished
    execute shards, less those named in `skip`."""
    seconds: Counter = Counter()
    seen: Counter = Counter()
    lines: list[dict] = []
    untimed = 0   # passed candidates of shards whose timing has not finished
    for folder in shard_folders(run):
        marker = run.done(folder, "execute")
        if marker is None:
            continue
        shard = run.rows(folder, "execute")
        if run.done(folder, "timing") is None:
            untimed += sum(1 for line in shard if line["keep"])
        if folder.name in skip:
            continue
        for name, stage in marker["funnel"].get("stages", {}).items():
            seconds[name] += stage["seconds"]
            seen[name] += stage["seen"]
        lines += shard
    wall = sum(line.get("worker_s") or 0.0 for line in lines)
    timed = sum(1 for line in lines if line.get("worker_s"))
    memory = Counter(line.get("stage") for line in lines if not line["keep"] and is_out_of_memory(line.get("detail")))
    return {"candidates": len(lines), "passed": sum(1 for line in lines if line["keep"]),
            "passed_not_yet_timed": untimed, **first_tasks(lines),
            "check_s_per_candidate_seen": {name: round(total / seen[name], 3) for name, total in seconds.items()
                                           if seen[name]},
            "worker_s_mean": round(wall / timed, 3) if timed else None,
            "cpu_share": seconds_share(lines, "worker_cpu_s", "worker_s"),
            "lock_wait_share": seconds_share(lines, "worker_lock_wait_s", "worker_s"),
            "out_of_memory": dict(memory),
            # candidates judged on a second try after running short of GPU memory: in a kept worker, or a fresh one
            "memory_retry": dict(Counter(line["memory_retry"] for line in lines if line.get("memory_retry"))),
            **memory_crowd(lines),
            "gpu_peak_mb": peak_memory(lines), "lock_holds": lock_holds(lines),
            "lock_wait_by_eager_ms": lock_wait_by_eager_ms(lines), "measured_alone": measured_alone(lines)}


def memory_crowd(lines: list[dict]) -> dict:
    """What the other workers' GPU memory cost the candidates: the worker-seconds of the tries that ran short of it
    before a try again (`memory_retry_lost_s`, which `worker_s` leaves out), and the holds a candidate that ended
    giving the allocator's cache back to a device short of memory (`gpu_cache_releases`)."""
    releases = sum(line.get("gpu_cache_releases") or 0 for line in lines)
    return {"memory_retry_lost_s": round(sum(line.get("memory_retry_lost_s") or 0.0 for line in lines), 1),
            "gpu_cache_releases_per_candidate": round(releases / len(lines), 2) if lines else 0.0}


def measured_alone(lines: list[dict]) -> dict:
    """The candidates the runtime check measured again with the GPU to itself (their shared-GPU median read above
    the window), and how many times slower the shared reading was: what the other workers' kernels cost a pass."""
    ratios = sorted(line["eager_ms_cuda_shared"] / line["eager_ms_cuda"] for line in lines
                    if line.get("eager_ms_cuda_shared") and line.get("eager_ms_cuda"))
    if not ratios:
        return {}
    return {"candidates": len(ratios), "shared_over_alone": {"min": round(ratios[0], 2),
                                                             "median": round(statistics.median(ratios), 2),
                                                             "max": round(ratios[-1], 2)}}


def lock_holds(lines: list[dict]) -> dict:
    """The checks' holds of the GPU's lock (CUDA verdict lines that count them): holds a candidate, the share of
    them that found it taken, seconds waited per hold that waited, the share of the workers' time spent holding
    it, and the longest hold of a candidate (median, 90th percentile, largest): what a timed run waits for."""
    counted = [line for line in lines if line.get("worker_lock_holds")]
    if not counted:
        return {}
    holds = sum(line["worker_lock_holds"] for line in counted)
    waited = sum(line.get("worker_lock_holds_waited") or 0 for line in counted)
    longest = sorted(line.get("worker_lock_hold_max_s") or 0.0 for line in counted)
    return {"candidates": len(counted), "holds_per_candidate": round(holds / len(counted), 1),
            "waited_share": round(waited / holds, 3),
            "wait_s_per_waited_hold": round(sum(line.get("worker_lock_wait_s") or 0.0 for line in counted) / waited, 3)
            if waited else None,
            "held_share": seconds_share(counted, "worker_lock_held_s", "worker_s"),
            "longest_hold_s": spread(longest),
            # the check that took a candidate's longest hold: share of the candidates that name one, most first
            "longest_hold_check": shares(Counter(line["worker_lock_hold_max_check"] for line in counted
                                                 if line.get("worker_lock_hold_max_check"))),
            "held_s_by_check": held_by_check(counted)}


def held_by_check(lines: list[dict]) -> dict[str, float]:
    """Seconds each check held the GPU's lock, a candidate (mean over the lines that say it, most first): where
    the checks' GPU work goes, beside the other workers' work on the GPU unless the checks ran alone."""
    return by_check(lines, "worker_lock_held_s_by_check")


def by_check(lines: list[dict], key: str) -> dict[str, float]:
    """The mean of a by-check figure `key` a candidate, over the lines that say it, largest first."""
    said = [line[key] for line in lines if line.get(key)]
    totals: Counter = Counter()
    for by_check in said:
        totals.update(by_check)
    return {name: round(seconds / len(said), 3) for name, seconds in totals.most_common()}


def shares(counts: Counter) -> dict[str, float]:
    """Each key's share of the counts, largest first."""
    total = sum(counts.values())
    return {key: round(count / total, 3) for key, count in counts.most_common()} if total else {}


EAGER_MS_BANDS = (5.0, 20.0, 60.0)   # the rough shared-GPU eager median's bands, in ms


def lock_wait_by_eager_ms(lines: list[dict]) -> dict:
    """Candidates and their lock wait a candidate, by band of the runtime check's shared-GPU eager median
    (`eager_ms_cuda_shared` where it was measured again alone, else `eager_ms_cuda`; "none": not reached)."""
    names = [f"<{bound:g}" for bound in EAGER_MS_BANDS] + [f">={EAGER_MS_BANDS[-1]:g}", "none"]
    bands: dict[str, list[float]] = {name: [] for name in names}
    for line in lines:
        on_cuda = "worker_lock_wait_s" in line or "eager_ms_cuda" in line   # a CPU line holds neither
        if line.get("worker_s") is None or not on_cuda:
            continue
        eager = line.get("eager_ms_cuda_shared", line.get("eager_ms_cuda"))
        upper = next((bound for bound in EAGER_MS_BANDS if eager is not None and eager < bound), None)
        name = "none" if eager is None else f"<{upper:g}" if upper else f">={EAGER_MS_BANDS[-1]:g}"
        bands[name].append(line.get("worker_lock_wait_s") or 0.0)
    return {name: {"candidates": len(waits), "lock_wait_s_mean": round(statistics.mean(waits), 2)}
            for name, waits in bands.items() if waits}


def peak_memory(lines: list[dict]) -> dict:
    """The checks' peak GPU memory per candidate (`gpu_peak_mb`, CUDA only): median, 90th percentile, largest,
    and the sum of the twelve largest (what twelve workers would hold if the largest met)."""
    peaks = sorted(line["gpu_peak_mb"] for line in lines if line.get("gpu_peak_mb") is not None)
    if not peaks:
        return {}
    return {"candidates": len(peaks), **spread(peaks), "largest_12_sum": sum(peaks[-12:])}


def spread(values: list) -> dict:
    """The median, 90th percentile and largest of `values` (sorted here; none: {})."""
    values = sorted(values)
    if not values:
        return {}
    return {"median": values[len(values) // 2], "p90": values[int(0.9 * (len(values) - 1))], "max": values[-1]}


def first_tasks(lines: list[dict]) -> dict:
    """Worker processes, and the mean wall and CPU seconds of each one's first task against its later ones (a
    first task pays for the worker's imports and first compile; many workers mean many were replaced)."""
    numbered = [line for line in lines if line.get("worker_task")]   # verdict lines from before this was kept lack it
    if not numbered:
        return {}
    first = [line for line in numbered if line["worker_task"] == 1]
    later = [line for line in numbered if line["worker_task"] > 1]
    return {"worker_processes": len({line["worker_pid"] for line in numbered}),
            "first_task_worker_s_mean": _mean([line.get("worker_s") for line in first]),
            "first_task_cpu_s_mean": _mean([line.get("worker_cpu_s") for line in first]),
            "later_task_worker_s_mean": _mean([line.get("worker_s") for line in later]),
            "later_task_cpu_s_mean": _mean([line.get("worker_cpu_s") for line in later])}


def timed_records(run: RunDir, skip: set[str] = frozenset()) -> dict[str, dict]:
    """The timed records of the finished timing shards (less those named in `skip`), by id, with `rest_s` (wall
    less lock wait and window)."""
    records = {}
    for folder in shard_folders(run):
        if run.done(folder, "timing") is None or folder.name in skip:
            continue
        in_window = {line["id"]: line["keep"] for line in run.rows(folder, "timing")}
        for record in run.rows(folder, "timed"):
            record["in_window"] = in_window.get(record["id"])
            parts = [record.get(key) for key in ("timing_wall_s", "lock_wait_s", "timed_s")]
            rest = parts[0] - parts[1] - parts[2] if all(part is not None for part in parts) else None
            records[record["id"]] = {**record, "rest_s": rest}
    return records


def _mean(values: list) -> float | None:
    present = [value for value in values if value is not None]
    return round(statistics.mean(present), 3) if present else None


def timing_profile(records: dict[str, dict]) -> dict:
    """Means of the timing figures, free GPU memory, and events against profiler device time."""
    rows = list(records.values())
    free = [r["gpu_free_gb"] for r in rows if r.get("gpu_free_gb") is not None]
    ratios = [r["eager_ms"] / (r["eager_device_us"] / 1e3) for r in rows if r.get("eager_ms") and r.get("eager_device_us")]
    memory = sum(1 for r in rows if is_out_of_memory(r.get("timing_error")))
    waits = [r["memory_wait_s"] for r in rows if r.get("memory_wait_s") is not None]
    hits = [r["compile_cache_hit"] for r in rows if r.get("compile_cache_hit") is not None]
    return {"tasks": len(rows), "in_window": sum(1 for r in rows if r.get("in_window")),
            "compile_cache_hit_share": round(sum(hits) / len(hits), 3) if hits else None, **hold_parts(rows),
            "in_window_per_min_ceiling": hold_ceiling(rows),
            **{f"{key}_mean": _mean([r.get(key) for r in rows]) for key in TIMING_FIGURES},
            "gpu_free_gb_median": round(statistics.median(free), 2) if free else None,
            "gpu_free_gb_min": round(min(free), 2) if free else None,
            "events_over_device_1.1x": sum(1 for ratio in ratios if ratio > 1.1),
            "events_over_device_1.5x": sum(1 for ratio in ratios if ratio > 1.5), "out_of_memory": memory,
            # timed again after running short of GPU memory, and those whose wait for it ran out its bound
            "memory_retries": len(waits), "memory_wait_s": round(sum(waits), 1),
            "memory_waited_out": sum(1 for wait in waits if wait >= MAX_WAIT_S - 1)}


def rate_profile(execute: dict, timing: dict, wall_s: float) -> dict:
    """The stages' counts a minute over `wall_s` seconds (None when no time passed)."""
    def per_min(count: int) -> float | None:
        return round(60 * count / wall_s, 1) if wall_s > 0 else None

    return {"wall_s": round(wall_s, 1), "executed_per_min": per_min(execute["candidates"]),
            "passed_per_min": per_min(execute["passed"]), "timed_per_min": per_min(timing["tasks"]),
            "in_window_per_min": per_min(timing["in_window"])}


def rate_bounds(execute: dict, timing: dict, rates: dict) -> dict:
    """What bounds the rate, on a timed build: the share of the time the timed runs kept the GPU's lock closed to the
    checks (each timed task's wait for its exclusive hold and the hold, at `timed_per_min`), the check workers' share
    of their time spent waiting for the lock, and the rate into the window as a share of the exclusive holds'
    ceiling (`hold_ceiling`). None where a figure is missing."""
    timed, wait, hold = rates.get("timed_per_min"), timing.get("lock_wait_s_mean"), timing.get("timed_s_mean")
    into, ceiling = rates.get("in_window_per_min"), timing.get("in_window_per_min_ceiling")
    closed = round(timed * (wait + hold) / 60, 3) if timed and wait is not None and hold is not None else None
    return {"lock_closed_share": closed, "checks_lock_wait_share": execute.get("lock_wait_share"),
            "ceiling_share": round(into / ceiling, 3) if into is not None and ceiling else None}


def hold_parts(rows: list[dict]) -> dict:
    """The shares of the exclusive hold (`timed_s`) that the profiler's calls and the trials with their settle calls
    take, from each task's medians and trial counts (eager and compiled), over the tasks that have them all."""
    keys = ("timed_s", "eager_ms", "compile_ms", "eager_ms_count", "compile_ms_count")
    full = [r for r in rows if all(r.get(key) for key in keys)]
    hold = sum(r["timed_s"] for r in full)
    if not hold:
        return {"hold_profiler_share": None, "hold_trials_share": None}
    profiler = sum((PROFILER_WARMUPS + PROFILER_ITERS) * (r["eager_ms"] + r["compile_ms"]) / 1e3 for r in full)
    trials = sum(((r["eager_ms_count"] + SETTLE_WARMUPS) * r["eager_ms"]
                  + (r["compile_ms_count"] + SETTLE_WARMUPS) * r["compile_ms"]) / 1e3 for r in full)
    return {"hold_profiler_share": round(profiler / hold, 3), "hold_trials_share": round(trials / hold, 3)}


def hold_ceiling(rows: list[dict]) -> float | None:
    """Tasks a minute into the window that one GPU could time if the exclusive holds filled it and nothing else ran
    on it: the window's tasks over the summed holds of every task timed (those the window rejected held it too)."""
    hold = sum(r.get("timed_s") or 0.0 for r in rows)
    return round(60 * sum(1 for r in rows if r.get("in_window")) / hold, 1) if hold else None


ESTIMATE_CUTS_MS = (1.1, 1.2, 1.5, 2.0)


def window_profile(records: dict[str, dict], window_ms: tuple[float, float]) -> dict:
    """The timed tasks the window rejected (below it, above it), the sampler's estimate of those below, and what a
    cut on the estimate would have done: the below-window timings it spares and the in-window tasks it loses."""
    rows = list(records.values())
    below = [r for r in rows if not r.get("in_window") and r.get("eager_ms") is not None and r["eager_ms"] < window_ms[0]]
    above = [r for r in rows if not r.get("in_window") and r.get("eager_ms") is not None and r["eager_ms"] > window_ms[1]]
    kept = [r for r in rows if r.get("in_window")]

    def estimated_below(group: list[dict], cut: float) -> int:
        return sum(1 for r in group if r.get("estimated_gpu_ms") is not None and r["estimated_gpu_ms"] < cut)

    estimates = [r["estimated_gpu_ms"] for r in below if r.get("estimated_gpu_ms") is not None]
    return {"below": len(below), "above": len(above),
            "below_estimate_ms_median": round(statistics.median(estimates), 3) if estimates else None,
            "estimate_cut_spares_loses": {str(cut): [estimated_below(below, cut), estimated_below(kept, cut)]
                                          for cut in ESTIMATE_CUTS_MS}}


def compare(mine: dict[str, dict], other: dict[str, dict]) -> dict:
    """For the tasks both runs timed: each figure's mean in both, and the median ratio this run / the other."""
    common = sorted(set(mine) & set(other))
    result: dict = {"tasks": len(common)}
    for key in (*TIMING_FIGURES, "eager_ms", "compile_ms"):
        pairs = [(mine[i][key], other[i][key]) for i in common if mine[i].get(key) and other[i].get(key)]
        if pairs:
            result[key] = {"this": _mean([a for a, _ in pairs]), "other": _mean([b for _, b in pairs]),
                           "median_ratio": round(statistics.median(a / b for a, b in pairs), 3)}
    return result


def profile_figures(run_dir: Path, compare_dir: Path | None = None, since_dir: Path | None = None) -> dict:
    """Every figure of the run folder `run_dir`: execute, timing, window and rates; with `since_dir` (an earlier
    folder of the same build) only the shards finished after it, with `compare_dir` the same tasks' timings side by
    side."""
    run = RunDir(run_dir)
    earlier = RunDir(since_dir) if since_dir is not None else None
    executed = finished_shards(earlier, "execute") if earlier else set()
    records = timed_records(run, finished_shards(earlier, "timing") if earlier else set())
    config = json.loads((run.root / "config.json").read_text())
    window = config.get("runtime_window_ms") or DEFAULT_WINDOW_MS
    figures = {"timed": config.get("device") == "cuda" or bool(config.get("cpu_timing")),
               "execute": execute_profile(run, executed), "timing": timing_profile(records),
               "window": window_profile(records, tuple(window))}
    if run.stats_path.is_file():   # what became of the candidates, as the build's summary says it
        figures["outcome"] = outcome_of(json.loads(run.stats_path.read_text(encoding="utf-8")))
    wall_s = run.recorded_seconds() - (earlier.recorded_seconds() if earlier else 0.0)
    figures["rates"] = rate_profile(figures["execute"], figures["timing"], wall_s)
    figures["rates"].update(rate_bounds(figures["execute"], figures["timing"], figures["rates"]))
    if compare_dir is not None:
        figures["compare"] = compare(records, timed_records(RunDir(compare_dir)))
    return figures
