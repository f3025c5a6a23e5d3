"""The staged, resumable build: sample → static filters → dedup/decontamination → execute → timing → dataset.

Candidates are drawn in rounds until every data source of the target mix has its quota of survivors.
Every stage output lands in the run folder with a completion marker (see rundir.py), so rerunning the same
build after a crash recomputes only the unmarked work and ends with the same dataset.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pyarrow.parquet as pq

from filters.base import Funnel
from filters.dedup.chains import DEFAULT_MAX_PER_CHAIN
from filters.dedup.decontam import CONTAMINATION_THRESHOLD
from filters.dedup.near import DEDUP_STAGE, dedup_verdicts
from opgen.errors import UsageError
from opgen.jsonl import write_jsonl
from opgen.pipeline import rounds
from opgen.pipeline.executors import LocalExecutor, RayExecutor
from opgen.pipeline.report import funnel_and_rejects, kept_by_key
from opgen.pipeline.rundir import RunDir, write_json
from opgen.pipeline.stages import EXECUTE, SAMPLE, TIMING
from opgen.records import COLUMNS, dataset_table
from opgen.sample.sampler import DEFAULT_MIX

REPO_ROOT = Path(__file__).resolve().parents[2]
OFFLINE_REFERENCE = REPO_ROOT.parent / "shared" / "kernelbench" / "problems.jsonl"
log = logging.getLogger("opgen.build")


@dataclass(frozen=True)
class BuildConfig:
    """Everything that decides the dataset. Executor and worker count are not in it: they change speed only."""

    n: int
    seed: int
    profile: str = "smoke"
    device: str = "cpu"
    reference: str | None = None
    vocab_plugins: tuple[str, ...] = ()
    mix: dict = field(default_factory=lambda: dict(DEFAULT_MIX))
    shard_size: int = 16
    oversample: float = 1.25
    max_rounds: int = 8
    timeout_s: float = 120.0
    memory_mb: int = 4096
    runtime_window_ms: tuple[float, float] = (1.0, 100.0)
    trials: int = 100
    warmups: int = 10
    max_per_chain: int = DEFAULT_MAX_PER_CHAIN

    def __post_init__(self) -> None:
        if self.n < 1:
            raise UsageError(f"--n must be at least 1, got {self.n}")
        if self.device not in ("cpu", "cuda"):
            raise UsageError(f"--device must be cpu or cuda, got {self.device!r}")
        if self.shard_size < 1:
            raise UsageError("--shard-size must be at least 1")
        if self.max_per_chain < 0:
            raise UsageError(f"--max-per-chain must be 0 (no cap) or more, got {self.max_per_chain}")
        for path in self.vocab_plugins:
            if not Path(path).is_file():
                raise UsageError(f"vocabulary plugin not found: {path}")

    def identity(self, reference_hash: str) -> dict:
        """The JSON stored in config.json: the options, plugin contents and the reference corpus hash."""
        data = asdict(self)
        data["vocab_plugins"] = [str(Path(p).resolve()) for p in self.vocab_plugins]
        data["vocab_plugin_sha256"] = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in self.vocab_plugins]
        data["runtime_window_ms"] = list(self.runtime_window_ms)
        data["reference_sha256"] = reference_hash
        return data


@dataclass
class BuildResult:
    """What a finished build produced."""

    run_dir: Path
    tasks: int
    wanted: int
    stats: dict
    funnel: Funnel


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether the Hub answers a TCP connect (saves the datasets client's half-minute of retries offline)."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout_s).close()
        return True
    except OSError:
        return False


def load_reference_index(reference: str | None):
    """The KernelBench index; the Hub default falls back to the offline copy next to the repo when unreachable."""
    from kernels_ref import DEFAULT_REFERENCE, reference_index

    source = reference or DEFAULT_REFERENCE
    if reference is None and OFFLINE_REFERENCE.is_file() and not _hub_reachable():
        log.warning("Hugging Face Hub unreachable; KernelBench from the offline copy %s", OFFLINE_REFERENCE)
        return reference_index(str(OFFLINE_REFERENCE))
    try:
        return reference_index(source)
    except UsageError:
        if reference is None and OFFLINE_REFERENCE.is_file():
            log.warning("KernelBench %s unreachable; using the offline copy %s", source, OFFLINE_REFERENCE)
            return reference_index(str(OFFLINE_REFERENCE))
        raise


class Build:
    """One build over a run folder; `run()` does (or finishes) it."""

    def __init__(self, config: BuildConfig, run_dir: str | Path, executor: LocalExecutor | RayExecutor,
                 progress: bool = True):
        self.config = config
        self.rundir = RunDir(run_dir)
        self.executor = executor
        self.progress = progress
        self.wanted = rounds.quotas(config.n, config.mix)
        self.index = None
        self._dedup_cache: dict[int, dict[int, dict]] = {}

    def _round_shards(self, round_index: int) -> list[int]:
        plan = json.loads((self.rundir.round_dir(round_index) / "plan.json").read_text(encoding="utf-8"))
        return [s["shard"] for s in plan["shards"]]

    # the round loop ------------------------------------------------------------------------------------------
    def run(self) -> BuildResult:
        started = time.perf_counter()
        self.index = load_reference_index(self.config.reference)
        resuming = self.rundir.claim(self.config.identity(self.index.content_hash))
        self.rundir.root.mkdir(parents=True, exist_ok=True)
        self.rundir.open_log()
        log.info("%s build n=%d seed=%d in %s (executor %s)", "resuming" if resuming else "starting",
                 self.config.n, self.config.seed, self.rundir.root, self.executor.name)
        survivors: list[dict] = []
        drawn: Counter = Counter()
        next_shard = next_index = 0
        round_index = 0
        for round_index in range(self.config.max_rounds):
            kept = Counter(r["data_source"] for r in survivors)
            if all(kept[s] >= q for s, q in self.wanted.items()):
                break
            plan = self._plan(round_index, next_shard, next_index, kept, drawn)
            round_survivors, round_drawn = self._run_round(round_index, plan, survivors)
            survivors += round_survivors
            drawn += round_drawn
            next_shard = max(s["shard"] for s in plan["shards"]) + 1
            next_index = max(s["start"] + s["count"] for s in plan["shards"])
        else:
            round_index = self.config.max_rounds
        chosen, surplus = rounds.select(survivors, self.wanted)
        if len(chosen) < self.config.n:
            log.warning("only %d of %d tasks after %d rounds", len(chosen), self.config.n, self.config.max_rounds)
        result = self._finish(chosen, surplus, survivors, drawn, round_index, time.perf_counter() - started)
        log.info("done: %d tasks", result.tasks)
        self.rundir.close_log()
        return result

    def _plan(self, round_index: int, next_shard: int, next_index: int, kept: Counter, drawn: Counter) -> dict:
        folder = self.rundir.round_dir(round_index)
        if (folder / "plan.json").is_file():
            return json.loads((folder / "plan.json").read_text(encoding="utf-8"))
        if round_index == 0:
            segments = rounds.first_round(self.config.n, self.config.oversample)
        else:
            segments = rounds.next_round(next_index, self.wanted, kept, drawn, self.config.oversample,
                                         max_count=max(self.config.n, 4 * self.config.shard_size))
        shards = []
        for segment in segments:
            for start in range(segment.start, segment.start + segment.count, self.config.shard_size):
                count = min(self.config.shard_size, segment.start + segment.count - start)
                shards.append({"shard": next_shard + len(shards), "source": segment.source, "start": start,
                               "count": count})
        plan = {"round": round_index, "shards": shards}
        write_json(folder / "plan.json", plan)
        log.info("round %d: %d candidates in %d shards (%s)", round_index, sum(s["count"] for s in shards),
                 len(shards), ", ".join(f"{s.source or 'mix'}:{s.count}" for s in segments))
        return plan

    def _run_round(self, round_index: int, plan: dict, earlier: list[dict]) -> tuple[list[dict], Counter]:
        folder = self.rundir.round_dir(round_index)
        shards = [s["shard"] for s in plan["shards"]]
        if self.rundir.done(folder, "round") is None:
            self._static(round_index, plan)
            self._dedup(round_index, shards, earlier)
            self._execute(round_index, shards)
            if self.config.device == "cuda":
                self._timing(round_index, shards)
            survivors = self._survivors(round_index, shards)
            self.rundir.write_rows(folder, "survivors", survivors)
            self.rundir.mark(folder, "round", {"survivors": len(survivors)})
        survivors = self.rundir.rows(folder, "survivors")
        drawn = Counter(c["data_source"] for shard in shards
                        for c in self.rundir.rows(self.rundir.shard_dir(shard), "candidates"))
        return survivors, drawn

    # stages --------------------------------------------------------------------------------------------------
    def _stage(self, stage, round_index: int, jobs: list, on_result, done: int) -> None:
        if jobs:
            self.executor.run(stage, jobs, on_result, desc=f"round {round_index} {stage.name}",
                              progress=self.progress, initial=done)

    def _static(self, round_index: int, plan: dict) -> None:
        config = self.config
        plugins = [str(Path(p).resolve()) for p in config.vocab_plugins]
        jobs = [(s["shard"], {"seed": config.seed, "start": s["start"], "count": s["count"],
                              "profile": config.profile, "source": s["source"], "plugins": plugins,
                              "mix": config.mix})
                for s in plan["shards"] if self.rundir.done(self.rundir.shard_dir(s["shard"]), "static") is None]

        def on_result(shard: int, result: dict) -> None:
            folder = self.rundir.shard_dir(shard)
            self.rundir.write_rows(folder, "candidates", result["candidates"])
            self.rundir.write_rows(folder, "static", result["verdicts"])
            self.rundir.mark(folder, "static", {"funnel": result["funnel"], "candidates": len(result["candidates"])})

        self._stage(SAMPLE, round_index, jobs, on_result, len(plan["shards"]) - len(jobs))

    def _static_kept(self, shard: int) -> list[dict]:
        folder = self.rundir.shard_dir(shard)
        verdicts = self.rundir.rows(folder, "static")
        return kept_by_key(self.rundir.rows(folder, "candidates"), verdicts)

    def _dedup(self, round_index: int, shards: list[int], earlier: list[dict]) -> None:
        folder = self.rundir.round_dir(round_index)
        if self.rundir.done(folder, "dedup") is not None:
            return
        started = time.perf_counter()
        records = [c for shard in shards for c in self._static_kept(shard)]
        funnel = Funnel()
        verdicts = dedup_verdicts(records, reference=self.index, existing=earlier, funnel=funnel,
                                  max_per_chain=self.config.max_per_chain)
        funnel.add_seconds(DEDUP_STAGE, time.perf_counter() - started)
        self.rundir.write_rows(folder, "dedup", verdicts)
        self.rundir.mark(folder, "dedup", {"funnel": funnel.to_dict()})

    def _dedup_lines(self, round_index: int, shards: list[int]) -> dict[int, dict]:
        """Dedup verdict per sample index (ids repeat for identical codes; sample indices never do)."""
        return {v["sample_index"]: v for v in self.rundir.rows(self.rundir.round_dir(round_index), "dedup")}

    def _executable(self, round_index: int, shard: int) -> list[dict]:
        """A shard's candidates that passed the static chain and dedup, with their KernelBench neighbour."""
        if round_index not in self._dedup_cache:
            self._dedup_cache[round_index] = self._dedup_lines(round_index, self._round_shards(round_index))
        lines = self._dedup_cache[round_index]
        out = []
        for record in self._static_kept(shard):
            line = lines[record["sample_index"]]
            if line["keep"]:
                out.append({**record, "kb_nearest": line.get("kb_nearest"), "kb_similarity": line.get("kb_similarity")})
        return out

    def _execute(self, round_index: int, shards: list[int]) -> None:
        config = self.config
        todo = [s for s in shards if self.rundir.done(self.rundir.shard_dir(s), "execute") is None]
        jobs = []
        for shard in todo:
            records = self._executable(round_index, shard)
            if not records:
                self._on_execute(shard, {"verdicts": [], "funnel": Funnel().to_dict()})
                continue
            jobs.append((shard, {"records": records, "device": config.device, "timeout_s": config.timeout_s,
                                 "memory_mb": config.memory_mb, "workers": self.executor.job_workers(EXECUTE),
                                 "seed": config.seed, "window_ms": list(config.runtime_window_ms)}))
        self._stage(EXECUTE, round_index, jobs, self._on_execute, len(shards) - len(jobs))

    def _on_execute(self, shard: int, result: dict) -> None:
        folder = self.rundir.shard_dir(shard)
        self.rundir.write_rows(folder, "execute", result["verdicts"])
        self.rundir.mark(folder, "execute", {"funnel": result["funnel"]})

    def _executed(self, round_index: int, shard: int) -> list[dict]:
        verdicts = self.rundir.rows(self.rundir.shard_dir(shard), "execute")
        return kept_by_key(self._executable(round_index, shard), verdicts)

    def _timing(self, round_index: int, shards: list[int]) -> None:
        config = self.config
        todo = [s for s in shards if self.rundir.done(self.rundir.shard_dir(s), "timing") is None]
        jobs = []
        for shard in todo:
            records = self._executed(round_index, shard)
            if not records:
                self._on_timing(shard, {"records": [], "verdicts": [], "funnel": Funnel().to_dict()})
                continue
            jobs.append((shard, {"records": records, "trials": config.trials, "warmups": config.warmups,
                                 "timeout_s": max(600.0, config.timeout_s), "window_ms": list(config.runtime_window_ms),
                                 "seed": config.seed}))
        self._stage(TIMING, round_index, jobs, self._on_timing, len(shards) - len(jobs))

    def _on_timing(self, shard: int, result: dict) -> None:
        folder = self.rundir.shard_dir(shard)
        self.rundir.write_rows(folder, "timed", result["records"])
        self.rundir.write_rows(folder, "timing", result["verdicts"])
        self.rundir.mark(folder, "timing", {"funnel": result["funnel"]})

    def _survivors(self, round_index: int, shards: list[int]) -> list[dict]:
        survivors = []
        for shard in shards:
            if self.config.device == "cuda":
                folder = self.rundir.shard_dir(shard)
                survivors += kept_by_key(self.rundir.rows(folder, "timed"), self.rundir.rows(folder, "timing"))
            else:
                survivors += self._executed(round_index, shard)
        return survivors

    # outputs -------------------------------------------------------------------------------------------------
    def _finish(self, chosen: list[dict], surplus: list[dict], survivors: list[dict], drawn: Counter,
                rounds_run: int, seconds: float) -> BuildResult:
        funnel, rejected = funnel_and_rejects(self.rundir, rounds_run, self.config.device)
        write_jsonl(self.rundir.rejected_path, rejected)
        table = dataset_table(chosen)
        tmp = self.rundir.tasks_path.with_name("tasks.parquet.tmp")
        pq.write_table(table, tmp)
        tmp.replace(self.rundir.tasks_path)
        got = Counter(r["data_source"] for r in chosen)
        stats = {
            "tasks": len(chosen), "wanted": self.config.n, "complete": len(chosen) == self.config.n,
            "candidates": sum(drawn.values()), "survivors": len(survivors), "surplus": len(surplus),
            "rounds": rounds_run, "seed": self.config.seed, "profile": self.config.profile,
            "device": self.config.device, "columns": list(COLUMNS),
            "by_source": {s: {"quota": q, "tasks": got[s], "candidates": drawn[s],
                              "survivors": sum(1 for r in survivors if r["data_source"] == s)}
                          for s, q in self.wanted.items()},
            "rejected": dict(sorted(Counter(r["reason"] for r in rejected).items())),
            "funnel": funnel.to_dict(), "seconds": round(seconds, 3),
            "contamination_threshold": CONTAMINATION_THRESHOLD,
        }
        if self.config.device == "cuda":
            from opgen.timing.driver import timing_summary

            stats["timing"] = timing_summary(chosen, *self.config.runtime_window_ms)
        write_json(self.rundir.stats_path, stats)
        return BuildResult(self.rundir.root, len(chosen), self.config.n, stats, funnel)


def run_build(config: BuildConfig, run_dir: str | Path, executor: LocalExecutor | RayExecutor | None = None,
              progress: bool = True) -> BuildResult:
    """Build (or resume) the dataset of `config` in `run_dir` with `executor` (default: local, 2 workers)."""
    own = executor is None
    executor = executor or LocalExecutor(2)
    try:
        return Build(config, run_dir, executor, progress).run()
    finally:
        if own:
            executor.close()
