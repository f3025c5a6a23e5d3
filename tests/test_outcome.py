"""What became of a real small build's candidates is told in one vocabulary and adds up everywhere: the build's summary,
stats.json, the run folder's own files, `opgen profile` (its summary, its JSON and --realism) and the card."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from opgen.cli import main
from opgen.outcome import outcome_line
from tests.conftest import KERNELBENCH, run_cli

# n = 5, seed 3: the candidates of tests/test_build_stream.py's builds, so their compiles are in the session's
# inductor cache; its shards of 2 leave a survivor beyond the quota (surplus) and, once the quota is met, shards
# skipped (3 candidates not judged)
ARGS = ("--n", "5", "--seed", "3", "--device", "cpu", "--profile", "smoke", "--shard-size", "2", "--workers", "2",
        "--no-progress")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    run = tmp_path_factory.mktemp("outcome") / "run"
    result = run_cli("build", *ARGS, "--out", str(run), "--reference", str(KERNELBENCH))
    assert result.returncode == 0, result.stderr[-3000:]
    return run, result.stdout


def lines_of(path: Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


@pytest.mark.heavy
def test_the_counts_add_up_and_match_the_run_folder(built):
    run, stdout = built
    stats = json.loads((run / "stats.json").read_text())
    counts = stats["outcome"]
    assert counts["candidates"] == counts["rejected"] + counts["unjudged"] + counts["survivors"]
    assert counts["survivors"] == counts["tasks"] + counts["surplus"]
    assert counts["surplus"] and counts["unjudged"]   # what this build is chosen for: both counts are exercised
    # each count, from what the build left on disk
    assert counts["candidates"] == sum(lines_of(path) for path in run.glob("shards/*/candidates.jsonl"))
    assert counts["rejected"] == lines_of(run / "rejected.jsonl") == sum(stats["rejected"].values())
    assert counts["survivors"] == sum(lines_of(path) for path in run.glob("rounds/*/survivors.jsonl"))
    assert counts["tasks"] == pq.read_metadata(run / "tasks.parquet").num_rows == stats["tasks"]
    assert counts["unjudged"] == stats["skipped_candidates"]
    assert stats["funnel"]["kept"] == counts["survivors"] + counts["unjudged"]   # a stage's "kept": not rejected
    assert outcome_line(counts) in stdout                                         # the build's summary says the same
    assert "kept were never judged" not in stdout and "\ntotal " not in stdout


@pytest.mark.heavy
def test_the_profile_and_the_card_say_the_same(built, tmp_path, capsys):
    run, _ = built
    counts = json.loads((run / "stats.json").read_text())["outcome"]
    figures = tmp_path / "profile.json"
    assert main(["profile", str(run), "--realism", "--json", str(figures)]) == 0
    summary = capsys.readouterr().out
    assert outcome_line(counts) in summary and not summary.lstrip().startswith("{")   # for a person, not JSON
    data = json.loads(figures.read_text())
    assert data["outcome"] == counts
    fates = {row["fate"]: row["candidates"] for row in data["realism"]}
    assert fates["candidates"] == counts["candidates"]
    assert fates.get("tasks", 0) == counts["tasks"] and fates.get("surplus", 0) == counts["surplus"]
    assert fates.get("not judged", 0) == counts["unjudged"]
    rejected = sum(n for fate, n in fates.items() if ": " in fate)
    assert rejected == counts["rejected"]
    assert main(["profile", str(run), "--json"]) == 0                             # the figures alone, on stdout
    assert json.loads(capsys.readouterr().out)["outcome"] == counts
    dataset = tmp_path / "dataset"
    assert main(["publish", str(run), "--repo-id", "opgen/outcome-test", "--dry-run", "--out", str(dataset)]) == 0
    assert outcome_line(counts) in (dataset / "README.md").read_text()
