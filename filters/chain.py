"""The static filter chain (cheapest first, stop at the first rejection) and the funnel it counts into."""

from __future__ import annotations

import time

from filters.base import Filter, Verdict
from filters.funnel import Funnel, StageCount
from filters.parse_check import ParseFilter
from filters.stochastic import StochasticOpFilter
from filters.task_shape import TaskShapeFilter
from filters.unsafe import UnsafeCodeFilter

__all__ = ["STATIC_FILTERS", "Funnel", "StageCount", "run_chain", "static_verdicts"]

STATIC_FILTERS: tuple[Filter, ...] = (ParseFilter(), TaskShapeFilter(), UnsafeCodeFilter(), StochasticOpFilter())


def run_chain(record: dict, filters: tuple[Filter, ...], funnel: Funnel | None = None) -> Verdict:
    """Run `filters` in order on one record; the first rejection ends it."""
    metrics: dict = {}
    for stage in filters:
        start = time.perf_counter()
        verdict = stage.filter(record)
        if funnel is not None:
            funnel.record(stage.name, verdict.keep, verdict.reason, time.perf_counter() - start)
        if not verdict.keep:
            return verdict
        metrics.update(verdict.metrics)
    return Verdict.ok(**metrics)


def static_verdicts(records: list[dict], funnel: Funnel | None = None) -> list[dict]:
    """Verdict lines of the static chain, one per record, in input order."""
    lines = []
    for record in records:
        if funnel is not None:
            funnel.count_input()
        lines.append(run_chain(record, STATIC_FILTERS, funnel).line(record))
    return lines
