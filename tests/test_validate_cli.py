"""`opgen validate` end to end: verdict lines in input order, a funnel table, exit 2 on bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_main

REPO = Path(__file__).resolve().parents[1]
GOOD = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n)

    def forward(self, x):
        return torch.tanh(self.linear(x)) * 2


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
"""


def test_missing_input_is_exit_2_with_one_line(tmp_path, capsys):
    result = run_main(capsys, "validate", "--input", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "v.jsonl"))
    assert result.returncode == 2
    assert "input not found" in result.stderr and "Traceback" not in result.stderr


def test_malformed_jsonl_line_is_named(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"code": GOOD}) + "\n{not json\n")
    result = run_main(capsys, "validate", "--input", str(path), "--out", str(tmp_path / "v.jsonl"))
    assert result.returncode == 2 and f"{path}:2" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("flag", [["--workers", "0"], ["--runtime-window", "5"], ["--runtime-window", "9,1"]])
def test_bad_options_are_exit_2(tmp_path, flag, capsys):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"code": GOOD}) + "\n")
    result = run_main(capsys, "validate", "--input", str(path), "--out", str(tmp_path / "v.jsonl"), *flag)
    assert result.returncode == 2 and "Traceback" not in result.stderr


@pytest.mark.heavy
def test_folder_of_tasks_gives_one_verdict_each_in_order(tmp_path, capsys):
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "a_good.py").write_text(GOOD)
    (folder / "b_broken.py").write_text("class Model(:\n")
    (folder / "c_identity.py").write_text(GOOD.replace("torch.tanh(self.linear(x)) * 2", "x"))
    # a task that asks for CUDA on a CPU run fails by itself: no machine fault, the other tasks judged
    (folder / "d_cuda.py").write_text(GOOD.replace("torch.tanh(self.linear(x)) * 2", "torch.tanh(self.linear(x.cuda()))"))
    out, funnel_path = tmp_path / "verdicts.jsonl", tmp_path / "funnel.json"
    result = run_main(capsys, "validate", "--input", str(folder), "--out", str(out), "--workers", "1", "--timeout",
                      "300", "--funnel", str(funnel_path), "--device", "cpu")   # as a process: tests/test_checkpoint.py
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(line["source"], line["keep"], line["reason"]) for line in lines] == [
        ("a_good.py", True, None), ("b_broken.py", False, "parse_error"), ("c_identity.py", False, "trivial"),
        ("d_cuda.py", False, "exec_error")]
    assert lines[0]["output_shape"] == [4, 8] and lines[0]["compile_s"] > 0 and "eager_ms_cpu" in lines[0]
    assert "stage" in result.stderr and "parse_error" in result.stderr
    funnel = json.loads(funnel_path.read_text())
    assert funnel["inputs"] == 4 and funnel["kept"] == 1
