"""scripts/analysis/phases.py: a build's latest executed-and-timed shards, their checks and their timing measured
apart, and the rate of a build that alternated the two phases."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "analysis"))

import phases  # noqa: E402
from phases import latest_sample, main, phased_rate  # noqa: E402

from opgen.errors import UsageError  # noqa: E402
from opgen.jsonl import write_jsonl  # noqa: E402
from opgen.pipeline.config import BuildConfig  # noqa: E402


def _run(root: Path, shards: list[tuple[int, int, bool]], order: list[int] | None = None) -> Path:
    """A CPU-timed build's run folder: per shard (executed candidates, tasks the window kept, timed or not), timed in
    `order` (the shards' own by default); each shard times two more rows than it keeps."""
    order = order or list(range(len(shards)))
    root.mkdir()
    config = BuildConfig(n=10, seed=0, device="cpu", cpu_timing=True).identity("reference-hash")
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for number, (executed, kept, timed) in enumerate(shards):
        folder = root / "shards" / f"{number:05d}"
        ids = [f"s{number}-c{k}" for k in range(executed)]
        write_jsonl(folder / "candidates.jsonl", [{"id": i, "code": f"# {i}", "sample_index": k}
                                                  for k, i in enumerate(ids)])
        write_jsonl(folder / "execute.jsonl", [{"id": i, "sample_index": k, "keep": True} for k, i in enumerate(ids)])
        (folder / "execute.done").write_text("{}", encoding="utf-8")
        if timed:
            rows = ids[:kept + 2]
            write_jsonl(folder / "timed.jsonl", [{"id": i, "code": f"# {i}", "sample_index": k}
                                                 for k, i in enumerate(rows)])
            write_jsonl(folder / "timing.jsonl", [{"id": i, "sample_index": k, "keep": k < kept}
                                                  for k, i in enumerate(rows)])
            (folder / "timing.done").write_text("{}", encoding="utf-8")
            os.utime(folder / "timing.done", (1000.0 + order[number], 1000.0 + order[number]))
    return root


def test_the_sample_is_the_latest_whole_shards_executed_and_timed(tmp_path):
    run = _run(tmp_path / "run", [(4, 1, True), (5, 2, True), (3, 1, True), (6, 2, False)])
    sample = latest_sample(run, candidates=6)
    assert sample.shards == ["00001", "00002"]   # the last one is not timed yet; whole shards up to 6 candidates
    # the latest by when their timing ended, not by number (a build plans margin shards before it needs them)
    shuffled = _run(tmp_path / "shuffled", [(4, 1, True), (5, 2, True), (3, 1, True)], order=[2, 0, 1])
    assert latest_sample(shuffled, candidates=6).shards == ["00002", "00000"]
    assert [r["id"] for r in sample.candidates] == [f"s1-c{k}" for k in range(5)] + [f"s2-c{k}" for k in range(3)]
    assert len(sample.timed) == 4 + 3 and sample.in_window == 3
    with pytest.raises(UsageError, match="no shard both executed and timed"):
        latest_sample(_run(tmp_path / "untimed", [(2, 1, False)]), candidates=5)


def test_the_phases_one_after_the_other_add_a_task_s_minutes_of_each():
    # 1.5 candidates a task at 60 checks a minute (1.5 s of a minute) and 1.1 timings at 66 a minute (1 s): 24 a minute
    assert phased_rate(1.5, 60.0, 1.1, 66.0) == pytest.approx(24.0)


def test_main_measures_both_phases_on_the_sample(tmp_path, monkeypatch, capsys):
    run = _run(tmp_path / "run", [(4, 1, True), (4, 2, True)])
    seen = {}

    def checks(records, settings, workers):
        seen["checks"] = ([r["id"] for r in records], settings.device, workers)
        return {r["id"]: {"worker_s": 2.0, "worker_lock_wait_s": 0.5, "worker_lock_held_s": 0.75,
                          "worker_lock_held_s_by_check": {"compile": 0.5, "visible": 0.25}} for r in records}

    def timing(rows, options, **kwargs):
        seen["timing"] = ([r["id"] for r in rows], options.device, kwargs["workers_per_gpu"])
        return [{**r, "timed_s": 0.25, "timing_wall_s": 1.5} for r in rows]

    from opgen.timing import driver

    monkeypatch.setattr(phases, "run_checks", checks)
    monkeypatch.setattr(driver, "time_records", timing)
    assert main([str(run), "--candidates", "8", "--tasks", "3", "--workers", "4", "--timing-workers", "2"]) == 0
    assert seen["checks"] == ([f"s{s}-c{k}" for s in (0, 1) for k in range(4)], "cpu", 4)
    assert seen["timing"] == (["s1-c1", "s1-c2", "s1-c3"], "cpu", 2)   # the latest timed rows
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("phases: 2 shards (00000 to 00001): 8 candidates executed, 7 timed, 3 into the window: "
                        "2.67 candidates and 2.33 timings a task")
    assert lines[1].startswith("phases: the checks alone: 8 candidates in ") and lines[1].endswith(
        "worker-seconds a candidate 2.00, 0.50 of them waiting for the GPU's lock")
    assert lines[2] == ("phases: the checks held the GPU's lock 0.750 s a candidate; by check: compile 0.500 s, "
                        "visible 0.250 s")
    assert "exclusive hold 0.250 s a task (a ceiling of 102.9 tasks into the window a minute)" in lines[3]
    # two workers at 1.5 s a row: 80 timings a minute once started
    assert " (80.0 with its workers started: the rows' own seconds); exclusive hold" in lines[3]
    # the stubbed checks take next to no time: 2.33 timings a task at 80 a minute, 34.3 a minute, 33% of 102.9
    assert lines[4].startswith("phases: the two phases one after the other: ")
    assert lines[4].endswith("; 34.3 with the timing workers started, 33%")


def test_the_steady_pace_is_the_workers_over_the_rows_own_seconds():
    rows = [{"timing_wall_s": 2.0}, {"timing_wall_s": 4.0}, {"timing_wall_s": None}]
    assert phases.steady_pace(rows, 3) == pytest.approx(60.0)   # 3 workers, 3 s a row
    assert phases.steady_pace([{"timed_s": 1.0}], 3) is None


@pytest.mark.parametrize("make, message", [
    (lambda tmp: tmp / "missing", "no run folder or build state at"),
    (lambda tmp: tmp, "is not an opgen run folder"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, make, message):
    assert main([str(make(tmp_path))]) == 2
    err = capsys.readouterr().err
    assert err.startswith("phases: ") and message in err and len(err.splitlines()) == 1


def test_a_build_that_timed_nothing_is_refused(tmp_path, capsys):
    run = _run(tmp_path / "run", [(2, 1, True)])
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "cpu_timing": False}))
    assert main([str(run)]) == 2 and "the build timed nothing" in capsys.readouterr().err


