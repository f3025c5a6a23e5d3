"""The staged, resumable, streaming build: sample → static filters → dedup/decontamination → execute → timing.

Candidates are drawn in rounds until every data source of the target mix has its quota of survivors. Within
the build, stages stream: a shard goes to timing as soon as its execute checks are done, and the next round
is planned (and validated) while the previous one's tail is still timing. Plans depend only on finished,
deterministic facts (see `_expected_kept`), so the dataset does not depend on how fast anything ran.
Every stage output lands in the run folder with a completion marker (see rundir.py), written by this
driver as jobs finish, so rerunning the same build after a crash recomputes only the unmarked work.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm import tqdm

from filters.base import Funnel
from filters.dedup.near import DEDUP_STAGE, dedup_verdicts
from kernels_ref import resolve_reference
from opgen.errors import MachineFault, UsageError
from opgen.pipeline import rounds
from opgen.pipeline.config import BuildConfig, BuildResult, load_reference_index
from opgen.pipeline.executors import LocalExecutor, RayExecutor, run_jobs
from opgen.pipeline.focus import prepare_focus, stop_if_focus_fails
from opgen.pipeline.gpu_model import require_recorded_gpu_model
from opgen.pipeline.quiet_pass import enabled as quiet_pass_enabled
from opgen.pipeline.quiet_pass import pass_workers, quiet_pass
from opgen.pipeline.report import gpu_count, kept_by_key, steady_rate, write_outputs
from opgen.pipeline.rundir import RunDir, write_json
from opgen.pipeline.stages import EXECUTE, SAMPLE, TIMING, timing_lanes
from opgen.pipeline.state import read_state, restore_state, snapshot_state, write_state
from opgen.records import EXECUTE_COLUMNS
from opgen.sandbox.faults import ErrorRun
from opgen.sandbox.gpu_memory import release_share
from opgen.sandbox.gpus import SHARED_SLOTS_ENV, shared_slots, visible_gpu_models
from opgen.timing.driver import TimingOptions, recheck_reason, start_kept_pools, time_records
from opgen.timing.guard import suspicions

__all__ = ["Build", "BuildConfig", "BuildResult", "run_build"]
log = logging.getLogger("opgen.build")
# --save-state: seconds at least between two saves after a marker (and at least 1 / STATE_SAVE_SHARE times the last
# save's own time, so saving never takes more than that share of the build; the environment variable set to 0 saves
# after every marker); a save also ends every call
STATE_INTERVAL_ENV = "OPGEN_STATE_INTERVAL_S"
STATE_INTERVAL_S = 60.0
STATE_SAVE_SHARE = 0.1
RECHECK = "recheck"   # the pending jobs that repair a shard timed before (`Build._plan_rechecks`)


@dataclass
class RoundState:
    """One round's shards and which of them have finished each stage."""

    index: int
    shards: list[int]
    sources: dict[int, str | None] = field(default_factory=dict)   # shard -> the source it draws (None: the mix)
    executed: set[int] = field(default_factory=set)
    timed: set[int] = field(default_factory=set)
    timing_sent: set[int] = field(default_factory=set)
    complete: bool = False

    @classmethod
    def of_plan(cls, plan: dict) -> RoundState:
        """A round's state, nothing finished yet, from its plan.json."""
        return cls(plan["round"], [s["shard"] for s in plan["shards"]], {s["shard"]: s["source"] for s in plan["shards"]})


