"""The timing guard: rows whose own evidence says their timing was slowed are timed again, and keep the faster."""

from __future__ import annotations

from opgen.sandbox.pool import MEMORY_LIMIT
from opgen.timing.guard import merge, recheck, suspicions


def _row(eager_ms: float, **fields) -> dict:
    row = {"id": "t", "code": "...", "eager_ms": eager_ms, "eager_ms_iqr": 0.01, "eager_device_us": eager_ms * 950,
           "compile_ms": eager_ms / 2, "compile_device_us": eager_ms / 2 * 950, "compile_speedup": 2.0,
           "eager_ms_cuda": eager_ms * 1.05, "estimated_gpu_ms": eager_ms, "timing_status": "ok",
           "timing_rechecked": None}
    return {**row, **fields}


def test_agreeing_evidence_is_no_suspicion():
    assert suspicions(_row(5.0)) == []
    assert suspicions({"eager_ms": None}) == [] and suspicions({"eager_ms": 3.0}) == []   # nothing to compare


def test_launch_bound_rows_are_timed_again_with_the_host_quiet():
    """Event time well above the kernels' device time: the host launching many small kernels (recurrent chains)
    sets the pace, and the build's load slows the host (an `nn.RNN` task: 7.24 ms timed, 2.12 ms of device time)."""
    assert [s.split(":")[0] for s in suspicions(_row(7.24, eager_device_us=2120.0))] == ["host"]
    assert [s.split(":")[0] for s in suspicions(_row(4.0, compile_device_us=1000.0))] == ["host"]
    assert suspicions(_row(5.0, eager_device_us=4000.0)) == []   # a 25% gap: below the host ratio


def test_each_piece_of_evidence_raises_a_suspicion():
    slowed = _row(7.0, eager_ms_cuda=2.2)   # timed 7 ms where the checks, sharing the GPU, took 2.2
    assert [s.split(":")[0] for s in suspicions(slowed)] == ["checks"]
    assert [s.split(":")[0] for s in suspicions(_row(2.0, eager_device_us=3200.0))] == ["profiler"]
    assert [s.split(":")[0] for s in suspicions(_row(2.0, compile_device_us=1600.0))] == ["profiler"]
    assert [s.split(":")[0] for s in suspicions(_row(9.0, estimated_gpu_ms=1.0))] == ["estimate"]
    assert suspicions(_row(9.0, estimated_gpu_ms=2.0)) == []   # within the estimate's spread


def test_small_tasks_get_the_host_clock_slack():
    assert suspicions(_row(0.12, eager_ms_cuda=0.09)) == []     # 0.03 ms over: the host clock's own cost


def test_recheck_times_only_the_suspects_once_and_keeps_the_faster():
    rows = [_row(5.0), _row(7.0, eager_ms_cuda=2.2, id="slowed"), _row(3.0, eager_device_us=4000.0, id="odd")]
    asked = []

    def time_again(suspects):
        asked.append([r["id"] for r in suspects])
        return [{**r, "eager_ms": 2.3 if r["id"] == "slowed" else 3.3, "eager_ms_iqr": 0.02,
                 "eager_device_us": 2100.0, "compile_ms": r["compile_ms"] * 1.1} for r in suspects]

    out = recheck(rows, time_again)
    assert asked == [["slowed", "odd"]]
    assert out[0] is rows[0]
    slowed, odd = out[1], out[2]
    assert slowed["eager_ms"] == 2.3 and slowed["eager_ms_iqr"] == 0.02 and slowed["eager_device_us"] == 2100.0
    assert slowed["compile_ms"] == 3.5 and slowed["compile_speedup"] == 2.3 / 3.5   # compile's first was faster
    assert slowed["eager_ms_first"] == 7.0 and slowed["timing_rechecked"].startswith("checks:")
    assert odd["eager_ms"] == 3.0 and odd["eager_device_us"] == 4000.0   # the second was slower: the first stays
    assert odd["timing_rechecked"].startswith("profiler:")