def test_device_time_checks_again_under_the_profiler_and_says_each_check_s_share(tmp_path, monkeypatch, capsys):
    run = _run(tmp_path / "run", [(4, 1, True), (4, 2, True)])
    calls = []

    def checks(records, settings, workers, device_time=False):
        calls.append(device_time)
        line = {"worker_s": 2.0, "worker_lock_wait_s": 0.0, "worker_lock_held_s": 0.75,
                "worker_lock_held_s_by_check": {"compile": 0.5, "visible": 0.25}}
        if device_time:
            line = {**line, "worker_device_s_by_check": {"compile": 0.1, "visible": 0.2},
                    "worker_float64_device_s_by_check": {"compile": 0.02, "visible": 0.15}}
        return {r["id"]: line for r in records}

    from opgen.timing import driver

    monkeypatch.setattr(phases, "run_checks", checks)
    monkeypatch.setattr(driver, "time_records", lambda rows, options, **kwargs: [{**r, "timed_s": 0.25} for r in rows])
    assert main([str(run), "--workers", "1", "--device-time"]) == 0
    assert calls == [False, True]   # the plain pass's rates and holds are not the profiler's
    lines = capsys.readouterr().out.splitlines()
    assert lines[3] == ("phases: the device's own seconds on the checks (torch's profiler) 0.300 s a candidate, 40% "
                        "of their holds of the GPU's lock, 0.170 s of them on float64 values (the comparisons); by "
                        "check: visible 0.200 s (0.150 float64) of 0.250 held, compile 0.100 s (0.020 float64) of "
                        "0.500 held")
    assert main([str(run), "--workers", "1"]) == 0 and calls == [False, True, False]
    assert "device's own seconds" not in capsys.readouterr().out
