"""scripts/gpu/short_tasks.py: the grader's GPU runs draw their tasks from the shortest quarter of a build's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "gpu"))

from short_tasks import main  # noqa: E402


def _tasks(path: Path, eager_ms: list[float | None]) -> Path:
    pq.write_table(pa.Table.from_pylist([{"id": f"t{i}", "code": f"# task {i}\n", "eager_ms": ms}
                                         for i, ms in enumerate(eager_ms)]), path)
    return path


def test_the_draw_is_from_the_shortest_quarter_and_the_same_for_a_seed(tmp_path, capsys):
    tasks = _tasks(tmp_path / "tasks.parquet", [float(100 - i) for i in range(40)] + [None])  # t39 the shortest
    out = tmp_path / "short.jsonl"
    assert main([str(tasks), "--out", str(out), "--n", "6", "--seed", "3"]) == 0
    first = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(first) == 6 and {record["id"] for record in first} <= {f"t{i}" for i in range(30, 40)}
    assert all(record["code"] == f"# task {record['id'][1:]}\n" and set(record) == {"id", "code"} for record in first)
    assert main([str(tasks), "--out", str(out), "--n", "6", "--seed", "3"]) == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == first
    assert main([str(tasks), "--out", str(out), "--n", "60"]) == 0   # at most the quarter's ten
    assert len(out.read_text().splitlines()) == 10
    assert capsys.readouterr().out.splitlines()[-1] == f"10 tasks to {out}"


def test_no_timed_task_or_no_file_is_one_line_and_exit_2(tmp_path, capsys):
    untimed = _tasks(tmp_path / "untimed.parquet", [None, None])
    assert main([str(untimed), "--out", str(tmp_path / "a.jsonl")]) == 2
    assert main([str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "b.jsonl")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(line.startswith("short_tasks: error: ") for line in err)
    assert not (tmp_path / "a.jsonl").exists() and not (tmp_path / "b.jsonl").exists()