def test_recheck_passes_a_stop_through_and_skips_a_clean_shard():
    assert recheck([_row(7.0, eager_ms_cuda=2.0)], lambda suspects: None) is None
    clean = [_row(5.0)]
    assert recheck(clean, lambda suspects: 1 / 0) is clean


def test_merge_takes_a_successful_second_attempt():
    first = _row(7.0, compile_ms=None, compile_speedup=None, timing_status="compile_error")
    merged = merge(first, _row(6.0, compile_ms=3.0), "why")
    assert merged["timing_status"] == "ok" and merged["compile_ms"] == 3.0 and merged["compile_speedup"] == 2.0


def _fake_timer(monkeypatch, eager_ms: float) -> list[tuple[list[str], bool]]:
    """Replace the GPU timer: every row it is asked to time comes back at `eager_ms`; returns its calls."""
    from opgen.timing import driver

    calls = []

    def time_once(rows, options, *, quiet=False, **_):
        calls.append(([r["id"] for r in rows], quiet))
        return [{**r, "eager_ms": eager_ms, "eager_device_us": 2120.0, "compile_ms": r["compile_ms"],
                 "quiet_paused": 9 if quiet else None} for r in rows]

    monkeypatch.setattr(driver, "_time_once", time_once)
    return calls


def test_a_recheck_only_call_times_the_suspects_alone_with_the_host_quiet(monkeypatch):
    from opgen.timing.driver import TimingOptions, time_records

    calls = _fake_timer(monkeypatch, 4.21)
    rows = [_row(5.0, id="fine"), _row(7.24, eager_device_us=2120.0, id="rnn")]
    out = time_records(rows, TimingOptions(device="cuda"), recheck_only=True)
    assert calls == [(["rnn"], True)]
    assert out[0] == rows[0] and out[1]["eager_ms"] == 4.21 and out[1]["eager_ms_first"] == 7.24
    assert out[1]["quiet_paused"] == 9 and out[1]["timing_rechecked"].startswith("host:")


def test_a_resumed_build_repairs_rows_timed_before_the_guard_knew_them(monkeypatch, tmp_path):
    """Rows a finished shard holds are rechecked once: the faster median kept, the window applied anew (a row
    that falls under 1 ms leaves the set), the marker rewritten; a second pass finds nothing to do."""
    import json

    from opgen.pipeline.config import BuildConfig
    from opgen.pipeline.rundir import RunDir

    calls = _fake_timer(monkeypatch, 0.9)
    rows = [_row(5.0, id="fine", sample_index=0),
            _row(1.1, eager_device_us=300.0, id="rnn", sample_index=1, timing_device="cuda")]
    build, folder = _finished_shard(tmp_path, rows, [True, True], BuildConfig(n=2, seed=0, device="cuda"))
    try:
        _repair_now(build)
        assert calls == [(["rnn"], True)]
        fresh = RunDir(tmp_path)
        timed = fresh.rows(folder, "timed")
        assert [r["eager_ms"] for r in timed] == [5.0, 0.9] and timed[1]["eager_ms_first"] == 1.1
        assert [v["keep"] for v in fresh.rows(folder, "timing")] == [True, False]
        marker = json.loads((folder / "timing.done").read_text())
        assert marker["gpu_s"] == 1.5 and marker["funnel"]
        build.rundir = fresh
        _repair_now(build)
        assert len(calls) == 1
    finally:
        build.executor.close()


