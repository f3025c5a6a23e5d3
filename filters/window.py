"""The one runtime-window rule: a task whose eager median lies outside [lo_ms, hi_ms] is `runtime_out_of_range`."""

from __future__ import annotations

from dataclasses import dataclass

from filters.base import Filter, Verdict

DEFAULT_WINDOW_MS = (1.0, 100.0)  # CUDA-Agent: eager time on the GPU between 1 ms and 100 ms
# A task that failed to time is rejected with the reason its timing status names.
_FAILURE_REASONS = {"timeout": "timeout", "crash": "crash", "error": "exec_error"}


@dataclass(frozen=True)
class Window:
    """[lo_ms, hi_ms]; `widened(f)` is the same rule with f times the room, for a rough early measurement."""

    lo_ms: float = DEFAULT_WINDOW_MS[0]
    hi_ms: float = DEFAULT_WINDOW_MS[1]

    def __post_init__(self) -> None:
        if not 0 <= self.lo_ms < self.hi_ms:
            raise ValueError(f"runtime window needs 0 <= lo_ms < hi_ms, got [{self.lo_ms}, {self.hi_ms}]")

    def contains(self, ms: float) -> bool:
        return self.lo_ms <= ms <= self.hi_ms

    def widened(self, factor: float) -> Window:
        return Window(self.lo_ms / factor, self.hi_ms * factor)

    def verdict(self, eager_ms: float) -> Verdict:
        if self.contains(eager_ms):
            return Verdict.ok(eager_ms=eager_ms)
        return Verdict.reject("runtime_out_of_range",
                              f"eager median {eager_ms:.4g} ms outside [{self.lo_ms:g}, {self.hi_ms:g}] ms",
                              eager_ms=eager_ms)


class RuntimeWindow(Filter):
    """Keep a timed record whose CUDA eager median is inside the window.

    A record timed on the CPU (`timing_device` "cpu", the CI path) or not timed at all is kept and marked
    `runtime_window: "not_applied"` unless `apply_to_cpu` is set: CPU times say nothing of the GPU window.
    """

    name = "runtime_window"

    def __init__(self, lo_ms: float = DEFAULT_WINDOW_MS[0], hi_ms: float = DEFAULT_WINDOW_MS[1], *,
                 apply_to_cpu: bool = False):
        self.window = Window(lo_ms, hi_ms)
        self.apply_to_cpu = apply_to_cpu

    def filter(self, record: dict) -> Verdict:
        if "timing_status" not in record or (record.get("timing_device") == "cpu" and not self.apply_to_cpu):
            return Verdict.ok(runtime_window="not_applied")
        eager_ms = record.get("eager_ms")
        if eager_ms is None:
            status = record.get("timing_status") or "error"
            return Verdict.reject(_FAILURE_REASONS.get(status, "exec_error"), record.get("timing_error"))
        return self.window.verdict(eager_ms)
