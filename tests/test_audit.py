"""`opgen audit`: a published set's card claims checked from its rows, each failure named; --families."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from opgen.cli import main
from opgen.pipeline.rounds import quotas
from opgen.records import dataset_table
from opgen.sample.sampler import DEFAULT_MIX, sample_records

RELU = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"


def _folder(root: Path, rows: list[dict]) -> Path:
    root.mkdir()
    pq.write_table(dataset_table(rows), root / "tasks.parquet")
    return root


def _clean_rows(n: int) -> list[dict]:
    """n sampled tasks of distinct family chains, published as the quotas of n would have them."""
    rows, chains = [], set()
    for record in sample_records(0, 0, 40):
        if tuple(record["families"]) not in chains and len(record["families"]) > 1:
            chains.add(tuple(record["families"]))
            rows.append({**record, "eager_ms": 2.5, "accept_zero_share": 0.1, "accept_constant_share": 0.2,
                         "accept_stale_share": 0.3})
    sources = [source for source, count in quotas(n, DEFAULT_MIX).items() for _ in range(count)]
    return [{**row, "data_source": source} for row, source in zip(rows[:n], sources, strict=True)]


def _reference(tmp_path: Path) -> Path:
    reference = tmp_path / "kb.jsonl"
    reference.write_text(json.dumps({"level": 1, "problem_id": 19, "name": "19_ReLU.py", "code": RELU}) + "\n")
    return reference


def _claims(path: Path, tmp_path: Path, *extra: str) -> tuple[int, dict[str, dict]]:
    out = tmp_path / f"{path.name}.json"
    status = main(["audit", str(path), "--reference", str(_reference(tmp_path)), "--json", str(out), *extra])
    return status, {claim["claim"].split(" (")[0]: claim for claim in json.loads(out.read_text())}


def test_a_clean_set_holds_every_claim_and_the_size_is_checked_when_given(tmp_path):
    clean = _folder(tmp_path / "clean", _clean_rows(6))
    status, found = _claims(clean, tmp_path, "--n", "6", "--seed", "0")
    assert status == 0 and all(c["holds"] in (True, None) for c in found.values())
    assert found["6 rows"]["holds"] and found["data_source quotas of CUDA-Agent-Ops-6K"]["found"] == "all met"
    status, found = _claims(clean, tmp_path, "--n", "7")
    assert status == 1 and found["7 rows"]["found"] == "6" and not found["data_source quotas of CUDA-Agent-Ops-6K"][
        "holds"]


def test_each_broken_claim_is_named(tmp_path, capsys):
    rows = _clean_rows(6)
    rows[1] = {**rows[1], "eager_ms": 0.4, "accept_stale_share": 0.995}
    relu = {**rows[2], "id": "relu-task", "ops": ["torch.relu"], "families": ["relu"], "code": RELU}
    broken = _folder(tmp_path / "broken", [*rows, dict(rows[0]), relu])
    status, found = _claims(broken, tmp_path)
    assert status == 1
    failed = {name for name, claim in found.items() if claim["holds"] is False}
    assert failed == {"0 exact duplicates", "0 near duplicates under the dedup rule", "0 same-shape twins",
                      "0 KernelBench level 1-3 family-signature matches",
                      "0 tasks accepting zeros, a constant or another draw on 99% of their values",
                      "every eager time in 1-100 ms"}
    assert found["0 exact duplicates"]["found"] == "1 repeated ids, 1 repeated codes"
    assert found["0 KernelBench level 1-3 family-signature matches"]["found"] == "1: relu-task"
    assert found["every eager time in 1-100 ms"]["found"].endswith("1 outside")
    assert "| every eager time in 1-100 ms (timed on a GPU) |" in capsys.readouterr().out


def test_a_cpu_build_is_not_held_to_the_gpu_window(tmp_path):
    rows = [{**row, "eager_ms": 0.05, "hardware": "cpu (2 cores)"} for row in _clean_rows(3)]
    status, found = _claims(_folder(tmp_path / "cpu", rows), tmp_path)
    window = found["every eager time in 1-100 ms"]
    assert status == 0 and window["holds"] and window["found"] == "0 outside; 3 rows not timed on a GPU"


def test_families_adds_the_family_mix_after_the_claims(tmp_path, capsys):
    clean = _folder(tmp_path / "clean", _clean_rows(4))
    assert main(["audit", str(clean), "--reference", str(_reference(tmp_path)), "--families", "--top", "3"]) == 0
    out = capsys.readouterr().out
    claims, families = out.split("\n\n", 1)
    assert claims.startswith(f"{clean} (default): 4 rows\n| claim | found | holds |")
    assert families.startswith(f"{clean}: 4 tasks\ndistinct families: ")
    assert "family-signature matches with KernelBench levels 1-3 (1 problems): 0" in families
    assert "| # | family (these tasks) | tasks | share |" in families and "| 4 |" not in families


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["audit", str(tmp_path / "missing")]) == 2
    clean = _folder(tmp_path / "clean", _clean_rows(3))
    assert main(["audit", str(clean), "--reference", str(tmp_path / "no-kb.jsonl")]) == 2
    assert main(["audit", str(clean), "--json", "/proc/no/claims.json"]) == 2       # before any work
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"opgen: error: DATASET {tmp_path / 'missing'} does not exist"
    assert err[1] == f"opgen: error: KernelBench reference not found: {tmp_path / 'no-kb.jsonl'}"
    assert err[2].startswith("opgen: error: cannot write --json /proc/no/claims.json") and len(err) == 3