class Build:
    """One build over a run folder; `run()` does (or finishes) it. `stream=False` is the old mode, kept for
    comparison, scheduled as the build was before streaming: the stages of a round run one after
    another, execute jobs one shard at a time on all the workers (one lane), every shard runs to the end (none is
    skipped or stopped when its survivors could only be surplus), and a top-up round starts once the previous one
    is timed. It changes speed, never the dataset."""

    def __init__(self, config: BuildConfig, run_dir: str | Path, executor: LocalExecutor | RayExecutor,
                 progress: bool = True, stream: bool = True, timing_workers: int | None = None,
                 save_state: str | Path | None = None, resume_from: str | Path | None = None,
                 sizing_note: str = ""):
        self.sizing_note = sizing_note          # how the command sized its workers to the machine, for the log
        self.focus: tuple[str, ...] = ()    # the operators every candidate holds one of (`--focus`)
        if config.focus:
            config, self.focus = prepare_focus(config)
        self.config = config
        self.rundir = RunDir(run_dir)
        self.save_path = Path(save_state) if save_state else None
        self.resume_from = Path(resume_from) if resume_from else None
        self.saved_at = 0.0                     # perf_counter of the last state save
        self.save_s = 0.0                       # how long it took
        self.saving: threading.Thread | None = None   # a save being compressed beside the build
        self.state_files: dict[str, tuple[bytes, int, tuple]] = {}   # run-folder files a save has read (snapshot_state)
        self.faults = ErrorRun()                # machine faults: runs of identical errors across shards
        self.executor = executor
        self.progress = progress
        self.stream = stream
        self.timing, self.timing_job_workers = timing_lanes(timing_workers, TIMING)
        self.wanted = rounds.quotas(config.n, config.mix)
        self.prior = rounds.load_prior(config.profile, config.device)
        self.timed = config.timing_device is not None
        # the old mode runs its execute jobs in one lane of all the workers, as before lanes
        self.execute = EXECUTE if stream else replace(EXECUTE, lane_workers=0)
        self.index = None
        self.rounds: list[RoundState] = []
        self.pending: dict[Future, tuple[str, int, int]] = {}   # future -> (stage, round, shard)
        self.busy: Counter = Counter()                          # seconds each stage's jobs ran, this invocation
        self.gpu_s = 0.0                                        # timed GPU seconds, this invocation
        self.gpus: int | None = None                            # GPUs they spread over (see report.gpu_count)
        self.survivor_counts: dict[int, int] = {}               # shard -> survivors, once it is finished
        self.skipping = False
        self.bar: tqdm | None = None
        self.started = time.perf_counter()
        self.first_task: tuple[float, int] | None = None         # (s into this call, tasks) when tasks first showed
        self.shard_timed_now = False                            # a timing job of this call has come back
        self.timing_sent_at: dict[int, float] = {}              # shard -> perf_counter when its timing job went
        self.first_timing_logged = False                        # the first timed shard's line is in the log
        self.rechecks: dict[int, tuple[dict, dict]] = {}        # shard -> (payload, marker): repairs not yet sent
        self.recheck_markers: dict[int, dict] = {}              # shard -> its timing marker: repairs under way
        self.recheck_tally: Counter = Counter()                 # shards, rows changed, harness failures repaired
        self.recheck_started = 0.0                              # perf_counter when the repairs were sent

    # the loop ------------------------------------------------------------------------------------------------
    def run(self) -> BuildResult:
        started = self.started = time.perf_counter()
        restoring = self._state_to_restore()
        self.index = load_reference_index(self.config.reference)
        identity = self.config.identity(self.index.content_hash)
        restored = restore_state(self.resume_from, self.rundir, identity) if restoring else None
        resuming = self.rundir.claim(identity)
        if self.config.timing_device == "cuda":
            require_recorded_gpu_model(self.rundir, visible_gpu_models())
        self.rundir.open_log()
        log.info("KernelBench: %s", resolve_reference(self.config.reference))
        if restored is not None:
            log.info("restored %d finished stages from %s", restored, self.resume_from)
        if self.config.timing_device == "cuda" and quiet_pass_enabled():
            self._quiet_pass()   # first, while nothing else runs
            self._plan_rechecks()
        self.rundir.start_clock()
        if self.save_path is not None:
            self.rundir.on_mark = self._save_state_now_and_then
        lanes = self.executor.lanes(self.execute) if isinstance(self.executor, LocalExecutor) else None
        timing_lane_count = self.executor.lanes(self.timing) if lanes and self.timed else None
        # set up while the first shard is checked, not after; not for a build that already wrote its dataset, which
        # has nothing left to time (should it time a shard after all, the pools start then)
        if timing_lane_count and self.stream and not self.rundir.tasks_path.is_file():
            start_kept_pools(self.config.timing_device, timeout_s=self._timing_timeout_s(), lanes=timing_lane_count,
                             workers_per_gpu=self.timing_job_workers)
        log.info("%s build n=%d seed=%d in %s (executor %s, %s%s%s)", "resuming" if resuming else "starting",
                 self.config.n, self.config.seed, self.rundir.root, self.executor.name,
                 "streaming" if self.stream else "stage by stage",
                 f", {lanes} execute lane(s) of {self.executor.job_workers(self.execute)} workers" if lanes else "",
                 f", {timing_lane_count} timing lane(s)" if timing_lane_count else "")
        if self.sizing_note:
            log.info("%s", self.sizing_note)
        if self.config.timing_device == "cuda" and shared_slots():
            log.info("GPU lock: at most %d shared holders at once (%s)", shared_slots(), SHARED_SLOTS_ENV)
        self.bar = tqdm(total=self.config.n, desc="tasks", unit="task", file=sys.stderr, disable=not self.progress,
                        dynamic_ncols=True, position=0)
        try:
            self._rounds()
            self._drain(lambda: not self.pending)
            if self.config.timing_device == "cuda" and quiet_pass_enabled():
                self._quiet_pass()   # the rows this call timed, now that nothing else runs
        except MachineFault as fault:
            log.error("stopped: machine fault: %s (the candidates in flight have no verdict: a resumed build judges "
                      "them)", fault)
            raise
        finally:
            self.bar.close()
            for future in self.pending:
                if not future.cancel():
                    self.executor.stop(future)   # its result is not wanted: a rerun does the shard again
            self._save_state()
        survivors = [r for state in self.rounds for r in self._survivors(state)]
        chosen, surplus = rounds.select(survivors, self.wanted)
        if len(chosen) < self.config.n:
            log.warning("only %d of %d tasks after %d rounds", len(chosen), self.config.n, len(self.rounds))
        result = write_outputs(self, chosen, surplus, survivors, time.perf_counter() - started)
        if result.stats["out_of_memory"]:
            log.warning("%d candidates were rejected for running out of GPU memory (by stage: %s); beside fewer "
                        "--workers some of them would fit", sum(result.stats["out_of_memory"].values()),
                        json.dumps(result.stats["out_of_memory"]))
        log.info("done: %d tasks; %s", result.tasks, json.dumps(result.stats["throughput"]))
        self.rundir.close_log()
        return result

    def read_back(self) -> list[dict]:
        """The rounds as far as the run folder has them, their finished stages from its markers, submitting nothing;
        the survivors so far: what a preview of a build under way reads (`opgen.pipeline.preview`)."""
        round_index = 0
        while (self.rundir.round_dir(round_index) / "plan.json").is_file():
            state = RoundState.of_plan(self._plan(round_index, {}))
            for shard in state.shards:
                folder = self.rundir.shard_dir(shard)
                if self.rundir.done(folder, "execute") is not None:
                    state.executed.add(shard)
                if self.rundir.done(folder, "timing") is not None:
                    state.timed.add(shard)
            state.complete = self.rundir.done(self.rundir.round_dir(round_index), "round") is not None
            self.rounds.append(state)
            round_index += 1
        return [record for state in self.rounds for record in self._survivors(state)]

    # the state archive (state.py) ------------------------------------------------------------------------------
    def _state_to_restore(self) -> bool:
        """Whether --resume-from names a state to restore, checked (whole, same opgen version) before any work. A
        missing file is refused, unless it is also the --save-state file: the same command run again and again
        (on machines that keep nothing) starts afresh the first time."""
        if self.resume_from is None:
            return False
        if not self.resume_from.is_file():
            if self.save_path is not None and self.save_path.resolve() == self.resume_from.resolve():
                return False
            raise UsageError(f"--resume-from {self.resume_from}: no such build state")
        from opgen.pipeline.state import check_version

        header, _ = read_state(self.resume_from)
        check_version(header, self.resume_from)
        return True

    def _quiet_pass(self) -> None:
        """The published rows whose time follows the host's, timed again with nothing else running (quiet_pass.py);
        the state saved after each chunk."""
        options = TimingOptions(**self.config.timing_options())

        def time_alone(rows: list[dict]) -> list[dict] | None:
            return time_records(rows, options, timeout_s=self._timing_timeout_s(), progress=False,
                                workers_per_gpu=pass_workers(), alone=True)

        quiet_pass(self.rundir, time_alone, after_chunk=self._save_state)

    def _plan_rechecks(self) -> None:
        """Repairs of shards timed before: a row whose timing is no verdict of the task's (`recheck_reason`: a pool's
        pipe closed under it, or the other workers' tasks held the GPU memory it needed) is timed again, and on CUDA a
        row the timing guard suspects now and never timed again (taken before a guard rule existed) is timed again
        with the host quiet; the shard's window verdicts, funnel and marker are written anew (`_on_recheck`), once
        per row (rechecked rows say so). A row timed before its record kept the checks' GPU memory peak gets it from
        the shard's execute verdicts: what a try again for memory waits for. They are sent once this
        call has timed a shard of its own (`_send_rechecks`): 39 shards' repairs took 131 s on an H100, which the
        first new task no longer waits for. Until a shard's repair is in, its round neither completes nor counts as
        finished when shards are skipped, and no round is planned: the dataset is the same as with the repairs first."""
        for folder, marker, rows in shards_to_repair(self.rundir):
            self.rechecks[int(folder.name)] = (
                {"records": self._with_checks_peak(folder, rows), "options": self.config.timing_options(),
                 "recheck_only": True,
                 "timeout_s": self._timing_timeout_s(), "window_ms": list(self.config.runtime_window_ms),
                 "workers_per_gpu": self.timing_job_workers}, marker)
        if self.rechecks:
            log.info("timing guard over earlier shards: %d shard(s) hold rows to time again, after this call's first "
                     "timed shard", len(self.rechecks))

    def _with_checks_peak(self, folder: Path, rows: list[dict]) -> list[dict]:
        """`rows` with the execute checks' GPU memory peak (`gpu_peak_mb`) from the shard's verdicts where they lack
        it (rows timed before their records carried it)."""
        peaks = {line["sample_index"]: line.get("gpu_peak_mb") for line in self.rundir.rows(folder, "execute")}
        return [row if row.get("gpu_peak_mb") is not None or peaks.get(row["sample_index"]) is None
                else {**row, "gpu_peak_mb": peaks[row["sample_index"]]} for row in rows]

    @property
    def rechecking(self) -> set[int]:
        """Shards whose repair is not in yet: unsent or under way."""
        return set(self.rechecks) | set(self.recheck_markers)

    def _send_rechecks(self) -> None:
        """Send the planned repairs to the timing lanes once a timing job of this call has come back, or when no
        execute job is left to feed those lanes."""
        if not self.rechecks or not (self.shard_timed_now or all(stage != EXECUTE.name
                                                                 for stage, _, _ in self.pending.values())):
            return
        self.recheck_started = time.perf_counter()
        for shard, (payload, marker) in sorted(self.rechecks.items()):
            self.pending[self.executor.submit(self.timing, payload)] = (RECHECK, -1, shard)
            self.recheck_markers[shard] = marker
        self.rechecks.clear()

    def _on_recheck(self, shard: int, result: dict) -> None:
        marker = self.recheck_markers.pop(shard)
        if result.get("stopped"):   # the build is ending: a later call repairs the shard
            return
        folder = self.rundir.shard_dir(shard)
        before = {row["sample_index"]: row for row in self.rundir.rows(folder, "timed")}
        self.recheck_tally["rows"] += sum(1 for row in result["records"]
                                          if row.get("eager_ms") != before[row["sample_index"]].get("eager_ms"))
        self.recheck_tally["failed"] += sum(1 for row in before.values() if recheck_reason(row))
        self.rundir.write_rows(folder, "timed", result["records"])
        self.rundir.write_rows(folder, "timing", result["verdicts"])
        self.rundir.mark(folder, "timing", {**marker, "funnel": result["funnel"]})
        self.survivor_counts.pop(shard, None)
        for state in self.rounds:   # a round finished before: its survivors as the repair leaves them
            if shard in state.shards and state.complete:
                self._close_round(state)
        self.recheck_tally["shards"] += 1
        if not self.rechecking:
            log.info("timing guard over earlier shards: %d shard(s) held suspect rows or %d whose timing failed in "
                     "the harness or ran short of GPU memory, %d row(s) got a new median, %.1f s",
                     self.recheck_tally["shards"], self.recheck_tally["failed"], self.recheck_tally["rows"],
                     time.perf_counter() - self.recheck_started)
        self._count_published()

    def _save_state_now_and_then(self) -> None:
        """After a marker: save the state once STATE_INTERVAL_S (or ten times the last save's time) has passed,
        compressing it beside the build (the driver only reads the files); with the interval 0, after every marker,
        in the driver."""
        interval = float(os.environ.get(STATE_INTERVAL_ENV, STATE_INTERVAL_S))   # 0: after every marker
        if self.saving is not None and self.saving.is_alive():
            return
        if time.perf_counter() - self.saved_at >= (interval and max(interval, self.save_s / STATE_SAVE_SHARE)):
            self._save_state(background=interval > 0)

    def _save_state(self, background: bool = False) -> None:
        """Save the state to --save-state: read the run folder's files here, and compress and write them here or
        (`background`) in a thread, so a save of a large build (5-11 s for 20,000 candidates on an H200's host)
        no longer holds up the driver. A foreground save waits for a background one first."""
        if self.save_path is None or not self.rundir.config_path.is_file():
            return
        if self.saving is not None:
            self.saving.join()
        started = time.perf_counter()
        snapshot = snapshot_state(self.rundir.root, self.state_files)
        read_s = time.perf_counter() - started

        def write() -> None:
            summary = write_state(snapshot, self.save_path)
            self.saved_at, self.save_s = time.perf_counter(), time.perf_counter() - started
            log.info("state saved to %s: %d bytes in %d file(s), %d markers, %.2f s%s", self.save_path,
                     summary["bytes"], summary["parts"], summary["markers"], self.save_s,
                     f" (compressed beside the build; {read_s:.2f} s in the driver)" if background else "")

        if background:
            self.saved_at = time.perf_counter()   # no second save starts while this one is under way
            self.saving = threading.Thread(target=write, name="opgen-state-save", daemon=True)
            self.saving.start()
        else:
            self.saving = None
            write()

    def _rounds(self) -> None:
        for round_index in range(self.config.max_rounds):
            kept: dict[str, float] = {}
            if round_index > 0:
                # plan only from finished facts: round r-1 executed, rounds up to r-2 timed (the old mode also
                # waits for round r-1's timing, so that no two stages ever run at once; the plan is the same)
                last = self.rounds[-1]
                if self.stream:
                    self._drain(lambda last=last: self._executed(last) and all(s.complete for s in self.rounds[:-1]))
                else:
                    self._drain(lambda: all(s.complete for s in self.rounds))
                kept = self._expected_kept()
                if self._met(kept):
                    self._drain(lambda: not self.pending)
                    kept = dict(self._final_kept())
                    if self._met(kept):
                        return
                if self.focus:
                    stop_if_focus_fails(self)
            plan = self._plan(round_index, kept)
            state = RoundState.of_plan(plan)
            self.rounds.append(state)
            if self.rundir.done(self.rundir.round_dir(round_index), "round") is not None:
                state.complete = True
                state.executed = state.timed = set(state.shards)
                self._count_published()
                continue
            self._static(round_index, plan)
            self._dedup(state)
            self._submit_work(state)
        log.warning("stopped after --max-rounds %d rounds", self.config.max_rounds)

    def _drain(self, until: Callable[[], bool]) -> None:
        """Handle finished jobs (in this thread: only the driver writes the run folder) until `until()`."""
        while True:
            for state in self.rounds:
                self._complete_if_done(state)
            if until() and not self.rechecking:
                return
            self._send_rechecks()
            if not self.pending:
                raise RuntimeError("build stalled: waiting with no job in flight")
            finished, _ = wait(list(self.pending), return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: self.pending[f]):
                stage, round_index, shard = self.pending.pop(future)
                result = future.result()
                if stage == RECHECK:
                    self._on_recheck(shard, result)
                    continue
                self.busy[stage] += result.get("busy_s", 0.0)
                state = self.rounds[round_index]
                if stage == EXECUTE.name:
                    self._on_execute(state, shard, result)
                else:
                    self.shard_timed_now = True
                    self._on_timing(state, shard, result)

    # planning ------------------------------------------------------------------------------------------------
    def _met(self, kept: dict[str, float]) -> bool:
        return all(kept.get(source, 0) >= quota for source, quota in self.wanted.items())

    def _final_kept(self) -> Counter:
        return Counter(r["data_source"] for state in self.rounds for r in self._survivors(state))

    def _expected_kept(self) -> dict[str, float]:
        """Survivors per source of the rounds so far: counted for every round but the last, and for the last
        its executed survivors times the window's expected share (prior, updated by the counted rounds)."""
        *counted, last = self.rounds
        kept: Counter = Counter()
        timed_in, timed_out = 0, 0
        for state in counted:
            survivors = self._survivors(state)
            kept.update(r["data_source"] for r in survivors)
            if self.timed:
                executed = len(self._executed_survivors(state))
                timed_in, timed_out = timed_in + len(survivors), timed_out + executed - len(survivors)
        share = 1.0
        if self.timed:
            alpha = self.prior.strength * self.prior.window + timed_in
            share = alpha / (self.prior.strength + timed_in + timed_out)
        expected: dict[str, float] = dict(kept)
        for record in self._executed_survivors(last):
            expected[record["data_source"]] = expected.get(record["data_source"], 0) + share
        return expected

    def _drawn(self) -> Counter:
        return Counter(c["data_source"] for state in self.rounds for shard in state.shards
                       for c in self.rundir.rows(self.rundir.shard_dir(shard), "candidates"))

    def _plan(self, round_index: int, kept: dict[str, float]) -> dict:
        """The round's shards: read back, or drawn for the deficit left by `kept` (expected survivors)."""
        folder = self.rundir.round_dir(round_index)
        if (folder / "plan.json").is_file():
            return json.loads((folder / "plan.json").read_text(encoding="utf-8"))
        config = self.config
        next_shard = next_index = 0
        if self.rounds:
            last = json.loads((self.rundir.round_dir(round_index - 1) / "plan.json").read_text(encoding="utf-8"))
            next_shard = max(s["shard"] for s in last["shards"]) + 1
            next_index = max(s["start"] + s["count"] for s in last["shards"])
        if round_index == 0 and config.planning == "rounds":
            segments = rounds.first_round(config.n, config.oversample)
        elif round_index == 0:
            segments = rounds.next_round(0, self.wanted, {}, Counter(), config.oversample,
                                         max_count=10 * config.n + 100, prior=self.prior)
        else:
            prior = self.prior if config.planning == "survival" else None
            segments = rounds.next_round(next_index, self.wanted, kept, self._drawn(),
                                         config.oversample, max_count=max(config.n, 4 * config.shard_size),
                                         prior=prior)
        shards = []
        for segment in segments:
            for start in range(segment.start, segment.start + segment.count, config.shard_size):
                count = min(config.shard_size, segment.start + segment.count - start)
                shards.append({"shard": next_shard + len(shards), "source": segment.source, "start": start,
                               "count": count})
        plan = {"round": round_index, "shards": shards}
        write_json(folder / "plan.json", plan)
        log.info("round %d: %d candidates in %d shards (%s)", round_index, sum(s["count"] for s in shards),
                 len(shards), ", ".join(f"{s.source or 'mix'}:{s.count}" for s in segments))
        return plan

    # stages --------------------------------------------------------------------------------------------------
    def _static(self, round_index: int, plan: dict) -> None:
        config = self.config
        plugins = [str(Path(p).resolve()) for p in config.vocab_plugins]
        rule = config.composition_rule()
        composition = [rule.mode, rule.weight, str(Path(rule.prior_path).resolve()) if rule.prior_path else None]
        jobs = [(s["shard"], {"seed": config.seed, "start": s["start"], "count": s["count"],
                              "profile": config.profile, "source": s["source"], "plugins": plugins,
                              "mix": config.mix, "composition": composition,
                              "focus": list(self.focus) or None, "dtype": config.dtype})
                for s in plan["shards"] if self.rundir.done(self.rundir.shard_dir(s["shard"]), "static") is None]

        def on_result(shard: int, result: dict) -> None:
            self.busy[SAMPLE.name] += result.get("busy_s", 0.0)
            folder = self.rundir.shard_dir(shard)
            self.rundir.write_rows(folder, "candidates", result["candidates"])
            self.rundir.write_rows(folder, "static", result["verdicts"])
            self.rundir.mark(folder, "static", {"funnel": result["funnel"], "candidates": len(result["candidates"])})

        if jobs:
            run_jobs(self.executor, SAMPLE, jobs, on_result, desc=f"round {round_index} {SAMPLE.name}",
                     progress=self.progress, initial=len(plan["shards"]) - len(jobs))

    def _static_kept(self, shard: int) -> list[dict]:
        folder = self.rundir.shard_dir(shard)
        return kept_by_key(self.rundir.rows(folder, "candidates"), self.rundir.rows(folder, "static"))

    def _dedup(self, state: RoundState) -> None:
        """Dedup and decontamination of the round; earlier rounds' executed survivors always survive."""
        folder = self.rundir.round_dir(state.index)
        if self.rundir.done(folder, "dedup") is not None:
            return
        started = time.perf_counter()
        records = [c for shard in state.shards for c in self._static_kept(shard)]
        earlier = [r for s in self.rounds[:-1] for r in self._executed_survivors(s)]
        funnel = Funnel()
        verdicts = dedup_verdicts(records, reference=self.index, existing=earlier, funnel=funnel,
                                  max_per_chain=self.config.max_per_chain)
        funnel.add_seconds(DEDUP_STAGE, time.perf_counter() - started)
        self.busy[DEDUP_STAGE] += time.perf_counter() - started
        self.rundir.write_rows(folder, "dedup", verdicts)
        self.rundir.mark(folder, "dedup", {"funnel": funnel.to_dict()})

    def _executable(self, state: RoundState, shard: int) -> list[dict]:
        """A shard's candidates that passed the static chain and dedup, with their KernelBench neighbour."""
        lines = {v["sample_index"]: v for v in self.rundir.rows(self.rundir.round_dir(state.index), "dedup")}
        return [{**record, "kb_nearest": lines[record["sample_index"]].get("kb_nearest"),
                 "kb_similarity": lines[record["sample_index"]].get("kb_similarity")}
                for record in self._static_kept(shard) if lines[record["sample_index"]]["keep"]]

    def _submit_work(self, state: RoundState) -> None:
        """Execute jobs for the round's unexecuted shards, every source's needed shards before any source's
        margin (`rounds.execution_order`); timing jobs for those executed but not timed."""
        config = self.config
        for shard in rounds.execution_order([(shard, state.sources.get(shard)) for shard in state.shards]):
            folder = self.rundir.shard_dir(shard)
            if self.rundir.done(folder, "execute") is not None:
                state.executed.add(shard)
                continue
            records = self._executable(state, shard)
            if not records:
                self._on_execute(state, shard, {"verdicts": [], "funnel": Funnel().to_dict()})
                continue
            payload = {"records": records, "device": config.device, "timeout_s": config.timeout_s,
                       "memory_mb": config.memory_mb, "workers": self.executor.job_workers(self.execute),
                       "seed": config.seed, "window_ms": list(config.runtime_window_ms)}
            self.pending[self.executor.submit(self.execute, payload)] = (EXECUTE.name, state.index, shard)
        self._send_timing(state)

    def _send_timing(self, state: RoundState) -> None:
        """Timing jobs for executed shards not yet timed: each one as soon as it is executed (streaming), or
        all of the round's once every shard is executed."""
        if not self.timed or not (self.stream or self._executed(state)):
            return
        to_time = []
        for shard in sorted(state.executed - state.timing_sent):
            state.timing_sent.add(shard)
            folder = self.rundir.shard_dir(shard)
            if self.rundir.done(folder, "timing") is not None:
                state.timed.add(shard)
                continue
            records = self._executed_in(state, shard)
            if not records:
                self._on_timing(state, shard, {"records": [], "verdicts": [], "funnel": Funnel().to_dict()})
                continue
            to_time.append((shard, records))
        # several at once (a resumed call's backlog): the lightest first, by the checks' rough eager medians, so the
        # first task is not held up behind the heaviest (a one-row shard of a 126 ms RNN came back 1.0 min into a
        # call: docs/benchmarks.md, run 11)
        for shard, records in lightest_first(to_time):
            payload = {"records": records, "options": self.config.timing_options(),
                       "timeout_s": self._timing_timeout_s(), "window_ms": list(self.config.runtime_window_ms),
                       "workers_per_gpu": self.timing_job_workers}
            self.timing_sent_at[shard] = time.perf_counter()
            self.pending[self.executor.submit(self.timing, payload)] = (TIMING.name, state.index, shard)

    def _timing_timeout_s(self) -> float:
        return max(600.0, self.config.timeout_s)

    def _on_execute(self, state: RoundState, shard: int, result: dict) -> None:
        folder = self.rundir.shard_dir(shard)
        if result["verdicts"]:   # a run of identical machine errors over shards: stop before writing a verdict
            self.faults.check(result["verdicts"], self._executable(state, shard))
        self.rundir.write_rows(folder, "execute", result["verdicts"])
        self.rundir.mark(folder, "execute", {"funnel": result["funnel"], "skipped": bool(result.get("skipped")),
                                             "stopped": bool(result.get("stopped"))})
        state.executed.add(shard)
        if not self.timed:
            self._count_published()
            self._skip_unneeded()
        self._send_timing(state)

    def _on_timing(self, state: RoundState, shard: int, result: dict) -> None:
        folder = self.rundir.shard_dir(shard)
        self.rundir.write_rows(folder, "timed", result["records"])
        self.rundir.write_rows(folder, "timing", result["verdicts"])
        self.rundir.mark(folder, "timing", {"funnel": result["funnel"], "gpu_s": result.get("gpu_s", 0.0),
                                            "skipped": bool(result.get("skipped")), "stopped": bool(result.get("stopped"))})
        state.timed.add(shard)
        if result["records"] and self.timing_sent_at and not self.first_timing_logged:
            self.first_timing_logged = True
            self._log_first_timing(shard, result["records"])
        self._count_published()
        self.gpu_s += result.get("gpu_s", 0.0)
        if self.gpus is None:
            self.gpus = gpu_count(self.config.timing_device)
        elapsed = time.perf_counter() - self.started
        published = self._published()
        log.info("shard %d timed: %d of %d tasks, %.1f min into this call, %.1f tasks/min since the first, "
                 "GPU busy share %.2f", shard, published, self.config.n, elapsed / 60,
                 steady_rate(self.first_task, published, elapsed) or 0.0, self.gpu_s / max(elapsed, 1e-9) / self.gpus)
        self._skip_unneeded()

    def _log_first_timing(self, shard: int, records: list[dict]) -> None:
        """Where the time to the call's first task went: when the shard's timing job was sent, how long it was out,
        and what its rows took in their timing workers; the rest is the workers' start-up, the lane's queue, a try
        that ran short of GPU memory and the wait before the next (`memory_wait_s`, said for the slowest row)."""
        sent = self.timing_sent_at.get(shard)
        if sent is None:
            return
        walls = [row.get("timing_wall_s") or 0.0 for row in records]
        slowest = records[walls.index(max(walls))]
        log.info("first timed shard %d: sent %.1f s into this call, back %.1f s later; its %d row(s) %.1f s in "
                 "their timing workers (the longest %.1f s, after %.1f s waiting for GPU memory to try again)",
                 shard, sent - self.started, time.perf_counter() - sent, len(records), sum(walls), max(walls),
                 slowest.get("memory_wait_s") or 0.0)

    # shards that cannot add to the dataset ---------------------------------------------------------------------
    def _done_shard(self, state: RoundState, shard: int) -> bool:
        return shard in (state.timed if self.timed else state.executed)

    def _unneeded(self) -> list[tuple[RoundState, int]]:
        """Shards whose survivors could only be surplus (`rounds.unneeded_shards`), with their round."""
        state_of = {shard: state for state in self.rounds for shard in state.shards}
        ordered = [(shard, state.sources.get(shard)) for state in self.rounds for shard in state.shards]
        finished = {shard for shard, state in state_of.items()
                    if self._done_shard(state, shard) and shard not in self.rechecking}
        unneeded = rounds.unneeded_shards(ordered, finished, lambda shard: self._survivor_count(state_of[shard], shard),
                                          self.wanted)
        return [(state_of[shard], shard) for shard in unneeded]

    def _survivor_count(self, state: RoundState, shard: int) -> int:
        if shard not in self.survivor_counts:
            self.survivor_counts[shard] = len(self._shard_survivors(state, shard))
        return self.survivor_counts[shard]

    def _skip_unneeded(self) -> None:
        """Cancel the not yet started jobs of unneeded shards and mark them skipped (empty stage outputs): the
        dataset is the same, the build ends sooner. A job already running is asked to stop: its tasks under way
        finish, it starts no more, and it comes back skipped too (the local executor; a Ray task runs to the end).
        The old mode skips nothing."""
        if self.skipping or not self.stream:  # marking a shard skipped finishes its stages, which come back here
            return
        self.skipping = True
        try:
            for state, shard in self._unneeded():
                for stage in (EXECUTE.name, TIMING.name):
                    future = next((f for f, (st, _, sh) in self.pending.items() if st == stage and sh == shard), None)
                    if future is None:
                        continue
                    if not future.cancel():
                        self.executor.stop(future)   # asking again is harmless: the job's stop event stays set
                        continue
                    del self.pending[future]
                    empty = {"verdicts": [], "records": [], "funnel": Funnel().to_dict(), "skipped": True}
                    if stage == EXECUTE.name:
                        self._on_execute(state, shard, empty)
                    else:
                        self._on_timing(state, shard, empty)
        finally:
            self.skipping = False

    # survivors -----------------------------------------------------------------------------------------------
    def _executed(self, state: RoundState) -> bool:
        return state.executed >= set(state.shards)

    def _executed_in(self, state: RoundState, shard: int) -> list[dict]:
        """A shard's records that passed the execute checks, with the checks' columns (EXECUTE_COLUMNS)."""
        verdicts = self.rundir.rows(self.rundir.shard_dir(shard), "execute")
        columns = {v["sample_index"]: {name: v.get(name) for name in EXECUTE_COLUMNS} for v in verdicts}
        return [{**record, **columns[record["sample_index"]]}
                for record in kept_by_key(self._executable(state, shard), verdicts)]

    def _executed_survivors(self, state: RoundState) -> list[dict]:
        return [r for shard in state.shards for r in self._executed_in(state, shard)]

    def _shard_survivors(self, state: RoundState, shard: int) -> list[dict]:
        if not self.timed:
            return self._executed_in(state, shard)
        folder = self.rundir.shard_dir(shard)
        return kept_by_key(self.rundir.rows(folder, "timed"), self.rundir.rows(folder, "timing"))

    def _survivors(self, state: RoundState) -> list[dict]:
        folder = self.rundir.round_dir(state.index)
        if self.rundir.done(folder, "round") is not None:
            return self.rundir.rows(folder, "survivors")
        return self._gathered_survivors(state)

    def _gathered_survivors(self, state: RoundState) -> list[dict]:
        """The survivors of the round's finished shards, read from the shards themselves."""
        done = state.timed if self.timed else state.executed
        return [r for shard in state.shards if shard in done for r in self._shard_survivors(state, shard)]

    def _complete_if_done(self, state: RoundState) -> None:
        if state.complete or not self._executed(state) or (self.timed and state.timed < set(state.shards)) \
                or self.rechecking.intersection(state.shards):
            return
        self._close_round(state)
        state.complete = True

    def _close_round(self, state: RoundState) -> None:
        """Write the round's survivors, gathered from its shards, and its marker."""
        folder = self.rundir.round_dir(state.index)
        survivors = self._gathered_survivors(state)
        self.rundir.write_rows(folder, "survivors", survivors)
        self.rundir.mark(folder, "round", {"survivors": len(survivors)})

    def _published(self) -> int:
        """Tasks that will be published: survivors so far, capped per source by its quota."""
        kept = self._final_kept()
        return sum(min(kept[source], quota) for source, quota in self.wanted.items())

    def _count_published(self) -> None:
        """The progress bar of published tasks."""
        published = self._published()
        if self.first_task is None and published:
            self.first_task = (time.perf_counter() - self.started, published)
        if self.bar is not None:
            self.bar.update(published - self.bar.n)


