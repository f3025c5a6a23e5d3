"""Where a build's realistic compositions go: for each fate of its candidates (in the dataset, surplus, rejected at a
stage for a reason, not judged: the words of opgen/outcome.py), how many there are and the share of their adjacent
family pairs that real models have (the composition prior), beside all candidates and those dedup kept
(docs/composition.md, "What survives")."""

from __future__ import annotations

import json
from collections import defaultdict

from opgen.jsonl import read_jsonl
from opgen.outcome import word
from opgen.pipeline.rundir import RunDir
from opgen.publish.family_mix import prior_pair_share, task_families
from opgen.vocab.prior import CompositionPrior

CANDIDATES, KEPT_BY_DEDUP, TASKS, SURPLUS, UNJUDGED = "candidates", "kept by dedup", "tasks", "surplus", \
    word("unjudged")
FIRST = (CANDIDATES, KEPT_BY_DEDUP, TASKS, SURPLUS)


def survivor_indexes(run: RunDir) -> set[int]:
    """The sample indexes of the candidates that passed every filter: the timing stage's kept (a timed build), else
    the execute stage's."""
    config = json.loads(run.config_path.read_text(encoding="utf-8")) if run.config_path.is_file() else {}
    last = "timing" if config.get("device") == "cuda" or config.get("cpu_timing") else "execute"
    return {line["sample_index"] for shard in sorted(path for path in (run.root / "shards").glob("*") if path.is_dir())
            for line in run.rows(shard, last) if line.get("keep")}


def candidate_fates(run: RunDir) -> dict[str, list[list[str]]]:
    """Family chains by fate: every candidate of the run's shards under `candidates`, then under exactly one of
    `tasks`, `surplus`, `STAGE: REASON` (its rejection) or `not judged`; those dedup kept also under `kept by
    dedup`."""
    import pyarrow.parquet as pq

    published = set(pq.read_table(run.tasks_path, columns=["id"]).column("id").to_pylist()) \
        if run.tasks_path.is_file() else set()
    # exact duplicates share an id: a rejection is the candidate's by its sample index
    rejected = {(row["id"], row.get("sample_index")): f"{row['stage']}: {row['reason']}"
                for row in read_jsonl(run.rejected_path)} if run.rejected_path.is_file() else {}
    survivors = survivor_indexes(run)
    fates: dict[str, list[list[str]]] = defaultdict(list)
    for shard in sorted(path for path in (run.root / "shards").glob("*") if path.is_dir()):
        for row in run.rows(shard, "candidates"):
            chain = task_families(row)
            fate = rejected.get((row["id"], row.get("sample_index")))
            if fate is None:
                fate = TASKS if row["id"] in published else SURPLUS if row.get("sample_index") in survivors \
                    else UNJUDGED
            fates[CANDIDATES].append(chain)
            fates[fate].append(chain)
            if not fate.startswith("dedup:"):
                fates[KEPT_BY_DEDUP].append(chain)
    return fates


def realism_table(fates: dict[str, list[list[str]]], prior: CompositionPrior) -> list[dict]:
    """One row per fate: candidates, adjacent pairs real models have, all adjacent pairs, their share; the
    candidates, those dedup kept, the tasks and the surplus first, then the rest by size."""
    order = list(FIRST) + sorted((fate for fate in fates if fate not in FIRST), key=lambda f: -len(fates[f]))
    rows = []
    for fate in (fate for fate in order if fate in fates):
        real, pairs = prior_pair_share(fates[fate], prior)
        rows.append({"fate": fate, "candidates": len(fates[fate]), "real_pairs": real, "pairs": pairs,
                     "real_share": round(real / pairs, 4) if pairs else None})
    return rows


def realism_markdown(rows: list[dict]) -> str:
    """The realism table as markdown."""
    lines = ["| what became of them | candidates | adjacent family pairs | of them in real models |",
             "|---|---:|---:|---:|"]
    for row in rows:
        share = f"{100 * row['real_share']:.1f}%" if row["real_share"] is not None else "—"
        lines.append(f"| {row['fate']} | {row['candidates']:,} | {row['pairs']:,} | {share} |")
    return "\n".join(lines)
