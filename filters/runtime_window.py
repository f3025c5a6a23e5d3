"""The runtime window: a timed task whose eager median lies outside [lo_ms, hi_ms] is `runtime_out_of_range`."""

from __future__ import annotations

from filters.base import Filter, Verdict

# A task that failed to time is rejected with the reason its timing status names.
_FAILURE_REASONS = {"timeout": "timeout", "crash": "crash", "error": "exec_error"}


class RuntimeWindow(Filter):
    """Keep a record whose CUDA eager median is within [lo_ms, hi_ms] (CUDA-Agent: 1–100 ms).

    A record timed on the CPU (`timing_device` "cpu", the CI path) or not timed at all is kept and marked
    `runtime_window: "not_applied"` unless `apply_to_cpu` is set: CPU times say nothing of the GPU window.
    """

    name = "runtime_window"

    def __init__(self, lo_ms: float = 1.0, hi_ms: float = 100.0, *, apply_to_cpu: bool = False):
        if not 0 <= lo_ms < hi_ms:
            raise ValueError(f"runtime window needs 0 <= lo_ms < hi_ms, got [{lo_ms}, {hi_ms}]")
        self.lo_ms = lo_ms
        self.hi_ms = hi_ms
        self.apply_to_cpu = apply_to_cpu

    def filter(self, record: dict) -> Verdict:
        if "timing_status" not in record or (record.get("timing_device") == "cpu" and not self.apply_to_cpu):
            return Verdict.ok(runtime_window="not_applied")
        eager_ms = record.get("eager_ms")
        if eager_ms is None:
            status = record.get("timing_status") or "error"
            return Verdict.reject(_FAILURE_REASONS.get(status, "exec_error"), record.get("timing_error"))
        if self.lo_ms <= eager_ms <= self.hi_ms:
            return Verdict.ok(eager_ms=eager_ms)
        return Verdict.reject("runtime_out_of_range",
                              f"eager median {eager_ms:.4g} ms outside [{self.lo_ms:g}, {self.hi_ms:g}] ms",
                              eager_ms=eager_ms)
