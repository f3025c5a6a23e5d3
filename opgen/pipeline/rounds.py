"""Round planning: per-source quotas of the target mix, how many candidates the next round draws, selection."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass


def quotas(n: int, mix: dict[str, float]) -> dict[str, int]:
    """Split `n` over the sources of `mix` by the largest remainder method (ties broken by source name)."""
    total = sum(mix.values())
    if n < 0 or total <= 0:
        raise ValueError("quotas need n >= 0 and a mix with positive weight")
    exact = {source: n * weight / total for source, weight in mix.items()}
    counts = {source: math.floor(value) for source, value in exact.items()}
    left = n - sum(counts.values())
    by_remainder = sorted(exact, key=lambda s: (-(exact[s] - counts[s]), s))
    for source in by_remainder[:left]:
        counts[source] += 1
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class Segment:
    """A range of sample indices drawn with one forced data source (None: drawn from the mix)."""

    source: str | None
    start: int
    count: int


def first_round(n: int, oversample: float) -> list[Segment]:
    """Round 0: `n * oversample` candidates drawn from the mix."""
    return [Segment(None, 0, max(1, math.ceil(n * oversample)))]


def next_round(start: int, wanted: dict[str, int], survivors: Counter, candidates: Counter,
               oversample: float, max_count: int) -> list[Segment]:
    """Segments for the sources still short of their quota, sized by each source's survival rate so far.

    `survivors` and `candidates` count per data source over the previous rounds; a source never drawn
    borrows the overall rate. Indices continue from `start`, so no index is ever drawn twice.
    """
    overall = (sum(survivors.values()) + 1) / (sum(candidates.values()) + 2)
    segments = []
    for source in sorted(wanted):
        deficit = wanted[source] - survivors[source]
        if deficit <= 0:
            continue
        rate = (survivors[source] + 1) / (candidates[source] + 2) if candidates[source] else overall
        count = min(max_count, max(deficit, math.ceil(deficit * oversample / max(rate, 0.05))))
        segments.append(Segment(source, start, count))
        start += count
    return segments


def select(survivors: list[dict], wanted: dict[str, int]) -> tuple[list[dict], list[dict]]:
    """The dataset: survivors in sample-index order, the first `wanted[source]` of each source; and the surplus."""
    taken: Counter = Counter()
    chosen, surplus = [], []
    for record in sorted(survivors, key=lambda r: r["sample_index"]):
        source = record["data_source"]
        if taken[source] < wanted.get(source, 0):
            taken[source] += 1
            chosen.append(record)
        else:
            surplus.append(record)
    return chosen, surplus
