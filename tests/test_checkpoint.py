"""Resumable `opgen validate` / `opgen time`: the chunk log, and a real kill -9 followed by a rerun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from opgen.checkpoint import ChunkLog, inputs_identity, run_in_chunks
from opgen.cli import main

REPO = Path(__file__).resolve().parents[1]
RECORDS = [{"id": f"t{i}", "code": f"x = {i}"} for i in range(7)]


def _double(calls: list):
    def process(chunk: list[dict]) -> tuple[list[dict], dict]:
        calls.append([r["id"] for r in chunk])
        return [{"id": r["id"], "twice": 2 * int(r["id"][1:])} for r in chunk], {"n": len(chunk)}
    return process


def test_run_in_chunks_reuses_logged_chunks_and_computes_the_rest(tmp_path):
    log = ChunkLog(tmp_path / "o", inputs_identity(RECORDS, command="test"))
    log.append(0, [{"id": "t0", "twice": 0}, {"id": "t1", "twice": 2}], {"n": 2})
    log.append(4, [{"id": "t4", "twice": 8}, {"id": "t5", "twice": 10}], {"n": 2})
    calls: list = []
    lines, extras, reused = run_in_chunks(RECORDS, 2, _double(calls), log, "t", False)
    assert calls == [["t2", "t3"], ["t6"]] and reused == 4
    assert [line["twice"] for line in lines] == [0, 2, 4, 6, 8, 10, 12]
    assert extras == [{"n": 2}, {"n": 2}, {"n": 2}, {"n": 1}]
    calls.clear()
    again, _, reused = run_in_chunks(RECORDS, 2, _double(calls), log, "t", False)
    assert calls == [] and reused == 7 and again == lines


def test_the_log_goes_where_the_output_will(tmp_path):
    log = ChunkLog(tmp_path / "new" / "folder" / "out.jsonl", inputs_identity(RECORDS, command="test"))
    log.append(0, [{"id": "t0"}])
    assert list(log.load()) == [0] and log.path.parent == tmp_path / "new" / "folder"


def test_a_line_cut_by_a_kill_is_dropped_and_the_log_stays_appendable(tmp_path):
    identity = inputs_identity(RECORDS, command="test")
    log = ChunkLog(tmp_path / "o", identity)
    log.append(0, [{"id": "t0"}, {"id": "t1"}])
    with open(log.path, "a") as handle:
        handle.write('{"start": 2, "lines": [{"id": "t2"}')  # the write the kill interrupted
    assert list(log.load()) == [0]
    log.append(2, [{"id": "t2"}, {"id": "t3"}])
    assert list(ChunkLog(tmp_path / "o", identity).load()) == [0, 2]


def test_a_log_of_other_inputs_or_options_is_discarded(tmp_path):
    log = ChunkLog(tmp_path / "o", inputs_identity(RECORDS, command="test", seed=0))
    log.append(0, [{"id": "t0"}])
    assert ChunkLog(tmp_path / "o", inputs_identity(RECORDS, command="test", seed=1)).load() == {}
    assert not log.path.exists()
    changed = [dict(RECORDS[0], code="x = 99"), *RECORDS[1:]]
    assert inputs_identity(changed, command="test") != inputs_identity(RECORDS, command="test")


TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)

    def forward(self, x):
        return torch.tanh(self.linear(x)) * {scale}


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
"""


def _inputs(path: Path) -> Path:
    """Six tasks: four that run (two workers' worth of compiles) and two the static chain rejects."""
    records = [{"id": f"good{k}", "code": TASK.format(scale=k + 2)} for k in range(4)]
    records.insert(1, {"id": "unsafe", "code": "import os\n" + TASK.format(scale=1)})
    records.insert(4, {"id": "broken", "code": "def Model(:\n"})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _validate(inputs: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "opgen", "validate", "--input", str(inputs), "--out", str(out), "--workers", "2",
            "--no-progress", *extra]


def _verdicts(path: Path) -> list[tuple]:
    return [(v["id"], v["keep"], v["reason"]) for v in map(json.loads, path.read_text().splitlines())]


@pytest.mark.heavy
def test_validate_killed_after_a_chunk_resumes_to_the_same_verdicts(tmp_path):
    inputs = _inputs(tmp_path / "in.jsonl")
    out = tmp_path / "v.jsonl"
    partial = Path(f"{out}.partial")
    proc = subprocess.Popen(_validate(inputs, out, "--chunk-size", "2"), cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if partial.is_file() and len(partial.read_text().splitlines()) >= 2:  # identity + one chunk
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert partial.is_file() and not out.exists(), "the kill should land after the first chunk, before the end"
    logged = len(partial.read_text().splitlines()) - 1

    resumed = subprocess.run(_validate(inputs, out, "--chunk-size", "2"), cwd=REPO, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed {2 * logged} of 6 verdicts" in resumed.stderr
    assert not partial.exists()

    reference = tmp_path / "ref.jsonl"   # uninterrupted, in this process: the same command, no second start-up
    assert main(_validate(inputs, reference)[3:]) == 0
    assert _verdicts(out) == _verdicts(reference)
    assert [reason for _, _, reason in _verdicts(out)] == [None, "unsafe_code", None, None, "parse_error", None]
    table = resumed.stderr[resumed.stderr.index("stage"):]
    assert "total" in table and "unsafe_code" in table and "parse_error" in table
