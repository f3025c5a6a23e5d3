"""The build's report from its run folder: the merged funnel, one rejected line per rejected candidate, the
dataset file, and stats.json with the throughput figures."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq

from filters.base import Funnel
from filters.dedup.decontam import CONTAMINATION_THRESHOLD
from filters.dedup.near import DEDUP_STAGE
from filters.execute import STAGE_NAMES
from filters.validate import SANDBOX_STAGE, VALIDATION_STAGES
from filters.window import RuntimeWindow
from opgen.jsonl import write_jsonl
from opgen.outcome import outcome
from opgen.pipeline.config import BuildResult
from opgen.pipeline.rundir import RunDir, write_json
from opgen.records import COLUMNS, dataset_table
from opgen.sandbox.pool import is_out_of_memory

SHARD_STAGES = ("static", "execute", "timing")   # per-shard stage files, in pipeline order


def stage_order(device: str) -> list[str]:
    """Funnel stages in pipeline order (static filters, dedup, sandbox and execute checks, the window)."""
    static, execute = VALIDATION_STAGES[:4], VALIDATION_STAGES[4:]
    order = [*static, DEDUP_STAGE, *execute]
    return order + [RuntimeWindow.name] if device == "cuda" else order


def kept_by_key(records: list[dict], verdicts: list[dict]) -> list[dict]:
    """The records whose verdict keeps them, joined on `sample_index` (ids repeat for identical codes)."""
    keep = {v["sample_index"]: v["keep"] for v in verdicts}
    return [r for r in records if keep.get(r["sample_index"])]


def _round_shards(rundir: RunDir, round_index: int) -> list[int]:
    plan = json.loads((rundir.round_dir(round_index) / "plan.json").read_text(encoding="utf-8"))
    return [s["shard"] for s in plan["shards"]]


def funnel_and_rejects(rundir: RunDir, rounds_run: int, device: str,
                       unfinished: bool = False) -> tuple[Funnel, list[dict]]:
    """The funnel merged from every stage marker, and each rejected verdict with its round, shard, stage: of the
    finished rounds, or with `unfinished` of every deduplicated one too (a build under way)."""
    funnel = Funnel(stage_order(device))
    rejected: list[dict] = []
    for round_index in range(rounds_run):
        folder = rundir.round_dir(round_index)
        if rundir.done(folder, "round") is None and not (unfinished and rundir.done(folder, "dedup") is not None):
            break
        funnel += Funnel.from_dict(rundir.done(folder, "dedup")["funnel"])
        shard_of: dict[int, int] = {}
        source_of: dict[int, str] = {}
        lines: list[tuple[str, dict]] = []
        for shard in _round_shards(rundir, round_index):
            shard_folder = rundir.shard_dir(shard)
            for candidate in rundir.rows(shard_folder, "candidates"):
                shard_of[candidate["sample_index"]] = shard
                source_of[candidate["sample_index"]] = candidate["data_source"]
            for stage in SHARD_STAGES:
                marker = rundir.done(shard_folder, stage)
                if marker is not None:
                    funnel += Funnel.from_dict(marker["funnel"])
                    lines += [(stage, v) for v in rundir.rows(shard_folder, stage)]
        lines += [("dedup", v) for v in rundir.rows(folder, "dedup")]
        for stage, verdict in sorted((x for x in lines if not x[1]["keep"]), key=lambda x: x[1]["sample_index"]):
            rejected.append({"id": verdict["id"], "sample_index": verdict["sample_index"],
                             "data_source": source_of[verdict["sample_index"]], "round": round_index,
                             "shard": shard_of[verdict["sample_index"]], "stage": stage, "filter": verdict.get("stage"),
                             "reason": verdict["reason"], "detail": verdict.get("detail"),
                             "duplicate_of": verdict.get("duplicate_of"), "kb_nearest": verdict.get("kb_nearest")})
    return funnel, rejected


TRIAL_BINS = ((10, "10"), (20, "11-20"), (50, "21-50"), (99, "51-99"), (10**9, "100+"))


def trials_histogram(records: list[dict]) -> dict[str, int]:
    """How many timed methods (eager and compile of each task) used how many trials."""
    counts: Counter = Counter()
    for record in records:
        for key in ("eager_ms_count", "compile_ms_count"):
            if record.get(key):
                counts[next(label for limit, label in TRIAL_BINS if record[key] <= limit)] += 1
    return {label: counts[label] for _, label in TRIAL_BINS if counts[label]}


def gpu_count(timing_device: str | None) -> int:
    """The GPUs the timing stage spreads over (1 unless it times on CUDA): the GPU busy share's denominator."""
    if timing_device != "cuda":
        return 1
    from opgen.sandbox.gpus import visible_gpus

    return max(1, len(visible_gpus()))


