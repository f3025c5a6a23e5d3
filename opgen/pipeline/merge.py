"""Several finished builds as one dataset (`opgen publish RUN_A RUN_B ...`): a focused build tops up an earlier one.

Each build's rows are deduplicated and decontaminated with the build's own dedup (`filters.dedup.near.run_dedup`)
against the rows kept from the builds before it, which always survive: exact, near and family-chain duplicates
across builds are dropped, so every id of the merged dataset is unique.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from filters.base import Funnel, Verdict
from filters.dedup.near import run_dedup
from opgen.errors import UsageError
from opgen.outcome import outcome_of
from opgen.pipeline.config import chain_cap, load_reference_index
from opgen.publish.folder import load_run
from opgen.records import dataset_table

MERGE_STAGE = "merge"
SAME_IN_EVERY_BUILD = ("profile", "device")   # rows of a CPU smoke build and a GPU build are not one dataset


@dataclass
class MergedRuns:
    """The merged rows, stats.json and config.json standing for the whole (the first build's config), and what
    each build gave (`sources`: run, config, rows, kept, duplicate, contaminated)."""

    table: pa.Table
    stats: dict
    config: dict
    sources: list[dict]


def _merged_cap(configs: list[dict], rows: int) -> int:
    """Tasks kept at most per family chain: none when a build had no cap, else what a build of all the rows would
    keep (and never fewer than any build kept)."""
    caps = [c.get("max_per_chain") for c in configs]
    if any(cap == 0 for cap in caps):
        return 0
    return max([chain_cap(rows), *(cap for cap in caps if cap)])


def _merged_stats(loaded: list[tuple[list[dict], dict, dict]], kept: list[dict], merge: Funnel,
                  sources: list[dict]) -> dict:
    """stats.json of the merge: the builds' funnels and counts added up, plus the merge stage."""
    funnel = merge
    rejected: Counter = Counter(merge.rejected)
    by_source: dict[str, dict] = {}
    for _, stats, _ in loaded:
        funnel = Funnel.from_dict(stats["funnel"]) + funnel
        rejected.update(stats.get("rejected", {}))
        for source, info in stats.get("by_source", {}).items():
            entry = by_source.setdefault(source, {"quota": 0, "tasks": 0, "candidates": 0, "survivors": 0})
            for key in ("quota", "candidates", "survivors"):
                entry[key] += info.get(key, 0)
    tasks = Counter(row["data_source"] for row in kept)
    for source, entry in by_source.items():
        entry["tasks"] = tasks[source]
    first = loaded[0][1]
    built = [outcome_of(stats) for _, stats, _ in loaded]
    return {"outcome": {key: sum(counts[key] for counts in built) for key in built[0]},   # the builds', before the merge
            "tasks": len(kept), "wanted": sum(s["config"]["n"] for s in sources),
            "candidates": sum(s.get("candidates", 0) for _, s, _ in loaded),
            "survivors": sum(s.get("survivors", 0) for _, s, _ in loaded),
            "surplus": sum(s.get("surplus", 0) for _, s, _ in loaded),
            "rounds": sum(s.get("rounds", 0) for _, s, _ in loaded),
            "rejected": dict(sorted(rejected.items())), "by_source": by_source, "funnel": funnel.to_dict(),
            "contamination_threshold": first.get("contamination_threshold", 0.65), "merged": sources}


def merge_runs(run_dirs: list[str | Path], reference: str | None = None) -> MergedRuns:
    """The rows of the builds in `run_dirs`, in order, each build's deduplicated and decontaminated against the
    rows kept before it (KernelBench: `reference`, else the first build's). Builds of another profile or device
    than the first, or a folder named twice, are a UsageError."""
    paths = [Path(p) for p in run_dirs]
    if len({p.resolve() for p in paths}) < len(paths):
        raise UsageError("a run folder is named twice: each build's rows would be dropped as duplicates of its own")
    loaded = [load_run(path) for path in paths]
    first = loaded[0][2]
    for path, (_, _, config) in zip(paths[1:], loaded[1:]):
        for key in SAME_IN_EVERY_BUILD:
            if config.get(key) != first.get(key):
                raise UsageError(f"{path} was built with --{key} {config.get(key)}, {paths[0]} with --{key} "
                                 f"{first.get(key)}: publish builds of one {key} together")
    index = load_reference_index(reference or first.get("reference"))
    cap = _merged_cap([config for _, _, config in loaded], sum(len(rows) for rows, _, _ in loaded))
    kept: list[dict] = []
    ids: set[str] = set()
    merge = Funnel([MERGE_STAGE])
    sources = []
    for path, (rows, _, config) in zip(paths, loaded):
        verdicts = run_dedup(rows, reference=index, existing=kept, max_per_chain=cap).verdicts
        counts: Counter = Counter()
        for row, verdict in zip(rows, verdicts):
            keep, reason = verdict["keep"], verdict["reason"]
            if keep and row["id"] in ids:   # two codes with one id: never seen, but ids must stay unique
                keep, reason = False, "duplicate"
            merge.count(Verdict(keep, reason, stages=[(MERGE_STAGE, 0.0)]))
            counts[reason if not keep else "kept"] += 1
            if keep:
                kept.append(row)
                ids.add(row["id"])
        sources.append({"run": path.name, "path": str(path), "config": config, "rows": len(rows),
                        "kept": counts["kept"], "duplicate": counts["duplicate"],
                        "contaminated": counts["contaminated"]})
    return MergedRuns(dataset_table(kept), _merged_stats(loaded, kept, merge, sources), first, sources)
