"""The build's quiet pass on a run folder: which rows it times alone (launch-bound by the guard's `host` rule, kept by
the window, not timed alone yet), what it writes back (the shards' timed rows and the finished rounds' survivors,
verdicts untouched), in chunks, and that a second pass finds nothing to do."""

from __future__ import annotations

from opgen.pipeline import quiet_pass as module
from opgen.pipeline.quiet_pass import needs_quiet_pass, quiet_pass
from opgen.pipeline.rundir import RunDir


def row(index: int, eager: float, device_us: float, **extra) -> dict:
    return {"id": f"ops-{index}", "sample_index": index, "eager_ms": eager, "compile_ms": eager,
            "eager_device_us": device_us, "compile_device_us": device_us, "timing_status": "ok", **extra}


def test_which_rows_the_pass_times_alone():
    assert needs_quiet_pass(row(0, 14.3, 4097.0))                # events' median 3.5x the device time
    assert not needs_quiet_pass(row(1, 2.0, 1900.0))             # GPU-bound
    assert needs_quiet_pass(row(2, 2.0, 1900.0, timing_rechecked="host: eager events' 3.0 ms against device time "
                                                                 "1.9 ms"))   # slow in its first timing only
    assert not needs_quiet_pass(row(3, 14.3, 4097.0, timed_alone=True))
    assert not needs_quiet_pass(row(4, 14.3, 4097.0, timing_status="error"))
    assert not needs_quiet_pass(row(5, 14.3, None))              # no device time: no evidence


def _run_folder(tmp_path) -> RunDir:
    rundir = RunDir(tmp_path / "run")
    for shard, rows in ((0, [row(0, 14.3, 4097.0), row(1, 2.0, 1900.0), row(2, 9.0, 2000.0)]),
                        (1, [row(3, 30.0, 9000.0)])):
        folder = rundir.shard_dir(shard)
        folder.mkdir(parents=True)
        rundir.write_rows(folder, "timed", rows)
        # the window kept all but row 2 (its verdict stays whatever the pass finds)
        rundir.write_rows(folder, "timing", [{"sample_index": r["sample_index"], "keep": r["sample_index"] != 2}
                                             for r in rows])
        rundir.mark(folder, "timing", {})
    finished = rundir.round_dir(0)
    finished.mkdir(parents=True)
    rundir.write_rows(finished, "survivors", [row(0, 14.3, 4097.0), row(1, 2.0, 1900.0)])
    rundir.mark(finished, "round", {"survivors": 2})
    return rundir


def test_the_pass_writes_the_faster_medians_back_in_chunks_and_keeps_the_verdicts(tmp_path, monkeypatch):
    monkeypatch.setattr(module, "CHUNK", 1)
    rundir = _run_folder(tmp_path)
    asked, saves = [], []

    def time_alone(rows):
        asked.append([r["sample_index"] for r in rows])
        # row 0 runs faster alone; row 3's alone timing is slower (noise): it keeps its first median
        return [{**r, "eager_ms": {0: 6.3, 3: 31.0}[r["sample_index"]], "compile_ms": 6.0} for r in rows]

    tally = quiet_pass(rundir, time_alone, after_chunk=lambda: saves.append(1))
    assert asked == [[0], [3]] and len(saves) == 2
    assert tally["rows"] == 2 and tally["changed"] == 1 and tally["failed"] == 0
    fresh = RunDir(rundir.root)   # read from the files, not the cache
    shard0 = {r["sample_index"]: r for r in fresh.rows(fresh.shard_dir(0), "timed")}
    assert shard0[0]["eager_ms"] == 6.3 and shard0[0]["timed_alone"] and shard0[0]["eager_ms_first"] == 14.3
    assert "timed alone" in shard0[0]["timing_rechecked"]
    assert shard0[1] == row(1, 2.0, 1900.0) and shard0[2] == row(2, 9.0, 2000.0)   # not launch-bound; not kept
    shard1 = fresh.rows(fresh.shard_dir(1), "timed")[0]
    assert shard1["eager_ms"] == 30.0 and shard1["compile_ms"] == 6.0 and shard1["timed_alone"]
    survivors = {r["sample_index"]: r for r in fresh.rows(fresh.round_dir(0), "survivors")}
    assert survivors[0]["eager_ms"] == 6.3 and survivors[1] == row(1, 2.0, 1900.0)
    assert [v["keep"] for v in fresh.rows(fresh.shard_dir(0), "timing")] == [True, True, False]
    assert quiet_pass(fresh, time_alone)["rows"] == 0   # nothing left to time alone


def test_a_row_that_fails_to_time_alone_keeps_its_timing_and_is_tried_again(tmp_path):
    rundir = _run_folder(tmp_path)
    tally = quiet_pass(rundir, lambda rows: [{**r, "timing_status": "error", "eager_ms": None} for r in rows])
    assert tally["failed"] == 2
    assert quiet_pass(RunDir(rundir.root), lambda rows: rows)["rows"] == 2
