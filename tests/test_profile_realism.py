"""`opgen profile --realism`: the share of real-model family pairs among a build's candidates, by fate."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from opgen.cli import main
from opgen.jsonl import write_jsonl
from opgen.pipeline.rundir import RunDir

REAL = ["conv2d", "batch_norm", "relu"]          # conv2d → batch_norm → relu: two pairs real models have
UNSEEN = ["gru", "cosine_similarity"]            # a pair no model of the prior has


def _run(root: Path) -> RunDir:
    run = RunDir(root)
    run.claim({"n": 4, "seed": 0})
    candidates = [{"id": "a", "sample_index": 0, "families": REAL}, {"id": "a", "sample_index": 1, "families": REAL},
                  {"id": "b", "sample_index": 2, "families": UNSEEN}, {"id": "c", "sample_index": 3, "families": REAL},
                  {"id": "d", "sample_index": 4, "families": UNSEEN + ["relu"]},
                  {"id": "e", "sample_index": 5, "families": REAL}]
    run.shard_dir(0).mkdir(parents=True)
    run.write_rows(run.shard_dir(0), "candidates", candidates[:3])
    run.shard_dir(1).mkdir(parents=True)
    run.write_rows(run.shard_dir(1), "candidates", candidates[3:])
    # "a" and "e" passed every check (an untimed build's last stage); "d" was never judged
    run.write_rows(run.shard_dir(0), "execute", [{"sample_index": 0, "keep": True}])
    run.write_rows(run.shard_dir(1), "execute", [{"sample_index": 5, "keep": True}])
    # the second copy of "a" is its exact duplicate (the same id); "c" is a KernelBench look-alike
    write_jsonl(run.rejected_path, [{"id": "a", "sample_index": 1, "stage": "dedup", "reason": "duplicate"},
                                    {"id": "c", "sample_index": 3, "stage": "dedup", "reason": "contaminated"},
                                    {"id": "b", "sample_index": 2, "stage": "execute", "reason": "trivial"}])
    pq.write_table(pa.table({"id": ["a"]}), run.tasks_path)
    return run


def test_each_candidate_counts_once_under_its_fate_and_under_what_dedup_kept(tmp_path, capsys):
    run = _run(tmp_path / "run")
    out = tmp_path / "realism.json"
    assert main(["profile", str(run.root), "--realism", "--json", str(out)]) == 0
    table = json.loads(out.read_text())["realism"]
    rows = {row["fate"]: row for row in table}
    assert [row["fate"] for row in table][:3] == ["candidates", "kept by dedup", "tasks"]
    assert rows["candidates"] == {"fate": "candidates", "candidates": 6, "real_pairs": 8, "pairs": 11,
                                  "real_share": 0.7273}
    assert (rows["tasks"]["candidates"], rows["tasks"]["real_share"]) == (1, 1.0)
    assert (rows["dedup: duplicate"]["candidates"], rows["dedup: contaminated"]["candidates"]) == (1, 1)
    assert (rows["execute: trivial"]["real_pairs"], rows["execute: trivial"]["pairs"]) == (0, 1)
    # d: gru → cosine_similarity (unseen), cosine_similarity → relu: judged by nothing yet
    assert rows["not judged"]["candidates"] == 1 and rows["not judged"]["pairs"] == 2
    assert rows["surplus"]["candidates"] == 1          # e: a survivor the dataset left out
    assert rows["kept by dedup"]["candidates"] == 4     # a (in the dataset), b (trivial), d (not judged), e
    assert "| tasks | 1 | 2 | 100.0% |" in capsys.readouterr().out


def test_neither_a_run_folder_nor_a_state_is_one_line(tmp_path, capsys):
    assert main(["profile", str(tmp_path / "missing"), "--realism"]) == 2
    assert main(["profile", str(tmp_path), "--realism"]) == 2
    assert main(["profile", str(_run(tmp_path / "run").root), "--realism", "--json", "/proc/no/realism.json"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"opgen: error: RUN {tmp_path / 'missing'} does not exist" and "no config.json" in err[1]
    assert err[2].startswith("opgen: error: cannot write --json /proc/no/realism.json") and len(err) == 3
