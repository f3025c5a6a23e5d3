"""The build's stage functions (module level, so process pools and Ray can ship them) and their resources."""

from __future__ import annotations

import time
from dataclasses import replace

from filters.base import Funnel
from opgen.pipeline.executors import Stage
from opgen.sandbox.faults import retried_after_harness_failure
from opgen.taskcode.dtypes import DEFAULT_DTYPE

# On CUDA the execute stage measures eager time roughly (host clock, several workers sharing the GPU); it
# rejects only what lies this many times outside the window, and the timing stage applies the window exactly.
EXECUTE_WINDOW_SLACK = 2.0


def _busy(fn, payload: dict) -> dict:
    """`fn(payload)` with its wall seconds in the result as `busy_s` (the build's per-stage busy time)."""
    started = time.perf_counter()
    result = fn(payload)
    result["busy_s"] = time.perf_counter() - started
    return result


def sample_and_screen(payload: dict) -> dict:
    return _busy(_sample_and_screen, payload)


def execute_shard(payload: dict) -> dict:
    return _busy(_execute_shard, payload)


def time_shard(payload: dict) -> dict:
    return _busy(_time_shard, payload)


def _sample_and_screen(payload: dict) -> dict:
    """Sample candidates `start .. start+count-1` (forced `source` if set) and run the static filter chain."""
    from filters.static import static_verdicts
    from opgen.sample.composition import Composition
    from opgen.sample.sampler import sample_records
    from opgen.vocab import cached_vocabulary

    plugins = tuple(payload.get("plugins") or ())
    vocab = cached_vocabulary(plugins) if plugins else None
    composition = Composition(*payload["composition"]) if payload.get("composition") else Composition()
    candidates = sample_records(payload["seed"], payload["start"], payload["count"], payload["profile"],
                                vocab=vocab, mix=payload.get("mix"), source=payload.get("source"),
                                composition=composition, focus=payload.get("focus"),
                                dtype=payload.get("dtype", DEFAULT_DTYPE))
    funnel = Funnel()
    verdicts = static_verdicts(candidates, funnel)
    return {"candidates": candidates, "verdicts": verdicts, "funnel": funnel.to_dict()}


def _execute_shard(payload: dict) -> dict:
    """Sandboxed execution filters (eager, compile, determinism, degenerate output) on a shard's records. The harness
    failing (a pipe to a worker closed under it) is no task's verdict: the shard is judged again in fresh workers,
    and a second failure stops the build as the machine's fault (a resumed build judges the shard then)."""
    from filters.validate import execute_verdicts, forget_kept_pools
    from filters.window import Window

    window = None
    if payload["device"] == "cuda" and payload.get("window_ms"):
        window = Window(*payload["window_ms"]).widened(EXECUTE_WINDOW_SLACK)
    lane, stop = payload.get("lane", 0), payload.get("stop")

    def judged() -> tuple[list[dict] | None, Funnel]:
        funnel = Funnel()
        return execute_verdicts(payload["records"], device=payload["device"], workers=payload["workers"],
                                timeout_s=payload["timeout_s"], memory_mb=payload["memory_mb"], funnel=funnel,
                                seed=payload.get("seed", 0),
                                runtime_window_ms=(window.lo_ms, window.hi_ms) if window else None,
                                reuse_pool=True, lane=lane, lanes=payload.get("lanes", 1), stop=stop), funnel

    outcome = retried_after_harness_failure(judged, reset=lambda: forget_kept_pools(lane),
                                            what=f"the execute workers of lane {lane}", lost="no verdict written",
                                            stopped=lambda: stop is not None and stop.is_set())
    if outcome is None:
        return _stopped()
    verdicts, funnel = outcome
    if verdicts is None:
        return _stopped()
    return {"verdicts": verdicts, "funnel": funnel.to_dict()}


def _stopped() -> dict:
    """The result of a job stopped under way (see `_Lanes.stop`): as if skipped, with nothing of what it did."""
    return {"verdicts": [], "records": [], "funnel": Funnel().to_dict(), "skipped": True, "stopped": True}


def _time_shard(payload: dict) -> dict:
    """Time a shard's records on CUDA and apply the runtime window: timed records and one verdict each, and the
    GPU seconds spent in timed runs (`gpu_s`). With `recheck_only` the records are a shard's timed rows, and only
    the timing guard's suspects are timed again before the window is applied anew."""
    from filters.base import judge
    from filters.window import RuntimeWindow
    from opgen.timing.driver import TimingOptions, time_records

    started = time.perf_counter()
    timed = time_records(payload["records"], TimingOptions(**payload["options"]), timeout_s=payload["timeout_s"],
                         progress=False, reuse_pools=True, workers_per_gpu=payload.get("workers_per_gpu"),
                         stop=payload.get("stop"), lane=payload.get("lane", 0),
                         recheck_only=bool(payload.get("recheck_only")))
    if timed is None:
        return _stopped()
    window = (RuntimeWindow(*payload["window_ms"]),)
    funnel = Funnel()
    verdicts = [judge(record, window, funnel).line(record) for record in timed]
    funnel.add_seconds(RuntimeWindow.name, time.perf_counter() - started)
    return {"records": timed, "verdicts": verdicts, "funnel": funnel.to_dict(),
            "gpu_s": sum(record.get("timed_s") or 0.0 for record in timed)}


SAMPLE = Stage("sample+static", sample_and_screen, num_cpus=1)
# Lanes of two workers: one worker per lane, with the timing stage in four lanes of one, was slower on an H200 with
# 16 cores (29.5 tasks/min after the first task against 44 at n = 300): every process busy, the host's cores
# oversubscribed, every check two to three times slower (docs/benchmarks.md, "GPU build").
EXECUTE = Stage("execute", execute_shard, num_cpus=1, own_workers=True, lane_workers=2)
TIMING = Stage("timing", time_shard, num_cpus=1, num_gpus=1, own_workers=True)


def timing_lanes(timing_workers: int | None, stage: Stage = TIMING) -> tuple[Stage, int | None]:
    """The timing `stage` in one lane per timing worker, each lane one worker (per GPU) timing its shard's tasks one
    after another, and the workers per GPU a job asks for. In one lane of four workers each shard's slowest tasks
    idled the other three: on an H200 the timing workers were busy 49% of the time and timing, not the checks,
    set the pace of a 6,000-task build (32 tasks timed a minute against 70 candidates checked)."""
    if not timing_workers or timing_workers < 2:
        return stage, timing_workers
    return replace(stage, lanes=timing_workers), 1