def test_a_repair_reaches_the_state_saved_after_it(monkeypatch, tmp_path):
    """A save reads the shard's files before the repair rewrites them; the next save holds the repaired rows and
    verdicts, so a build resumed from it has nothing left to repair (a save that kept what it read first would
    send the old rows, and every later call would time them again)."""
    from opgen.pipeline.build import pending_repairs
    from opgen.pipeline.config import BuildConfig
    from opgen.pipeline.rundir import RunDir
    from opgen.pipeline.state import restore_state

    calls = _fake_timer(monkeypatch, 0.9)
    rows = [_row(5.0, id="fine", sample_index=0),
            _row(1.1, eager_device_us=300.0, id="rnn", sample_index=1, timing_device="cuda")]
    RunDir(tmp_path / "run").claim({"n": 2, "seed": 0})
    build, _ = _finished_shard(tmp_path / "run", rows, [True, True], BuildConfig(n=2, seed=0, device="cuda"))
    build.save_path = tmp_path / "build.state"
    try:
        assert pending_repairs(build.rundir) == (1, 1)   # the rnn row, in shard 4
        build._save_state()
        _repair_now(build)
        assert calls == [(["rnn"], True)]
        build._save_state()
        restored = RunDir(tmp_path / "restored")
        restore_state(build.save_path, restored, None)
        shard = restored.shard_dir(4)
        assert [r["eager_ms"] for r in restored.rows(shard, "timed")] == [5.0, 0.9]
        assert [v["keep"] for v in restored.rows(shard, "timing")] == [True, False]
        assert pending_repairs(restored) == (0, 0)
        build.rundir, build.rechecks = restored, {}
        build._plan_rechecks()
        assert build.rechecks == {}
    finally:
        build.executor.close()


def test_a_resumed_build_repairs_its_rows_after_its_first_timed_shard_and_before_its_round_ends(monkeypatch, tmp_path):
    """The first new task does not wait for the repairs: they go to the timing lanes once a timing job of this call
    has come back (or no execute job is left); until a shard's repair is in, its round stays open and the shard does
    not count as finished, so the round's survivors are the repaired ones."""
    from concurrent.futures import Future

    from opgen.pipeline.build import RoundState
    from opgen.pipeline.config import BuildConfig
    from opgen.pipeline.stages import EXECUTE

    calls = _fake_timer(monkeypatch, 0.9)
    rows = [_row(5.0, id="fine", sample_index=0, data_source="torch#1"),
            _row(1.1, eager_device_us=300.0, id="rnn", sample_index=1, timing_device="cuda", data_source="torch#1")]
    build, folder = _finished_shard(tmp_path, rows, [True, True], BuildConfig(n=2, seed=0, device="cuda"))
    try:
        build._plan_rechecks()
        build.wanted = {"torch#1": 1}
        later = 6   # the source's next shard: surplus once shard 4 counts, finished, with a survivor
        state = RoundState(0, [4, later], {4: "torch#1", later: "torch#1"}, executed={4}, timed={4})
        build.rounds.append(state)
        running = Future()   # another shard's execute job, still under way
        build.pending[running] = (EXECUTE.name, 0, 5)
        build._send_rechecks()
        assert len(build.pending) == 1 and calls == []
        state.executed.add(later)
        state.timed.add(later)
        build._complete_if_done(state)
        assert not state.complete and build._unneeded() == []
        build.shard_timed_now = True   # this call's first shard came back from timing
        build._send_rechecks()
        assert len(build.pending) == 2
        del build.pending[running]
        build._drain(lambda: True)
        assert calls == [(["rnn"], True)] and state.complete and not build.rechecking
        assert build._unneeded() == [(state, later)]
        assert [r["id"] for r in build.rundir.rows(build.rundir.round_dir(0), "survivors")] == ["fine"]
    finally:
        build.executor.close()


