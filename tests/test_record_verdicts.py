"""scripts/analysis/record_verdicts.py replay: a build's recorded execute verdicts judged again, each changed one
reported (exit 1), out-of-memory rows skipped, unfinished shards ignored, bad input one line (exit 2)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "analysis"))

from record_verdicts import main, recorded_from_build, replay_rows  # noqa: E402

from opgen.jsonl import write_jsonl  # noqa: E402
from opgen.pipeline.state import save_state  # noqa: E402

SET = Path(__file__).parent / "verdicts" / "candidates.jsonl"
CONFIG = {"device": "cpu", "seed": 0, "timeout_s": 60.0, "memory_mb": 4096, "runtime_window_ms": [1.0, 100.0]}
CUDA_OOM = "OutOfMemoryError: CUDA out of memory. Tried to allocate 16.00 GiB."


def candidate(name: str) -> dict:
    """A candidate of the committed set, by its bad task's file name."""
    rows = [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines()]
    return next(row for row in rows if row["source"] == f"tests/bad_tasks/{name}.py")


def row(record: dict, reason: str | None, stage: str, **extra) -> dict:
    return {"id": record["id"], "source": record["id"], "keep": reason is None, "reason": reason, "stage": stage,
            **extra}


def fake_run(root: Path) -> dict[str, dict]:
    """A run folder of two shards: shard 0 finished (a right verdict, a wrong one, one that ran out of GPU
    memory), shard 1 in flight (a wrong verdict, no marker). Returns its candidates by name."""
    named = {name: candidate(name) for name in ("trivial__times_one", "non_finite__log_negative",
                                                "exec_error__raises", "stochastic_op__hidden_getattr")}
    root.mkdir()
    (root / "config.json").write_text(json.dumps(CONFIG), encoding="utf-8")
    finished, in_flight = root / "shards" / "00000", root / "shards" / "00001"
    write_jsonl(finished / "candidates.jsonl", [named[n] for n in ("trivial__times_one", "non_finite__log_negative",
                                                                   "exec_error__raises")])
    write_jsonl(finished / "execute.jsonl", [
        row(named["trivial__times_one"], "trivial", "trivial", worker_s=6.0, worker_lock_wait_s=2.0),
        row(named["non_finite__log_negative"], None, "compile", worker_s=10.0, worker_lock_wait_s=4.0),
        row(named["exec_error__raises"], "exec_error", "eager", detail=CUDA_OOM, memory_retry="fresh worker")])
    for marker in ("static.done", "execute.done"):   # a state holds a shard's candidates once static is done
        (finished / marker).write_text("{}", encoding="utf-8")
    write_jsonl(in_flight / "candidates.jsonl", [named["stochastic_op__hidden_getattr"]])
    write_jsonl(in_flight / "execute.jsonl", [row(named["stochastic_op__hidden_getattr"], None, "compile")])
    return named


def test_a_changed_verdict_is_reported_and_exits_1_out_of_memory_rows_skipped(tmp_path, capsys):
    named = fake_run(tmp_path / "run")
    assert main(["replay", str(tmp_path / "run"), "--workers", "1"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("record_verdicts: 3 recorded verdicts, 1 skipped (out of memory when recorded), 2 replayed on "
                      "cpu: 1 the same, 1 changed")
    assert len(out) == 3
    changed = named["non_finite__log_negative"]["id"]
    assert out[1].startswith(f"  changed: {changed} (shards/00000): recorded kept after compile, "
                             "now non_finite at finite: draw 0")
    # how fast the two ran alone, beside what their build's rows say they took (8 worker-seconds, 3 of them waiting)
    assert re.fullmatch(r"record_verdicts: the checks alone: 2 candidates in [0-9.]+ s with 1 workers \([0-9.]+ a "
                        r"minute\); worker-seconds a candidate [0-9.]+, 0\.00 of them waiting for the GPU's lock "
                        r"\(recorded: 8\.00, 3\.00\)", out[2])


def test_recorded_verdicts_replay_the_same(tmp_path, capsys):
    write_jsonl(tmp_path / "set.jsonl", [candidate("trivial__identity"), candidate("non_finite__log_negative")])
    assert main(["record", str(tmp_path / "set.jsonl"), "--device", "cpu", "--workers", "1"]) == 0
    expected = json.loads((tmp_path / "expected_cpu.json").read_text(encoding="utf-8"))
    assert expected["settings"] == {"device": "cpu", "seed": 0, "draws": 3, "timeout_s": 120.0, "memory_mb": 4096,
                                    "runtime_window_ms": None}
    verdicts = [(v["reason"], v["stage"]) for v in expected["verdicts"]]
    assert verdicts == [("trivial", "trivial"), ("non_finite", "finite")]
    assert main(["replay", "--candidates", str(tmp_path / "set.jsonl"),
                 "--verdicts", str(tmp_path / "expected_cpu.json"), "--workers", "1"]) == 0
    summary, pace = capsys.readouterr().out.splitlines()[-2:]
    assert summary.endswith("2 replayed on cpu: 2 the same, 0 changed")
    assert pace.startswith("record_verdicts: the checks alone: 2 candidates in ")


def test_a_state_file_reads_as_its_run_folder(tmp_path):
    fake_run(tmp_path / "run")
    (tmp_path / "run" / "logs").mkdir()
    save_state(tmp_path / "run", tmp_path / "run.state")
    from_folder, from_state = recorded_from_build(tmp_path / "run"), recorded_from_build(tmp_path / "run.state")
    assert from_state.rows == from_folder.rows and len(from_folder.rows) == 3
    assert from_state.candidates == from_folder.candidates and from_state.settings == from_folder.settings
    assert from_folder.settings.runtime_window_ms is None   # a CPU build's execute stage applies no window


def test_a_sample_takes_every_rejection_first_then_kept_rows_spread_out():
    rows = [{"id": str(i), "reason": "trivial" if i in (3, 7) else None, "stage": "x"} for i in range(10)]
    assert [r["id"] for r in replay_rows(rows, 4)] == ["0", "3", "5", "7"]
    assert [r["id"] for r in replay_rows(rows, 1)] == ["3"]
    assert replay_rows(rows, None) == rows


@pytest.mark.parametrize("args, message", [
    (["replay", "{tmp}/missing"], "not a run folder or a state file"),
    (["replay", "{tmp}"], "is not an opgen run folder (no config.json)"),
    (["replay", "{tmp}/garbage.state"], "is not an opgen build state"),
    (["replay", "--candidates", str(SET)], "replay needs a run folder or state file"),
    (["replay", "--candidates", str(SET), "--verdicts", "{tmp}/other.jsonl"], "recorded verdicts name no candidate"),
    (["replay", "{tmp}/run", "--device", "cuda"], "the verdicts were recorded on cpu"),
    (["replay", "{tmp}/run", "--sample", "0"], "--sample must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    fake_run(tmp_path / "run")
    (tmp_path / "garbage.state").write_text("not a state\n", encoding="utf-8")
    write_jsonl(tmp_path / "other.jsonl", [{"id": "ops-0000000000000000", "reason": None, "stage": "compile"}])
    assert main([arg.replace("{tmp}", str(tmp_path)) for arg in args]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1 and captured.err.startswith("record_verdicts: error: ")
    assert message in captured.err
