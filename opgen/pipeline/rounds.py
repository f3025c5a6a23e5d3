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


ROUND_CONFIDENCE = 0.9


def enough_draws(deficit: int, rate: float, confidence: float = ROUND_CONFIDENCE, limit: int = 10_000) -> int:
    """The fewest draws k with P(Binomial(k, rate) >= deficit) >= confidence (capped at `limit`)."""
    if deficit <= 0:
        return 0
    if rate >= 1.0:
        return deficit
    k = deficit
    while k < limit:
        below = sum(math.exp(math.lgamma(k + 1) - math.lgamma(j + 1) - math.lgamma(k - j + 1)
                             + j * math.log(rate) + (k - j) * math.log1p(-rate)) for j in range(deficit))
        if 1 - below >= confidence:
            return k
        k += max(1, k // 50)
    return limit


def next_round(start: int, wanted: dict[str, int], survivors: Counter, candidates: Counter,
               oversample: float, max_count: int) -> list[Segment]:
    """Segments for the sources still short of their quota, sized by each source's survival rate so far.

    `survivors` and `candidates` count per data source over the previous rounds; a source never drawn
    borrows the overall rate. A small deficit gets enough draws to be met with probability ROUND_CONFIDENCE
    (a round has a fixed cost, so one more candidate is cheaper than one more round). Indices continue
    from `start`, so no index is ever drawn twice.
    """
    overall = (sum(survivors.values()) + 1) / (sum(candidates.values()) + 2)
    segments = []
    for source in sorted(wanted):
        deficit = wanted[source] - survivors[source]
        if deficit <= 0:
            continue
        rate = max((survivors[source] + 1) / (candidates[source] + 2) if candidates[source] else overall, 0.05)
        count = max(deficit, math.ceil(deficit * oversample / rate), enough_draws(deficit, rate))
        count = min(max_count, count)
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
