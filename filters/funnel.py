"""The funnel: per filter stage, how many records it saw, kept, rejected per reason, and the seconds it took."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


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
    """Mergeable, JSON-serialisable counts of a filter chain (`a + b`, `to_dict()`, `from_dict()`, `table()`)."""

    def __init__(self) -> None:
        self.inputs = 0
        self.stages: dict[str, StageCount] = {}

    def declare(self, stages: tuple[str, ...] | list[str]) -> None:
        """Create empty stages in this order, so tables list stages in chain order whatever ran first."""
        for name in stages:
            self.stages.setdefault(name, StageCount())

    def count_input(self, n: int = 1) -> None:
        self.inputs += n

    def record(self, stage: str, keep: bool, reason: str | None = None, seconds: float = 0.0) -> None:
        """One record went through `stage`: kept, or rejected for `reason`; `seconds` spent on it."""
        count = self.stages.setdefault(stage, StageCount())
        count.seen += 1
        count.seconds += seconds
        if keep:
            count.kept += 1
        else:
            count.rejected[reason or "unknown"] += 1

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

    def table(self) -> str:
        """A fixed-width printout: one row per stage, then the totals per reason."""
        rows = [f"{'stage':<20} {'seen':>7} {'kept':>7} {'rejected':>9} {'seconds':>10}  reasons"]
        for name, count in self.stages.items():
            reasons = ", ".join(f"{r}={n}" for r, n in count.rejected.most_common())
            rows.append(f"{name:<20} {count.seen:>7} {count.kept:>7} {sum(count.rejected.values()):>9} "
                        f"{count.seconds:>10.2f}  {reasons}")
        rows.append(f"{'total':<20} {self.inputs:>7} {self.kept:>7} {sum(self.rejected.values()):>9}")
        for reason, n in self.rejected.most_common():
            rows.append(f"  {reason:<24} {n:>7}")
        return "\n".join(rows)
