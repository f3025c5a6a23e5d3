"""Compare two build run folders: the dataset rows (id, code, ops, data_source) and every verdict (keep, reason).

    python scripts/compare_builds.py RUN_A RUN_B

Measured times may differ; anything else that differs is printed, and the exit status is 1. Run folders
written before verdict lines carried `sample_index` are joined by position, as those builds joined them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

ROW_COLUMNS = ("id", "code", "ops", "data_source")


def _rows(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _keyed(lines: list[dict], indices: list[int]) -> dict[int, dict]:
    if lines and "sample_index" not in lines[0]:
        return dict(zip(indices, lines))
    return {line["sample_index"]: line for line in lines}


def verdicts(run: Path) -> dict[tuple[str, int], tuple[bool, str | None]]:
    """(stage, sample index) -> (keep, reason), over every round and shard of the run."""
    out: dict[tuple[str, int], tuple[bool, str | None]] = {}
    for plan_path in sorted(run.glob("rounds/*/plan.json")):
        shards = [run / "shards" / f"{s['shard']:05d}" for s in json.loads(plan_path.read_text())["shards"]]
        candidates = {shard: [c["sample_index"] for c in _rows(shard / "candidates.jsonl")] for shard in shards}
        static = {shard: _keyed(_rows(shard / "static.jsonl"), candidates[shard]) for shard in shards}
        static_kept = [i for shard in shards for i in candidates[shard] if static[shard][i]["keep"]]
        dedup = _keyed(_rows(plan_path.parent / "dedup.jsonl"), static_kept)
        for shard in shards:
            executable = [i for i in candidates[shard] if static[shard][i]["keep"] and dedup[i]["keep"]]
            execute = _keyed(_rows(shard / "execute.jsonl"), executable)
            timing = _keyed(_rows(shard / "timing.jsonl"), [i for i in executable if execute[i]["keep"]])
            for stage, lines in (("static", static[shard]), ("execute", execute), ("timing", timing)):
                out.update({(stage, i): (line["keep"], line["reason"]) for i, line in lines.items()})
        out.update({("dedup", i): (line["keep"], line["reason"]) for i, line in dedup.items()})
    return out


def main(a: str, b: str) -> int:
    run_a, run_b = Path(a), Path(b)
    rows_a = pq.read_table(run_a / "tasks.parquet", columns=list(ROW_COLUMNS)).to_pylist()
    rows_b = pq.read_table(run_b / "tasks.parquet", columns=list(ROW_COLUMNS)).to_pylist()
    problems = []
    if rows_a != rows_b:
        problems.append(f"dataset rows differ: {len(rows_a)} vs {len(rows_b)} rows, "
                        f"{sum(x != y for x, y in zip(rows_a, rows_b))} positions differ")
    verdicts_a, verdicts_b = verdicts(run_a), verdicts(run_b)
    for key in sorted(set(verdicts_a) | set(verdicts_b)):
        if verdicts_a.get(key) != verdicts_b.get(key):
            problems.append(f"verdict {key}: {verdicts_a.get(key)} vs {verdicts_b.get(key)}")
    print(f"{len(rows_a)} rows, {len(verdicts_a)} verdicts compared")
    print("\n".join(problems) if problems else "identical: ids, code, ops, data_source, verdicts and reasons")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
