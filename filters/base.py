"""The verdict type, the reason codes (docs/spec.md), the Filter contract, the funnel, and `judge`: the one
function that runs filters and the one place the funnel is counted."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from opgen.errors import TaskProblem

REASONS = (
    "parse_error", "invalid_task", "unsafe_code", "stochastic_op", "exec_error", "crash", "timeout",
    "compile_error", "compile_mismatch", "nondeterministic", "non_finite", "degenerate_output",
    "runtime_out_of_range", "trivial", "duplicate", "contaminated",
)


@dataclass
class Verdict:
    """What the filters say of one record: keep it, or the one reason it is rejected; metrics; and the
    stages that judged it, in order, with their seconds (the last one rejected it, when `keep` is False)."""

    keep: bool
    reason: str | None = None
    metrics: dict = field(default_factory=dict)
    detail: str | None = None
    stages: list[tuple[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.keep and self.reason is not None:
            raise ValueError("a kept record has no reason")
        if not self.keep and self.reason not in REASONS:
            raise ValueError(f"unknown reason code: {self.reason!r}")

    @classmethod
    def ok(cls, **metrics) -> Verdict:
        return cls(True, None, metrics)

    @classmethod
    def reject(cls, reason: str, detail: str | None = None, **metrics) -> Verdict:
        return cls(False, reason, metrics, detail)

    @property
    def stage(self) -> str | None:
        """The stage that rejected the record (or the last one that kept it)."""
        return self.stages[-1][0] if self.stages else None

    def line(self, record: dict) -> dict:
        """The verdict line (docs/spec.md): source, id, sample_index, stage, keep, reason, metrics, detail."""
        out = {"source": record.get("source", record.get("id")), "id": record.get("id")}
        if "sample_index" in record:
            out["sample_index"] = record["sample_index"]
        out.update(stage=self.stage, keep=self.keep, reason=self.reason)
        out.update(self.metrics)
        if self.detail:
            out["detail"] = self.detail[:500]
        return out


class Filter:
    """One rule: `name` (its funnel stage), `error_reason` (the verdict when it raises), `filter(item)`.

    Static filters take a record (a dict with `code`); execute filters take a `TaskRun` inside a sandbox
    worker; the runtime window takes a timed record. All of them run through `judge`.
    """

    name: str = "filter"
    error_reason: str = "exec_error"
    reads: tuple[str, ...] = ()    # execute filters: the TaskRun fields they read ...
    writes: tuple[str, ...] = ()   # ... and those they fill for later filters

    def filter(self, item) -> Verdict:  # pragma: no cover - interface
        raise NotImplementedError


class WrappedFilter(Filter):
    """A filter that runs another (`self.check`) in some context: same name, reasons and fields as the one it wraps."""

    def __init__(self, check: Filter):
        self.check = check
        self.name, self.error_reason = check.name, check.error_reason
        self.reads, self.writes = check.reads, check.writes


def judge(item, filters: Sequence[Filter], funnel: Funnel | None = None) -> Verdict:
    """Run `filters` in order on one item; the first rejection ends it. Metrics of every stage are merged.

    A filter that raises `TaskProblem` rejects with its reason; any other exception with the filter's
    `error_reason`. The verdict lists the stages run, with their seconds, and is counted into `funnel`.
    """
    metrics: dict = {}
    stages: list[tuple[str, float]] = []
    verdict = Verdict.ok()
    for rule in filters:
        start = time.perf_counter()
        try:
            verdict = rule.filter(item)
        except TaskProblem as problem:
            verdict = Verdict.reject(problem.reason, str(problem))
        except BaseException as error:  # noqa: BLE001 - SystemExit raised by task code is an error too
            if isinstance(error, KeyboardInterrupt):
                raise
            verdict = Verdict.reject(rule.error_reason, f"{type(error).__name__}: {error}")
        stages.append((rule.name, time.perf_counter() - start))
        metrics.update(verdict.metrics)
        if not verdict.keep:
            break
    verdict = Verdict(verdict.keep, verdict.reason, metrics, verdict.detail, stages)
    if funnel is not None:
        funnel.count(verdict)
    return verdict


@dataclass
class StageCount:
    """Counts of one filter stage."""

    seen: int = 0
    kept: int = 0
    rejected: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return {"seen": self.seen, "kept": self.kept, "rejected": dict(sorted(self.rejected.items())),
                "seconds": round(self.seconds, 6)}

    @classmethod
    def from_dict(cls, data: dict) -> StageCount:
        return cls(int(data["seen"]), int(data["kept"]), Counter(data.get("rejected", {})), float(data["seconds"]))


class Funnel:
    """Mergeable, JSON-serialisable counts of the filter stages (`a + b`, `to_dict()`, `from_dict()`, `table()`)."""

    def __init__(self, stages: Sequence[str] = ()) -> None:
        self.inputs = 0
        self.stages: dict[str, StageCount] = {name: StageCount() for name in stages}

    def declare(self, stages: Sequence[str]) -> None:
        """Create empty stages in this order, so tables list stages in chain order whatever ran first."""
        for name in stages:
            self.stages.setdefault(name, StageCount())

    def count_input(self, n: int = 1) -> None:
        self.inputs += n

    def count(self, verdict: Verdict) -> None:
        """One record went through `verdict.stages`: every stage kept it but a rejecting last one."""
        for position, (name, seconds) in enumerate(verdict.stages):
            count = self.stages.setdefault(name, StageCount())
            count.seen += 1
            count.seconds += seconds
            if position < len(verdict.stages) - 1 or verdict.keep:
                count.kept += 1
            else:
                count.rejected[verdict.reason or "unknown"] += 1

    def add_seconds(self, stage: str, seconds: float) -> None:
        self.stages.setdefault(stage, StageCount()).seconds += seconds

    @property
    def rejected(self) -> Counter:
        total: Counter = Counter()
        for count in self.stages.values():
            total.update(count.rejected)
        return total

    @property
    def kept(self) -> int:
        return self.inputs - sum(self.rejected.values())

    def __add__(self, other: Funnel) -> Funnel:
        merged = Funnel.from_dict(self.to_dict())
        merged.inputs += other.inputs
        for name, count in other.stages.items():
            mine = merged.stages.setdefault(name, StageCount())
            mine.seen += count.seen
            mine.kept += count.kept
            mine.rejected.update(count.rejected)
            mine.seconds += count.seconds
        return merged

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Funnel) and self.to_dict() == other.to_dict()

    def to_dict(self) -> dict:
        return {"inputs": self.inputs, "kept": self.kept, "rejected": dict(sorted(self.rejected.items())),
                "stages": {name: count.to_dict() for name, count in self.stages.items()}}

    @classmethod
    def from_dict(cls, data: dict) -> Funnel:
        funnel = cls()
        funnel.inputs = int(data.get("inputs", 0))
        funnel.stages = {name: StageCount.from_dict(c) for name, c in data.get("stages", {}).items()}
        return funnel

    def table(self, totals: bool = True) -> str:
        """A fixed-width printout: one row per stage, then (`totals`) the totals per reason."""
        rows = [f"{'stage':<20} {'seen':>7} {'kept':>7} {'rejected':>9} {'seconds':>10}  reasons"]
        for name, count in self.stages.items():
            reasons = ", ".join(f"{r}={n}" for r, n in count.rejected.most_common())
            rows.append(f"{name:<20} {count.seen:>7} {count.kept:>7} {sum(count.rejected.values()):>9} "
                        f"{count.seconds:>10.2f}  {reasons}")
        if not totals:
            return "\n".join(rows)
        rows.append(f"{'total':<20} {self.inputs:>7} {self.kept:>7} {sum(self.rejected.values()):>9}")
        for reason, n in self.rejected.most_common():
            rows.append(f"  {reason:<24} {n:>7}")
        return "\n".join(rows)
