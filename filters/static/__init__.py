"""The static chain: checks that read a task's source without running it, cheapest first."""

from __future__ import annotations

from filters.base import Filter, Funnel, judge
from filters.static.parse import ParseFilter
from filters.static.stochastic import StochasticOpFilter
from filters.static.task_shape import TaskShapeFilter
from filters.static.unsafe import UnsafeCodeFilter

__all__ = ["STATIC_FILTERS", "STAGE_NAMES", "static_verdicts"]

STATIC_FILTERS: tuple[Filter, ...] = (ParseFilter(), TaskShapeFilter(), UnsafeCodeFilter(), StochasticOpFilter())
STAGE_NAMES = tuple(f.name for f in STATIC_FILTERS)


def static_verdicts(records: list[dict], funnel: Funnel | None = None) -> list[dict]:
    """Verdict lines of the static chain, one per record, in input order."""
    lines = []
    for record in records:
        if funnel is not None:
            funnel.count_input()
        lines.append(judge(record, STATIC_FILTERS, funnel).line(record))
    return lines
