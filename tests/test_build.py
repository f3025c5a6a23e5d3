"""`opgen build` end to end on the real stages: funnel, run folder, refusal of another config, and resume after
kills (fault injection after k markers, then a real SIGKILL) ending with the same dataset."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from opgen.outcome import outcome_line
from opgen.pipeline.rundir import FAULT_ENV
from opgen.records import COLUMNS, PUBLISHED_TIMING_COLUMNS
from tests.conftest import KERNELBENCH, REPO, made_once, run_cli

# Small enough for CI (5 candidates, 3 shards of 2, one round), large enough to have several markers.
BUILD_ARGS = ("--n", "4", "--seed", "0", "--device", "cpu", "--profile", "smoke", "--shard-size", "2",
              "--workers", "2", "--no-progress")
_REFERENCE: dict[str, Path] = {}


def build_args(out: Path) -> list[str]:
    return ["build", *BUILD_ARGS, "--out", str(out), "--reference", str(KERNELBENCH)]


def reference_build(tmp_path_factory) -> Path:
    """One uninterrupted build shared by every test of the session (test_publish and test_build_ray too), and by
    every xdist worker: the first to ask builds it, the others read it (a build is about 40 s of a CI machine's two
    cores)."""
    if "run" not in _REFERENCE:
        with made_once(tmp_path_factory, "reference-build") as (folder, made):
            if not made:
                result = run_cli(*build_args(folder / "run"))
                assert result.returncode == 0, result.stderr[-3000:]
                (folder / "stdout.txt").write_text(result.stdout)
                (folder / "done").write_text("")
        _REFERENCE["run"] = folder / "run"
        _REFERENCE["stdout"] = (folder / "stdout.txt").read_text()
    return _REFERENCE["run"]


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory) -> Path:
    return reference_build(tmp_path_factory)


def dataset_rows(run: Path) -> list[dict]:
    return pq.read_table(run / "tasks.parquet").to_pylist()


@pytest.mark.heavy
def test_build_writes_the_run_folder_and_the_dataset(reference_run):
    rows = dataset_rows(reference_run)
    assert len(rows) == 4
    assert tuple(pq.read_schema(reference_run / "tasks.parquet").names) == COLUMNS
    assert all(r["data_source"] == "torch#2" and r["seed"] == 0 for r in rows)   # quotas of n=4: torch#2 only
    assert all(r[c] is None for r in rows for c in PUBLISHED_TIMING_COLUMNS)                 # not timed on CUDA
    assert all(r["kb_nearest"] and 0 <= r["kb_similarity"] < 0.9 for r in rows)
    config = json.loads((reference_run / "config.json").read_text())
    assert config["n"] == 4 and config["reference_sha256"]
    plan = json.loads((reference_run / "rounds" / "000" / "plan.json").read_text())
    shards = [s["shard"] for s in plan["shards"]]
    for shard in shards:
        folder = reference_run / "shards" / f"{shard:05d}"
        assert (folder / "static.done").is_file() and (folder / "execute.done").is_file()
    candidates = sum(len((reference_run / "shards" / f"{s:05d}" / "candidates.jsonl").read_text().splitlines())
                     for s in shards)
    stats = json.loads((reference_run / "stats.json").read_text())
    assert stats["candidates"] == candidates and stats["tasks"] == 4
    assert stats["funnel"]["inputs"] == candidates
    # candidates of shards skipped as unneeded (cancelled or stopped) pass no judgement: kept, not survivors
    assert stats["funnel"]["kept"] == stats["survivors"] + stats["skipped_candidates"]
    assert stats["survivors"] == stats["tasks"] + stats["surplus"]
    assert (stats["skipped_candidates"] > 0) <= (stats["skipped_shards"] > 0)
    rejected = (reference_run / "rejected.jsonl").read_text().splitlines()
    assert len(rejected) == candidates - stats["survivors"] - stats["skipped_candidates"]
    assert "build.log" in os.listdir(reference_run / "logs")
    stdout = _REFERENCE["stdout"]
    assert "compile" in stdout and str(reference_run) in stdout   # the funnel table
    assert outcome_line(stats["outcome"]) in stdout
    rates = stats["throughput"]   # the summary's rates are stats.json's, the one after the first task included
    steady = (f" ({rates['steady_tasks_per_min']} after this call's first task at {rates['first_task_s']} s)"
              if rates["steady_tasks_per_min"] is not None else "")   # None: the last task within 1 s of the first
    assert f"{rates['tasks_per_min']} tasks/min{steady}, {rates['candidates_per_min']} candidates/min" in stdout


@pytest.mark.heavy
def test_rerun_with_another_config_is_refused_in_one_line(reference_run):
    before = (reference_run / "config.json").read_text()
    args = build_args(reference_run)
    args[args.index("--n") + 1] = "5"
    result = run_cli(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "another config" in result.stderr
    assert "n" in result.stderr.split("differs in:")[1]
    assert (reference_run / "config.json").read_text() == before


def test_build_refuses_a_folder_that_is_not_a_run(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    result = run_cli(*build_args(tmp_path))
    assert result.returncode == 2 and "not an opgen run folder" in result.stderr
    assert (tmp_path / "notes.txt").read_text() == "mine" and not (tmp_path / "config.json").exists()


def _static_mtimes(run: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in sorted(run.glob("shards/*/candidates.jsonl"))}


@pytest.mark.heavy
def test_build_killed_repeatedly_resumes_to_the_same_dataset(reference_run, tmp_path):
    run = tmp_path / "run"
    # 1. exit right after 2 markers (two sampled shards), 2. then after 4 more (last shard, dedup, 2 executions)
    for markers in (2, 4):
        result = run_cli(*build_args(run), env={FAULT_ENV: str(markers)})
        assert result.returncode == 137, result.stderr[-2000:]
        assert not (run / "tasks.parquet").exists()
    sampled = _static_mtimes(run)
    plan = json.loads((reference_run / "rounds" / "000" / "plan.json").read_text())
    assert len(sampled) == len(plan["shards"])   # every shard of round 0 sampled before the second exit
    # 3. a real SIGKILL of the whole job (driver and sandbox workers) at a random moment after it resumed
    log_path = run / "logs" / "build.log"
    resumes = log_path.read_text().count("resuming build")
    process = subprocess.Popen([sys.executable, "-m", "opgen", *build_args(run)], cwd=REPO, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while log_path.read_text().count("resuming build") == resumes and process.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(random.Random(1234).uniform(1.0, 6.0))
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=60)
    # 4. run to the end
    result = run_cli(*build_args(run))
    assert result.returncode == 0, result.stderr[-3000:]
    assert dataset_rows(run) == dataset_rows(reference_run)
    assert _static_mtimes(run) == sampled                      # finished shards were not sampled again
    def skipped(root: Path, shard: str) -> bool:  # cancelled as unneeded: which ones depends on timing
        marker = root / "shards" / shard / "execute.done"
        return marker.is_file() and json.loads(marker.read_text()).get("skipped", False)

    for name in ("candidates", "static", "execute"):
        for path in run.glob(f"shards/*/{name}.jsonl"):
            twin = reference_run / path.relative_to(run)
            if name == "execute" and (skipped(run, path.parent.name) or skipped(reference_run, path.parent.name)):
                continue
            lines = path.read_text().splitlines()
            assert len(lines) == len(twin.read_text().splitlines())   # nothing lost, nothing duplicated
            assert [json.loads(x)["id"] for x in lines] == [json.loads(x)["id"] for x in twin.read_text().splitlines()]
    stats, ref_stats = (json.loads((r / "stats.json").read_text()) for r in (run, reference_run))
    assert stats["funnel"]["inputs"] == ref_stats["funnel"]["inputs"]
    assert stats["tasks"] == ref_stats["tasks"]
    if not stats["skipped_shards"] and not ref_stats["skipped_shards"]:  # surplus counts what ran beyond the quotas
        assert stats["rejected"] == ref_stats["rejected"] and stats["surplus"] == ref_stats["surplus"]
    log = (run / "logs" / "build.log").read_text()
    assert log.count("resuming build") == 3 and "fault injection" in log
