"""The timing guard: rows whose own evidence says their timing was slowed are timed again, and keep the faster."""

from __future__ import annotations

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


def test_launch_bound_rows_are_not_suspect():
    """Event time well above the kernels' device time: the host launching many small kernels (recurrent chains)."""
    assert suspicions(_row(5.0, eager_device_us=1500.0)) == []


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
