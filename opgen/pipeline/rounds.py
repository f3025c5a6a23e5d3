"""Round planning: per-source quotas of the target mix, how many candidates a round draws, selection.

A source's survival rate (candidate to dataset task) is uncertain: Beta(alpha, beta), starting from the prior
shipped in `survival_prior.json` (by profile and device) and updated with the run's own candidates.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

PRIOR_PATH = Path(__file__).with_name("survival_prior.json")


@dataclass(frozen=True)
class SurvivalPrior:
    """Expected survival per data source (candidate to task), the timing window's share of executed
    survivors, and how many candidates the prior is worth against the run's own counts."""

    candidate: dict[str, float]
    window: float
    strength: float

    def beta(self, source: str) -> tuple[float, float]:
        rate = min(0.98, max(0.02, self.candidate.get(source, self.candidate.get("default", 0.5))))
        return self.strength * rate, self.strength * (1 - rate)


def load_prior(profile: str, device: str, path: Path = PRIOR_PATH) -> SurvivalPrior:
    """The shipped prior for `profile/device` (else its `default` entry)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    entry = data.get(f"{profile}/{device}", data["default"])
    return SurvivalPrior(dict(entry["candidate"]), float(entry.get("window", 1.0)), float(data["strength"]))


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


def next_round(start: int, wanted: dict[str, int], survivors: Mapping[str, float], candidates: Counter,
               oversample: float, max_count: int, prior: SurvivalPrior | None = None) -> list[Segment]:
    """Segments for the sources still short of their quota, sized by each source's survival so far.

    `survivors` (expected survivors: counted, plus predicted for candidates still being timed) and
    `candidates` count per data source over the previous rounds. A source's survival rate is
    Beta(alpha0 + survivors, beta0 + rejected), from `prior`, or without one Beta(1, 1), and a weak prior
    centred on the overall rate for a source never drawn. Each segment is large enough to meet its deficit
    with probability ROUND_CONFIDENCE (a round has a fixed cost, so a few more candidates are cheaper than
    one more round), and at least deficit × oversample / mean rate. Indices continue from `start`, so no
    index is ever drawn twice. Round 0 is this with no survivors and no candidates.
    """
    overall = (sum(survivors.values()) + 1) / (sum(candidates.values()) + 2)
    segments = []
    for source in sorted(wanted):
        deficit = math.ceil(wanted[source] - survivors.get(source, 0) - 1e-9)
        if deficit <= 0:
            continue
        kept, drawn = survivors.get(source, 0), candidates[source]
        if prior is not None:
            alpha0, beta0 = prior.beta(source)
            alpha, beta = alpha0 + kept, beta0 + max(0.0, drawn - kept)
        elif drawn:
            alpha, beta = 1 + kept, 1 + drawn - kept
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


def execution_order(shards: list[tuple[int, str | None]]) -> list[int]:
    """The order to execute a round's shards (given in sample-index order, with the source each draws): every
    source's shards advance at the same pace, shard j of a source's m going at j / m (ties by shard).

    A round draws each source's deficit times a margin, so a source's last shards are the likeliest to be
    surplus: this order runs every source's needed shards before any source's margin, and a source of few
    shards (a rare one) starts early. Taking the sources in turn instead ran a small source's margin before
    a large one's needed shards, and the build waited for those at its end."""
    totals = Counter(source for _, source in shards)
    seen: Counter = Counter()
    keyed = []
    for shard, source in shards:
        keyed.append((seen[source] / totals[source], shard))
        seen[source] += 1
    return [shard for _, shard in sorted(keyed)]


def unneeded_shards(shards: list[tuple[int, str | None]], finished: set[int], survivors: Callable[[int], int],
                    wanted: dict[str, int]) -> list[int]:
    """Shards (in sample-index order, with the source each draws) that cannot add to the dataset: a source's
    quota is already met by the survivors of its earlier shards, all finished. `select` takes each source's first
    survivors by sample index, so a later shard's would only be surplus. Mixed shards (source None) never are."""
    unneeded = []
    for source, quota in wanted.items():
        kept = 0
        for shard, drawn in shards:
            if drawn != source:
                continue
            if kept >= quota:
                unneeded.append(shard)
            elif shard not in finished:
                break
            else:
                kept += survivors(shard)
    return sorted(unneeded)
