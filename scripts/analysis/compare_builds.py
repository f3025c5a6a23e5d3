"""Compare two build run folders: their datasets, and every candidate's fate, so that each difference is explained.

    python scripts/analysis/compare_builds.py RUN_A RUN_B

Prints the dataset rows both publish (id, code, ops, data_source), then each task only one of them publishes
with its fate in the other (not drawn there, rejected at a stage and why, surplus beyond its source's quota,
or in a shard skipped once that quota was met), then the verdicts that differ for candidates both runs
judged. Candidates are matched by id (a hash of their code), so two builds that drew their candidates in
different orders (`--planning rounds` against `survival`) are compared candidate by candidate. Measured
times may differ; the exit status is 1 when the rows or any verdict differ.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from opgen.pipeline.rundir import RunDir  # noqa: E402
from opgen.sandbox.pool import is_out_of_memory  # noqa: E402

ROW_COLUMNS = ("id", "code", "ops", "data_source")
STAGES = ("static", "dedup", "execute", "timing")


@dataclass
class Candidate:
    """One candidate of a run: where it was drawn, and each stage's (keep, reason)."""

    id: str
    source: str | None
    sample_index: int
    verdicts: dict[str, tuple[bool, str | None]] = field(default_factory=dict)
    skipped: bool = False   # its shard was skipped: its source's quota was met by earlier shards


def _keyed(lines: list[dict], indices: list[int]) -> dict[int, dict]:
    """Verdict lines by sample index (lines written before verdicts carried it are joined by position)."""
    if lines and "sample_index" not in lines[0]:
        return dict(zip(indices, lines))
    return {line["sample_index"]: line for line in lines}


def _skipped(run: RunDir, shard: Path) -> bool:
    """Whether the build skipped the shard's execute or timing job (its markers say so)."""
    return any((run.done(shard, stage) or {}).get("skipped") for stage in ("execute", "timing"))


def candidates(root: Path) -> dict[str, Candidate]:
    """Every candidate of the run by id (a code drawn twice keeps its first draw: the later one is a duplicate)."""
    run = RunDir(root)
    found: dict[str, Candidate] = {}
    for plan_path in sorted(root.glob("rounds/*/plan.json")):
        shards = [run.shard_dir(s["shard"]) for s in json.loads(plan_path.read_text())["shards"]]
        drawn = {shard: run.rows(shard, "candidates") for shard in shards}
        static = {shard: _keyed(run.rows(shard, "static"), [c["sample_index"] for c in drawn[shard]])
                  for shard in shards}
        static_kept = [c["sample_index"] for shard in shards for c in drawn[shard]
                       if static[shard][c["sample_index"]]["keep"]]
        dedup = _keyed(run.rows(plan_path.parent, "dedup"), static_kept)
        for shard in shards:
            executable = [c["sample_index"] for c in drawn[shard]
                          if static[shard][c["sample_index"]]["keep"] and dedup[c["sample_index"]]["keep"]]
            execute = _keyed(run.rows(shard, "execute"), executable)
            timing = _keyed(run.rows(shard, "timing"), [i for i in executable if execute.get(i, {}).get("keep")])
            skipped = _skipped(run, shard)
            for record in drawn[shard]:
                index = record["sample_index"]
                candidate = Candidate(record["id"], record.get("data_source"), index, skipped=skipped)
                for stage, lines in (("static", static[shard]), ("dedup", dedup), ("execute", execute),
                                     ("timing", timing)):
                    if index in lines:
                        line = lines[index]
                        reason = line["reason"]
                        if reason and is_out_of_memory(line.get("detail")):
                            reason += ": out of memory"
                        candidate.verdicts[stage] = (line["keep"], reason)
                if record["id"] not in found or index < found[record["id"]].sample_index:
                    found[record["id"]] = candidate
    return found


def fate(candidate: Candidate | None, published: set[str]) -> str:
    """What became of a candidate in a run, in words."""
    if candidate is None:
        return "not drawn"
    if candidate.id in published:
        return "published"
    for stage in STAGES:
        keep, reason = candidate.verdicts.get(stage, (None, None))
        if keep is False:
            return f"rejected at {stage} ({reason})"
    if candidate.verdicts.get("timing", (False,))[0]:
        return "surplus (its source's quota was already met by earlier candidates)"
    if candidate.skipped:
        return "in a skipped shard (its source's quota was met by earlier shards)"
    return "not judged to the end"


def compare(run_a: Path, run_b: Path) -> dict:
    """The figures and differences main() prints."""
    rows_a = pq.read_table(run_a / "tasks.parquet", columns=list(ROW_COLUMNS)).to_pylist()
    rows_b = pq.read_table(run_b / "tasks.parquet", columns=list(ROW_COLUMNS)).to_pylist()
    ids_a, ids_b = {r["id"] for r in rows_a}, {r["id"] for r in rows_b}
    seen_a, seen_b = candidates(run_a), candidates(run_b)
    only = {}
    for name, mine, theirs, their_seen, their_ids in (("a", ids_a, ids_b, seen_b, ids_b),
                                                        ("b", ids_b, ids_a, seen_a, ids_a)):
        only[name] = {task: fate(their_seen.get(task), their_ids) for task in sorted(mine - theirs)}
    differing = []
    for task in sorted(set(seen_a) & set(seen_b)):
        a, b = seen_a[task].verdicts, seen_b[task].verdicts
        for stage in STAGES:
            if stage in a and stage in b and a[stage] != b[stage]:
                differing.append((task, stage, a[stage], b[stage]))
    return {"rows_a": len(rows_a), "rows_b": len(rows_b), "same_rows": rows_a == rows_b,
            "in_both": len(ids_a & ids_b), "only_a": only["a"], "only_b": only["b"], "differing": differing,
            "drawn_a": len(seen_a), "drawn_b": len(seen_b), "drawn_both": len(set(seen_a) & set(seen_b))}


def main(a: str, b: str) -> int:
    report = compare(Path(a), Path(b))
    print(f"A {a}: {report['rows_a']} tasks from {report['drawn_a']} candidates; B {b}: {report['rows_b']} tasks "
          f"from {report['drawn_b']} candidates; {report['drawn_both']} candidates drawn by both")
    print(f"tasks published by both: {report['in_both']}"
          + ("; the rows are identical (id, code, ops, data_source, in order)" if report["same_rows"] else ""))
    for name, other in (("a", "B"), ("b", "A")):
        tasks = report[f"only_{name}"]
        if tasks:
            print(f"only in {name.upper()}: {len(tasks)}; in {other}: "
                  + ", ".join(f"{why} {count}" for why, count in Counter(tasks.values()).most_common()))
            for task, why in tasks.items():
                print(f"  {task}: in {other} {why}")
    print(f"verdicts that differ among candidates both judged: {len(report['differing'])}")
    for task, stage, verdict_a, verdict_b in report["differing"]:
        print(f"  {task} at {stage}: A {verdict_a} B {verdict_b}")
    return 0 if report["same_rows"] and not report["differing"] else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
