"""Memory pressure: a task that runs out of memory beside other workers is judged again alone."""

from __future__ import annotations

from pathlib import Path

from filters import validate
from opgen.sandbox.pool import SandboxResult, out_of_memory

BAD = Path(__file__).parent / "bad_tasks"


def test_out_of_memory_is_recognised():
    oom = SandboxResult("ok", {"reason": "exec_error", "detail": "OutOfMemoryError: CUDA out of memory."}, "")
    limit = SandboxResult("crash", None, "memory limit exceeded: 5000 MB resident > 4096 MB")
    other = SandboxResult("ok", {"reason": "exec_error", "detail": "RuntimeError: shape mismatch"}, "")
    segfault = SandboxResult("crash", None, "worker died (signal 11)")
    # what a library allocation (cuBLAS workspace, a CUDA context) raises instead of OutOfMemoryError
    accelerator = SandboxResult("ok", {"reason": "exec_error", "detail": "AcceleratorError: CUDA error: out of memory"}, "")
    assert all(out_of_memory(r, "detail") for r in (oom, limit, accelerator))
    assert not out_of_memory(other, "detail") and not out_of_memory(segfault, "detail")


def test_memory_hog_is_rejudged_alone_and_still_crashes(monkeypatch):
    calls: list[int] = []
    real_pool = validate.SandboxPool

    def counting_pool(workers, *args, **kwargs):
        calls.append(workers)
        return real_pool(workers, *args, **kwargs)

    monkeypatch.setattr(validate, "SandboxPool", counting_pool)
    hog = (BAD / "crash__huge_allocation.py").read_text()
    good = (BAD.parent / "bad_tasks" / "trivial__identity.py").read_text()
    lines = validate.execute_verdicts([{"id": "hog", "code": hog}, {"id": "other", "code": good}], workers=2,
                                      timeout_s=60, memory_mb=2048)
    assert calls == [2, 1]  # the first pass, then the hog alone
    assert lines[0]["reason"] == "crash" and "memory" in lines[0]["detail"]
    assert lines[1]["reason"] == "trivial"


def test_timing_recognises_out_of_memory_results():
    oom = SandboxResult("ok", {"timing_status": "error",
                               "timing_error": "eager: AcceleratorError: CUDA error: out of memory"}, "")
    fine = SandboxResult("ok", {"timing_status": "ok", "timing_error": None}, "")
    broken = SandboxResult("ok", {"timing_status": "error", "timing_error": "eager: RuntimeError: shape"}, "")
    crashed = SandboxResult("crash", None, "worker exited with status 70")
    assert out_of_memory(oom, "timing_error")
    assert not any(out_of_memory(r, "timing_error") for r in (fine, broken, crashed))
