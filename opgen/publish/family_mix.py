"""The family mix of a set of tasks: how many tasks use each operator family, and each adjacent family pair."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from opgen.vocab.families import families_of
from opgen.vocab.prior import CompositionPrior


def task_families(row: dict) -> list[str]:
    """A task's families in call order: its `families` column, else mapped from its `ops`."""
    families = row.get("families")
    return list(families) if families is not None else families_of(row.get("ops") or [])


def family_counts(chains: Iterable[list[str]]) -> Counter:
    """Tasks using each family (a task counts once per family, however often it uses it)."""
    return Counter(family for chain in chains for family in set(chain))


def pair_counts(chains: Iterable[list[str]]) -> Counter:
    """Tasks in which family b directly follows family a, per (a, b) (once per task)."""
    return Counter(pair for chain in chains for pair in set(zip(chain, chain[1:])))


def adjacent_pairs(chains: Iterable[list[str]]) -> list[tuple[str, str]]:
    """Every adjacent family pair of every chain (a task with n operators has n-1)."""
    return [pair for chain in chains for pair in zip(chain, chain[1:])]


def prior_pair_share(chains: Iterable[list[str]], prior: CompositionPrior) -> tuple[int, int]:
    """(adjacent pairs that real models also have, all adjacent pairs) over the chains."""
    pairs = adjacent_pairs(chains)
    return sum(prior.has_pair(a, b) for a, b in pairs), len(pairs)


def share(count: int, total: int) -> str:
    return f"{100 * count / max(1, total):.1f}%"
