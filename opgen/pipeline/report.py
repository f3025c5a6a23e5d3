"""The build's report from its run folder: the merged funnel, and one rejected line per rejected candidate."""

from __future__ import annotations

import json

from filters.base import Funnel
from filters.dedup.near import DEDUP_STAGE
from filters.validate import VALIDATION_STAGES
from filters.window import RuntimeWindow
from opgen.pipeline.rundir import RunDir

SHARD_STAGES = ("static", "execute", "timing")   # per-shard stage files, in pipeline order


def stage_order(device: str) -> list[str]:
    """Funnel stages in pipeline order (static filters, dedup, sandbox and execute checks, the window)."""
    static, execute = VALIDATION_STAGES[:4], VALIDATION_STAGES[4:]
    order = [*static, DEDUP_STAGE, *execute]
    return order + [RuntimeWindow.name] if device == "cuda" else order


def kept_by_key(records: list[dict], verdicts: list[dict]) -> list[dict]:
    """The records whose verdict keeps them, joined on `sample_index` (ids repeat for identical codes)."""
    keep = {v["sample_index"]: v["keep"] for v in verdicts}
    return [r for r in records if keep.get(r["sample_index"])]


def _round_shards(rundir: RunDir, round_index: int) -> list[int]:
    plan = json.loads((rundir.round_dir(round_index) / "plan.json").read_text(encoding="utf-8"))
    return [s["shard"] for s in plan["shards"]]


def funnel_and_rejects(rundir: RunDir, rounds_run: int, device: str) -> tuple[Funnel, list[dict]]:
    """The funnel merged from every stage marker, and each rejected verdict with its round, shard, stage."""
    funnel = Funnel(stage_order(device))
    rejected: list[dict] = []
    for round_index in range(rounds_run):
        folder = rundir.round_dir(round_index)
        if rundir.done(folder, "round") is None:
            break
        funnel += Funnel.from_dict(rundir.done(folder, "dedup")["funnel"])
        shard_of: dict[int, int] = {}
        source_of: dict[int, str] = {}
        lines: list[tuple[str, dict]] = []
        for shard in _round_shards(rundir, round_index):
            shard_folder = rundir.shard_dir(shard)
            for candidate in rundir.rows(shard_folder, "candidates"):
                shard_of[candidate["sample_index"]] = shard
                source_of[candidate["sample_index"]] = candidate["data_source"]
            for stage in SHARD_STAGES:
                marker = rundir.done(shard_folder, stage)
                if marker is not None:
                    funnel += Funnel.from_dict(marker["funnel"])
                    lines += [(stage, v) for v in rundir.rows(shard_folder, stage)]
        lines += [("dedup", v) for v in rundir.rows(folder, "dedup")]
        for stage, verdict in sorted((x for x in lines if not x[1]["keep"]), key=lambda x: x[1]["sample_index"]):
            rejected.append({"id": verdict["id"], "sample_index": verdict["sample_index"],
                             "data_source": source_of[verdict["sample_index"]], "round": round_index,
                             "shard": shard_of[verdict["sample_index"]], "stage": stage, "filter": verdict.get("stage"),
                             "reason": verdict["reason"], "detail": verdict.get("detail"),
                             "duplicate_of": verdict.get("duplicate_of"), "kb_nearest": verdict.get("kb_nearest")})
    return funnel, rejected