def test_a_resumed_build_times_again_the_rows_its_timing_harness_failed(monkeypatch, tmp_path):
    """A shard whose timing pool broke under it recorded "error: ValueError: write to closed file" for every row,
    and the window rejected them all: on resume those rows are timed again (on any device) and judged anew, as is a
    row that ran short of GPU memory beside other workers' tasks; rows that failed for the task's own reasons (its
    code, its worker past the host memory limit) stay as they were, and a row is timed again once only."""
    from opgen.pipeline.config import BuildConfig
    from opgen.pipeline.rundir import RunDir
    from opgen.timing import driver

    calls = []

    peaks = {}

    def time_once(rows, options, *, quiet=False, **_):   # as the workers answer: every timing column anew
        calls.append(([r["id"] for r in rows], quiet))
        peaks.update((r["id"], r.get("gpu_peak_mb")) for r in rows)
        return [{**r, "eager_ms": 4.0, "compile_ms": 2.0, "timing_status": "ok", "timing_error": None} for r in rows]

    monkeypatch.setattr(driver, "_time_once", time_once)
    untimed = dict.fromkeys(("eager_ms", "eager_device_us", "compile_ms", "compile_device_us", "compile_speedup"))
    rows = [_row(5.0, id="fine", sample_index=0),
            {**_row(5.0, id="lost", sample_index=1), **untimed, "timing_status": "error",
             "timing_error": "error: ValueError: write to closed file"},
            {**_row(5.0, id="raises", sample_index=2), **untimed, "timing_status": "error",
             "timing_error": "eager: RuntimeError: shape mismatch"},
            {**_row(5.0, id="crowded", sample_index=3), **untimed, "timing_status": "error", "gpu_peak_mb": 7000,
             "timing_error": "eager: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                             "total capacity of 79.19 GiB of which 1.06 GiB is free."},
            {**_row(5.0, id="host", sample_index=4), **untimed, "timing_status": "crash",
             "timing_error": f"crash: {MEMORY_LIMIT} of 14000 MB"}]
    config = BuildConfig(n=3, seed=0, device="cpu", cpu_timing=True, runtime_window_ms=(1.0, 100.0))
    build, folder = _finished_shard(tmp_path, rows, [True, False, False, False, False], config)
    try:
        _repair_now(build)
        assert calls == [(["lost", "crowded"], False)]
        # what a try again for GPU memory waits for: the row's own checks' peak, else the shard's execute verdict's
        assert peaks == {"lost": 1001, "crowded": 7000}
        fresh = RunDir(tmp_path)
        timed = fresh.rows(folder, "timed")
        assert [r["eager_ms"] for r in timed] == [5.0, 4.0, None, 4.0, None]
        assert timed[1]["timing_rechecked"] == ("its first timing failed in the harness (error: ValueError: write to "
                                                "closed file)")
        assert timed[3]["timing_rechecked"].startswith("its first timing ran short of GPU memory beside other "
                                                       "workers' tasks (eager: OutOfMemoryError: CUDA out of memory.")
        assert [v["keep"] for v in fresh.rows(folder, "timing")] == [True, True, False, True, False]
        build.rundir = fresh
        _repair_now(build)
        assert len(calls) == 1
    finally:
        build.executor.close()


def _repair_now(build) -> None:
    """Plan the resumed build's repairs and make them, before anything else."""
    build._plan_rechecks()
    build._drain(lambda: True)


def _finished_shard(tmp_path, rows: list[dict], kept: list[bool], config):
    """A build (its run folder `tmp_path`, `config`) whose shard 4 was timed into `rows` and judged `kept`: the build
    as a resumed build finds it, and the shard's folder."""
    from opgen.pipeline.build import Build
    from opgen.pipeline.executors import LocalExecutor
    from opgen.pipeline.rundir import RunDir

    rundir = RunDir(tmp_path)
    folder = rundir.shard_dir(4)
    folder.mkdir(parents=True)
    rundir.write_rows(folder, "timed", rows)
    rundir.write_rows(folder, "execute", [{"sample_index": row["sample_index"], "keep": True,
                                           "gpu_peak_mb": 1000 + row["sample_index"]} for row in rows])
    rundir.write_rows(folder, "timing", [{"sample_index": row["sample_index"], "keep": keep}
                                         for row, keep in zip(rows, kept)])
    rundir.mark(folder, "timing", {"funnel": {}, "gpu_s": 1.5})
    build = Build(config, tmp_path, LocalExecutor(2), progress=False, timing_workers=1)
    build.rundir = rundir
    return build, folder
