"""The streaming build: timing overlaps validation, yet the dataset is the same as stage by stage, and a build
killed while both run resumes to the same dataset. Timed on the CPU (`cpu_timing`), so CI runs the same path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from opgen.pipeline.rundir import FAULT_ENV

REPO = Path(__file__).resolve().parents[1]
KB = REPO.parent / "shared" / "kernelbench" / "problems.jsonl"
BUILD = """
import sys
from opgen.pipeline.build import BuildConfig, run_build
from opgen.pipeline.executors import LocalExecutor
if __name__ == "__main__":
    config = BuildConfig(n=5, seed=3, shard_size=2, cpu_timing=True, trials=3, warmups=0, reference=sys.argv[2])
    executor = LocalExecutor(2)
    try:
        result = run_build(config, sys.argv[1], executor, progress=False, stream=sys.argv[3] == "stream")
    finally:
        executor.close()
    print(result.tasks, result.stats["throughput"]["busy_s"])
"""


def build(run: Path, mode: str, env: dict | None = None) -> subprocess.CompletedProcess:
    script = run.parent / "build_script.py"
    script.write_text(BUILD)
    return subprocess.run([sys.executable, str(script), str(run), str(KB), mode], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=900)


def rows(run: Path) -> list[dict]:
    table = pq.read_table(run / "tasks.parquet", columns=["id", "code", "ops", "data_source"])
    return table.to_pylist()


@pytest.fixture(scope="module")
def streamed(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("streamed") / "run"
    done = build(run, "stream")
    assert done.returncode == 0, done.stderr[-3000:]
    return run


@pytest.mark.heavy
def test_streaming_times_every_survivor_and_reports_busy_time(streamed):
    timed = pq.read_table(streamed / "tasks.parquet").to_pylist()
    assert len(timed) == 5 and all(r["eager_ms"] and r["eager_ms_count"] == 3 for r in timed)
    assert all(r["precision"] == "default" and r["trial_mode"] == "adaptive" for r in timed)
    stats = (streamed / "stats.json").read_text()
    assert '"busy_s"' in stats and '"timing"' in stats and '"tasks_per_min"' in stats


@pytest.mark.heavy
def test_stage_by_stage_gives_the_same_dataset(streamed, tmp_path):
    done = build(tmp_path / "run", "stages")
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(tmp_path / "run") == rows(streamed)


@pytest.mark.heavy
def test_killed_while_streaming_resumes_to_the_same_dataset(streamed, tmp_path):
    run = tmp_path / "run"
    for markers in (4, 3, 3):   # killed mid-round with execute and timing jobs in flight, three times
        done = build(run, "stream", {FAULT_ENV: str(markers)})
        assert done.returncode == 137, done.stderr[-3000:]
    done = build(run, "stream")
    assert done.returncode == 0, done.stderr[-3000:]
    assert rows(run) == rows(streamed)
    log = (run / "logs" / "build.log").read_text()
    assert log.count("resuming build") == 3


def test_unwritable_run_folder_is_one_line_and_status_2(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    done = subprocess.run([sys.executable, "-m", "opgen", "build", "--n", "2", "--out", str(blocked / "run"),
                           "--reference", str(KB), "--no-progress"], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "cannot use" in done.stderr