def needs_repair(row: dict) -> bool:
    """Whether a timed row is timed again by a resumed CUDA build: its timing is no verdict of the task's
    (`recheck_reason`), or the timing guard suspects it and it was never timed again."""
    return bool(recheck_reason(row) or (suspicions(row) and not row.get("timing_rechecked")))


def shards_to_repair(rundir: RunDir) -> Iterator[tuple[Path, dict, list[dict]]]:
    """The run folder's timed shards holding a row to time again (`needs_repair`): folder, timing marker, rows."""
    for folder in sorted(rundir.root.glob("shards/*")):
        marker = rundir.done(folder, "timing")
        rows = rundir.rows(folder, "timed") if marker is not None else []
        if any(needs_repair(row) for row in rows):
            yield folder, marker, rows


def lightest_first(shards: list[tuple[int, list[dict]]]) -> list[tuple[int, list[dict]]]:
    """(shard, records) pairs ordered by the sum of their records' rough eager medians from the runtime check on
    CUDA (`eager_ms_cuda`, 0 where missing: on the CPU, shard order), then by shard."""
    return sorted(shards, key=lambda item: (sum(row.get("eager_ms_cuda") or 0.0 for row in item[1]), item[0]))


def pending_repairs(rundir: RunDir) -> tuple[int, int]:
    """The rows a resumed CUDA build would time again in the run folder's timed shards, and the shards that hold
    them."""
    found = [sum(map(needs_repair, rows)) for _, _, rows in shards_to_repair(rundir)]
    return sum(found), len(found)


def run_build(config: BuildConfig, run_dir: str | Path, executor: LocalExecutor | RayExecutor | None = None,
              progress: bool = True, stream: bool = True, timing_workers: int | None = None,
              save_state: str | Path | None = None, resume_from: str | Path | None = None,
              sizing_note: str = "") -> BuildResult:
    """Build (or resume) the dataset of `config` in `run_dir` with `executor` (default: local, 2 workers);
    `save_state` keeps the build's state in that file as it goes, `resume_from` restores one first (state.py);
    `sizing_note` says in the log how the worker counts were chosen."""
    release_share()   # a malformed GPU setting in the environment stops the build before any work
    shared_slots()
    own = executor is None
    executor = executor or LocalExecutor(2)
    try:
        return Build(config, run_dir, executor, progress, stream, timing_workers, save_state, resume_from,
                     sizing_note).run()
    finally:
        if own:
            executor.close()
