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


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def chance_met(draws: int, deficit: int, alpha: float, beta: float) -> float:
    """P(at least `deficit` of `draws` candidates survive) when the survival rate is Beta(alpha, beta):
    the beta-binomial tail, so a rate estimated from few candidates counts as uncertain."""
    below = sum(math.exp(math.lgamma(draws + 1) - math.lgamma(j + 1) - math.lgamma(draws - j + 1)
                         + _log_beta(j + alpha, draws - j + beta) - _log_beta(alpha, beta))
                for j in range(min(deficit, draws + 1)))
    return 1.0 - below


def enough_draws(deficit: int, alpha: float, beta: float, confidence: float = ROUND_CONFIDENCE,
                 limit: int = 10_000) -> int:
    """The fewest draws (to within 2%) that meet `deficit` with probability `confidence`, capped at `limit`."""
    if deficit <= 0:
        return 0
    draws = deficit
    while draws < limit and chance_met(draws, deficit, alpha, beta) < confidence:
        draws += max(1, draws // 50)
    return min(draws, limit)


def next_round(start: int, wanted: dict[str, int], survivors: Counter, candidates: Counter,
               oversample: float, max_count: int) -> list[Segment]:
    """Segments for the sources still short of their quota, sized by each source's survival so far.

    `survivors` and `candidates` count per data source over the previous rounds. A source's survival rate
    is Beta(1 + survivors, 1 + rejected); a source never drawn gets a weak prior centred on the overall
    rate. Each segment is large enough to meet its deficit with probability ROUND_CONFIDENCE (a round has
    a fixed cost, so a few more candidates are cheaper than one more round), and at least
    deficit × oversample / mean rate. Indices continue from `start`, so no index is ever drawn twice.
    """
    overall = (sum(survivors.values()) + 1) / (sum(candidates.values()) + 2)
    segments = []
    for source in sorted(wanted):
        deficit = wanted[source] - survivors[source]
        if deficit <= 0:
            continue
        if candidates[source]:
            alpha, beta = 1 + survivors[source], 1 + candidates[source] - survivors[source]
        else:
            alpha, beta = 1 + 2 * overall, 1 + 2 * (1 - overall)
        rate = max(alpha / (alpha + beta), 0.05)
        count = max(deficit, math.ceil(deficit * oversample / rate), enough_draws(deficit, alpha, beta))
        segments.append(Segment(source, start, min(max_count, count)))
        start += segments[-1].count
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
