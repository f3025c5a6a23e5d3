"""scripts/analysis/memory_admission.py: a run's execute checks replayed with each task's GPU memory reserved for its
whole run, against the same workers with no reservation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "analysis"))
from memory_admission import load_tasks, main, memory_rejections, replay  # noqa: E402

GB = 2**30


def _run_folder(root: Path, tasks: list[tuple[str, float, float, int, str | None]]) -> Path:
    """A run folder with one shard: (id, worker_s, bytes moved in GB, peak MB, memory_retry) a task."""
    shard = root / "shards" / "00000"
    shard.mkdir(parents=True)
    shard.joinpath("candidates.jsonl").write_text("".join(
        json.dumps({"id": name, "bytes_moved": moved * GB}) + "\n" for name, _, moved, _, _ in tasks))
    shard.joinpath("execute.jsonl").write_text("".join(
        json.dumps({"id": name, "worker_s": seconds, "gpu_peak_mb": peak,
                    **({"memory_retry": retry} if retry else {})}) + "\n" for name, seconds, _, peak, retry in tasks))
    return root


def test_tasks_that_do_not_fit_together_run_one_after_another(tmp_path, capsys):
    run = _run_folder(tmp_path / "run", [("a", 10.0, 6, 30_000, None), ("b", 10.0, 6, 30_000, None),
                                         ("c", 25.0, 1, 4_000, "fresh worker"), ("d", 10.0, 1, 4_000, None)])
    tasks = load_tasks(run)
    assert [t[0] for t in tasks] == [10.0, 10.0, 10.0, 10.0]   # a fresh worker's start-up left out
    assert replay(tasks, workers=2, budget_mb=float("inf")) == 20.0
    # 4x bytes moved: a and b need 24 GB each, 40 GB fits one of them, so they take turns and c waits behind b
    assert replay(tasks, 2, 40 * 1024, lambda task: 4 * task[1]) == 30.0
    assert replay(tasks, 2, 100 * 1024, lambda task: 4 * task[1]) == 20.0
    assert main([str(run), "--workers", "2", "--budget-gb", "40", "--factor", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("4 candidates, 55 worker-seconds, 0 waiting for the GPU's lock; judged on a retry in a kept "
                        "worker: 0 (0 s, 0 rejected); judged on a retry in a fresh worker: 1 (25 s, 1 rejected); "
                        "peak GPU memory: median 29.3 GB, 90th percentile 29.3 GB")
    assert lines[1] == ("rejected for GPU memory: 0 of 4 candidates (0.0%); bytes moved, median: theirs —, the "
                        "passed candidates' —")
    assert lines[2] == "4 tasks, 2 workers: 20 s with no reservation"
    assert lines[4:] == ["40 | each task's measured peak | 1.50x", "40 | 4x bytes moved | 1.50x"]


def test_the_rejections_for_gpu_memory_are_counted_and_sized_against_the_passed():
    moved = {"a": 6 * 1024.0, "b": 2 * 1024.0, "c": 1024.0, "d": 3 * 1024.0, "e": 10 * 1024.0}
    oom = "OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    rows = [{"id": "a", "keep": False, "detail": oom}, {"id": "b", "keep": True}, {"id": "c", "keep": True},
            {"id": "d", "keep": False, "detail": "trivial: the output is an input unchanged"},
            {"id": "e", "keep": False, "detail": f"determinism: {oom}"}]
    assert memory_rejections(rows, moved) == ("rejected for GPU memory: 2 of 5 candidates (40.0%); bytes moved, "
                                              "median: theirs 10.0 GB, the passed candidates' 2.0 GB")


def test_a_folder_without_verdict_lines_is_one_error_line(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {tmp_path}: no execute verdict lines")
