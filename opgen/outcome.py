"""What became of a build's candidates, in one vocabulary: the build's summary, stats.json (`outcome`), `opgen
profile` and the dataset card all say it with these words, and the counts add up: candidates = rejected + not judged
+ survivors, survivors = tasks + surplus."""

from __future__ import annotations

# key -> what it counts; the keys are stats.json's `outcome`, and the words the summaries print
MEANING = {
    "candidates": "drawn by the sampler",
    "rejected": "turned down by a filter, each for one reason (the table below)",
    "unjudged": "in shards skipped once their source's quota was met (in a build under way, also those not reached "
                "yet)",
    "survivors": "passed every filter",
    "tasks": "in the dataset: each source's first survivors by sample index, up to its quota",
    "surplus": "survivors beyond their source's quota, left out of the dataset",
}
WORD = {"unjudged": "not judged"}   # a key printed otherwise than it is spelt


def outcome(candidates: int, rejected: int, survivors: int, tasks: int) -> dict[str, int]:
    """The outcome counts of a build that drew `candidates`, rejected `rejected` of them and kept `survivors`, of which
    `tasks` are in its dataset; the rest are not judged, and the survivors left out are surplus."""
    return {"candidates": candidates, "rejected": rejected, "unjudged": candidates - rejected - survivors,
            "survivors": survivors, "tasks": tasks, "surplus": survivors - tasks}


def outcome_of(stats: dict) -> dict[str, int]:
    """A stats.json's outcome: its own `outcome`, else (a build written before there was one) worked out from its
    counts the same way."""
    if "outcome" in stats:
        return stats["outcome"]
    return outcome(stats["candidates"], sum(stats.get("rejected", {}).values()), stats["survivors"],
                   stats["survivors"] - stats.get("surplus", 0))


def word(key: str) -> str:
    """How `key` is printed."""
    return WORD.get(key, key)


def outcome_line(counts: dict[str, int]) -> str:
    """One line: `88 candidates: 24 rejected, 16 not judged, 48 survivors (passed every filter): 40 tasks, 8 surplus`."""
    return (f"{counts['candidates']:,} candidates: {counts['rejected']:,} rejected, {counts['unjudged']:,} "
            f"{word('unjudged')}, {counts['survivors']:,} survivors (passed every filter): {counts['tasks']:,} "
            f"tasks, {counts['surplus']:,} surplus")
