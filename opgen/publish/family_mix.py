"""The family mix of a set of tasks: how many tasks use each operator family, and each adjacent family pair."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from opgen.vocab.families import families_of


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


def share(count: int, total: int) -> str:
    return f"{100 * count / max(1, total):.1f}%"
