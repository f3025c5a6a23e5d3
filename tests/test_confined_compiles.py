"""A confined worker compiles one task after another: its scratch, inductor's caches with it, is emptied after every
task, and what inductor remembers of those files (its precompiled headers) goes too."""

from __future__ import annotations

from filters.validate import execute_verdicts
from opgen.sample.sampler import sample_records


def test_a_kept_confined_worker_compiles_task_after_task():
    records = sample_records(0, 0, 3)
    lines = execute_verdicts(records, device="cpu", workers=1, timeout_s=300, memory_mb=None, confined=True,
                             reuse_pool=False)
    assert [line["reason"] for line in lines if line["reason"] == "compile_error"] == [], lines
    assert len({line["worker_pid"] for line in lines}) == 1   # one worker judged all three