def steady_rate(first_task: tuple[float, int] | None, tasks: int, elapsed_s: float) -> float | None:
    """Tasks/min from this call's first published task (`(seconds into the call, tasks then)`) to `elapsed_s`:
    pool start-up and the first shard's way through every stage left out, the figure that decides a long
    build's time. None before a second has passed since."""
    if first_task is None or elapsed_s - first_task[0] <= 1:
        return None
    return 60 * (tasks - first_task[1]) / (elapsed_s - first_task[0])


def execute_workers(build) -> int:
    """Sandbox workers of the execute stage: every lane's on the local executor, `--workers` on Ray."""
    from opgen.pipeline.executors import LocalExecutor
    from opgen.pipeline.stages import EXECUTE

    executor = build.executor
    if isinstance(executor, LocalExecutor):
        return executor.lanes(EXECUTE) * executor.job_workers(EXECUTE)
    return executor.workers


def execute_worker_share(funnel: Funnel, workers: int, wall_s: float) -> float | None:
    """The execute workers' time on candidates (checks and the sandbox's own share, every invocation) over their
    time in the build: what lane tails, start-up and waiting for shards leave is the rest."""
    seconds = sum(funnel.stages[name].seconds for name in (SANDBOX_STAGE, *STAGE_NAMES) if name in funnel.stages)
    return round(seconds / (workers * wall_s), 4) if wall_s else None


def seconds_share(rows: list[dict], part_key: str, wall_key: str) -> float | None:
    """Seconds of `part_key` over wall seconds of the sandbox workers' tasks in `rows` (verdict lines or timed
    records). For CPU seconds: near 1, the tasks kept one core busy (above 1: several threads); well below,
    they waited (for the GPU, its lock, or cores that other processes held)."""
    rows = [row for row in rows if row.get(wall_key)]   # a task that failed early has no wall seconds
    wall = sum(row[wall_key] for row in rows)
    return round(sum(row.get(part_key) or 0.0 for row in rows) / wall, 4) if wall else None


def worker_shares(build) -> dict:
    """The execute and timing workers' CPU share over every finished shard (see `seconds_share`), and the share of
    the execute workers' time spent waiting for the GPU's lock."""
    folders = [build.rundir.shard_dir(shard) for state in build.rounds for shard in state.shards]
    executed = [row for folder in folders for row in build.rundir.rows(folder, "execute")]
    timed = [row for folder in folders for row in build.rundir.rows(folder, "timed")]
    return {"execute_cpu_share": seconds_share(executed, "worker_cpu_s", "worker_s"),
            "execute_lock_wait_share": seconds_share(executed, "worker_lock_wait_s", "worker_s"),
            "timing_cpu_share": seconds_share(timed, "timing_cpu_s", "timing_wall_s") if build.timed else None}


def throughput(build, tasks: int, candidates: int, invocation_s: float, funnel: Funnel | None = None) -> dict:
    """Wall time (every invocation), per-stage busy seconds (this invocation), GPU busy share, rates, the
    execute workers' busy share and the workers' CPU shares."""
    wall = build.rundir.wall_seconds() or invocation_s
    gpu_s = sum((build.rundir.done(build.rundir.shard_dir(shard), "timing") or {}).get("gpu_s", 0.0)
                for state in build.rounds for shard in state.shards)
    gpus = gpu_count(build.config.timing_device)
    rate = steady_rate(build.first_task, tasks, invocation_s)
    workers = execute_workers(build)
    steady = {"first_task_s": round(build.first_task[0], 2) if build.first_task else None,
              "steady_tasks_per_min": round(rate, 2) if rate is not None else None}
    return {"wall_s": round(wall, 2), "invocation_s": round(invocation_s, 2),
            "busy_s": {stage: round(seconds, 2) for stage, seconds in build.busy.items()},
            "gpu_timed_s": round(gpu_s, 2), "gpus": gpus,
            "gpu_busy_share": round(gpu_s / (wall * gpus), 4) if build.config.timing_device == "cuda" and wall else None,
            "candidates_per_min": round(60 * candidates / wall, 2) if wall else None,
            "tasks_per_min": round(60 * tasks / wall, 2) if wall else None, **steady,
            "execute_workers": workers,
            "execute_worker_share": execute_worker_share(funnel, workers, wall) if funnel else None,
            **worker_shares(build)}


