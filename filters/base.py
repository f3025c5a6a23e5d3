"""The verdict type, the reason codes of SPEC.md §3, and the base class every filter derives from."""

from __future__ import annotations

from dataclasses import dataclass, field

REASONS = (
    "parse_error", "invalid_task", "unsafe_code", "stochastic_op", "exec_error", "crash", "timeout",
    "compile_error", "compile_mismatch", "nondeterministic", "non_finite", "degenerate_output",
    "runtime_out_of_range", "trivial", "duplicate", "contaminated",
)


@dataclass
class Verdict:
    """What a filter says of one record: keep it, or the one reason it is rejected, plus metrics."""

    keep: bool
    reason: str | None = None
    metrics: dict = field(default_factory=dict)
    detail: str | None = None

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

    def line(self, record: dict) -> dict:
        """The verdict line of SPEC.md §4: source, id, keep, reason, then metrics (and detail)."""
        out = {"source": record.get("source", record.get("id")), "id": record.get("id"), "keep": self.keep,
               "reason": self.reason}
        out.update(self.metrics)
        if self.detail:
            out["detail"] = self.detail[:500]
        return out


class Filter:
    """A cheap per-record filter: subclasses set `name` and implement `filter(record) -> Verdict`."""

    name: str = "filter"

    def filter(self, record: dict) -> Verdict:  # pragma: no cover - interface
        raise NotImplementedError
