"""scripts/analysis/execute_since.py: the execute workers' seconds in the shards a later preview of a build executed
beyond an earlier one, apart from the shards before."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "analysis"))
from execute_since import main  # noqa: E402


def _shard(run: Path, name: str, rows: list[dict], compile_s: float) -> None:
    """A shard whose execute stage finished: its verdict lines and its marker with the compile check's seconds."""
    folder = run / "shards" / name
    folder.mkdir(parents=True)
    folder.joinpath("execute.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    stages = {"compile": {"seen": len(rows), "kept": len(rows), "rejected": {}, "seconds": compile_s * len(rows)}}
    folder.joinpath("execute.done").write_text(json.dumps({"funnel": {"stages": stages}}))


def _row(name: str, seconds: float, wait: float = 0.0, **extra) -> dict:
    return {"id": name, "keep": True, "worker_s": seconds, "worker_lock_wait_s": seconds / 4, "memory_wait_s": wait,
            **extra}


def test_the_new_shards_are_measured_apart_from_the_old(tmp_path, capsys):
    old, new = tmp_path / "old" / "run", tmp_path / "new" / "run"
    for run in (old, new):
        _shard(run, "00000", [_row("a", 8.0), _row("b", 8.0)], compile_s=3.0)
    _shard(new, "00001", [_row("c", 12.0, wait=6.0, memory_retry="kept worker", memory_waited_out=True,
                               memory_retry_lost_s=2.5),
                          _row("d", 10.0)], compile_s=5.0)
    assert main([str(old), str(new), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    before, since = report["before"], report["since"]
    assert (before["candidates"], since["candidates"]) == (2, 2)
    assert before["worker_s_mean"] == 8.0 and since["worker_s_mean"] == 11.0
    assert before["check_s_per_candidate"] == {"compile": 3.0} and since["check_s_per_candidate"] == {"compile": 5.0}
    assert since["memory_wait_s"] == 6.0 and since["memory_wait_share"] == round(6 / 22, 4)
    assert since["retry_lost_s"] == 2.5 and before["retry_lost_s"] == 0.0
    assert (since["retry_shards"], since["retried_worker_s_mean"], before["retry_shards"]) == (1, 12.0, 0)
    assert since["waited_out"] == 1 and since["memory_retry"] == {"kept worker": 1}
    assert before["lock_wait_share"] == since["lock_wait_share"] == 0.25

    # a later preview must hold every shard the earlier one executed
    assert main([str(new), str(old)]) == 2
    assert "not a later preview" in capsys.readouterr().err


def test_the_lock_holds_and_the_wait_by_task_size(tmp_path, capsys):
    """Where the verdict lines count the checks' holds of the GPU's lock (CUDA), the report says how many a
    candidate took, how many waited and how long, and the lock wait by band of the shared-GPU eager median (the
    median measured before a pass alone, where there was one)."""
    old, new = tmp_path / "old" / "run", tmp_path / "new" / "run"
    for run in (old, new):
        _shard(run, "00000", [_row("a", 8.0)], compile_s=3.0)
    holds = {"worker_lock_holds": 20, "worker_lock_holds_waited": 5, "worker_lock_held_s": 2.0}
    _shard(new, "00001", [_row("b", 8.0, eager_ms_cuda=3.0, worker_lock_hold_max_s=0.5, worker_pid=1,
                               worker_lock_hold_max_check="degenerate", **holds),
                          _row("c", 16.0, eager_ms_cuda=40.0, eager_ms_cuda_shared=250.0, worker_lock_hold_max_s=1.5,
                               worker_pid=2, worker_lock_hold_max_check="runtime", **holds),
                          _row("d", 12.0, eager_ms_cuda=30.0, worker_lock_hold_max_s=0.1, worker_pid=1,
                               worker_lock_hold_max_check="degenerate", **holds)],
           compile_s=5.0)
    assert main([str(old), str(new), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["before"]["lock_holds"] == {} and report["before"]["measured_alone"] == {}
    assert report["since"]["measured_alone"] == {"candidates": 1, "shared_over_alone": {"min": 6.25, "median": 6.25,
                                                                                         "max": 6.25}}
    holds = report["since"]["lock_holds"]
    assert holds["candidates"] == 3 and holds["holds_per_candidate"] == 20.0 and holds["waited_share"] == 0.25
    assert holds["wait_s_per_waited_hold"] == round((2.0 + 4.0 + 3.0) / 15, 3)
    assert holds["held_share"] == round(6.0 / 36.0, 4)
    assert holds["longest_hold_s"] == {"median": 0.5, "p90": 0.5, "max": 1.5}
    assert holds["longest_hold_check"] == {"degenerate": 0.667, "runtime": 0.333}
    assert report["since"]["lock_wait_by_eager_ms"] == {"<5": {"candidates": 1, "lock_wait_s_mean": 2.0},
                                                        "<60": {"candidates": 1, "lock_wait_s_mean": 3.0},
                                                        ">=60": {"candidates": 1, "lock_wait_s_mean": 4.0}}
    # the lane's two workers: 20 s and 16 s of candidates, so the shard's span is 20 s of two workers
    assert report["since"]["lane_busy_share"] == 0.9
    assert main([str(old), str(new), "--lane-workers", "4"]) == 0
    assert "lanes busy 0.45 of their shards' span" in capsys.readouterr().out
    assert main([str(old), str(new)]) == 0
    assert "lock wait a candidate by shared-GPU eager ms: <5 2.0 s (1), <60 3.0 s (1), >=60 4.0 s (1)" in capsys.readouterr().out