def out_of_memory_by_stage(rejected: list[dict]) -> dict[str, int]:
    """Rejections for memory (CUDA out of memory, or the pool's resident limit), by build stage: on a GPU that
    many workers share, a neighbour's memory can be the cause rather than the task's own need."""
    return dict(sorted(Counter(r["stage"] for r in rejected if is_out_of_memory(r.get("detail"))).items()))


def shards_marked(build, flag: str) -> int:
    """Shards whose execute or timing marker carries `flag` ("skipped", "stopped")."""
    rundir = build.rundir
    return sum(1 for state in build.rounds for shard in state.shards
               if any((rundir.done(rundir.shard_dir(shard), stage) or {}).get(flag) for stage in ("execute", "timing")))


def skipped_candidates(build) -> int:
    """Candidates of skipped shards left unjudged: the executable ones of a shard skipped at execute, the executed
    survivors of one skipped at timing (so the funnel's kept = survivors + these)."""
    count = 0
    for state in build.rounds:
        for shard in state.shards:
            folder = build.rundir.shard_dir(shard)
            if (build.rundir.done(folder, "execute") or {}).get("skipped"):
                count += len(build._executable(state, shard))
            elif (build.rundir.done(folder, "timing") or {}).get("skipped"):
                count += len(build._executed_in(state, shard))
    return count


def write_outputs(build, chosen: list[dict], surplus: list[dict], survivors: list[dict],
                  invocation_s: float, unfinished: bool = False) -> BuildResult:
    """tasks.parquet, rejected.jsonl and stats.json of a finished build (or, `unfinished`, of one under way: its
    funnel and rejections then count the rounds not yet finished too)."""
    rundir, config = build.rundir, build.config
    funnel, rejected = funnel_and_rejects(rundir, len(build.rounds), "cuda" if build.timed else config.device,
                                          unfinished)
    write_jsonl(rundir.rejected_path, rejected)
    tmp = rundir.tasks_path.with_name("tasks.parquet.tmp")
    pq.write_table(dataset_table(chosen), tmp)
    tmp.replace(rundir.tasks_path)
    got = Counter(r["data_source"] for r in chosen)
    drawn = build._drawn()
    stats = {
        # what became of every candidate (opgen/outcome.py): the summaries' words, adding up
        "outcome": outcome(sum(drawn.values()), len(rejected), len(survivors), len(chosen)),
        "tasks": len(chosen), "wanted": config.n, "complete": len(chosen) == config.n,
        "candidates": sum(drawn.values()), "survivors": len(survivors), "surplus": len(surplus),
        "rounds": len(build.rounds), "seed": config.seed, "profile": config.profile,
        "device": config.device, "columns": list(COLUMNS),
        "by_source": {s: {"quota": q, "tasks": got[s], "candidates": drawn[s],
                          "survivors": sum(1 for r in survivors if r["data_source"] == s)}
                      for s, q in build.wanted.items()},
        "rejected": dict(sorted(Counter(r["reason"] for r in rejected).items())),
        "out_of_memory": out_of_memory_by_stage(rejected),
        "funnel": funnel.to_dict(), "seconds": round(invocation_s, 3),
        "contamination_threshold": CONTAMINATION_THRESHOLD,
        # shards not executed or not timed because their source's quota was already met by earlier shards
        "skipped_shards": shards_marked(build, "skipped"),
        # their candidates that no later stage judged: the funnel counts them kept, yet they are not survivors
        "skipped_candidates": skipped_candidates(build),
        # of those shards, the ones whose job had started: asked to stop, it ended once its tasks under way were done
        "stopped_shards": shards_marked(build, "stopped"),
        "throughput": throughput(build, len(chosen), sum(drawn.values()), invocation_s, funnel),
    }
    if build.focus:
        from opgen.pipeline.focus import focus_stats

        stats["focus"] = focus_stats(build, chosen, survivors)
    if build.timed:
        from opgen.timing.driver import timing_summary

        stats["timing"] = {**timing_summary(chosen, *config.runtime_window_ms),
                           "trials_histogram": trials_histogram(chosen)}
    write_json(rundir.stats_path, stats)
    return BuildResult(rundir.root, len(chosen), config.n, stats, funnel)
