"""An agent's work folder (`opgen workdir`): made for a task file and for a dataset row, it holds what the agent needs
(SKILL.md with the rule, the tolerance, every input size and the baselines), and its own commands compile, verify and
profile a solution written as a C++ CPU extension, through opgen's grading protocol."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from opgen.agent.folder import main as folder_main
from opgen.cli import main
from tests.conftest import REPO
from tests.kernel_solutions import BROKEN, HONEST, LINEAR_GELU, WRONG

FILES = {"SKILL.md", "task.py", "task.json", "model_new.py", "compile.py", "verify.py", "profiling.py"}


def folder_command(folder: Path, script: str, *args: str, builds: Path) -> subprocess.CompletedProcess:
    """`python SCRIPT ARGS` run as an agent runs it, from inside the folder."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPGEN_EXTENSIONS_DIR": str(builds), "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, script, *args], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("agent") / "linear_gelu"
    assert main(["workdir", "--task", str(LINEAR_GELU), "--out", str(folder), "--device", "cpu"]) == 0
    return folder


def test_the_folder_holds_the_task_the_skill_and_a_starting_solution(workdir):
    assert {path.name for path in workdir.iterdir()} == FILES
    assert (workdir / "task.py").read_text() == LINEAR_GELU.read_text()
    spec = json.loads((workdir / "task.json").read_text())
    assert spec["kernels_only"] is True and (spec["atol"], spec["rtol"]) == (0.01, 0.01)
    assert [c["name"] for c in spec["configs"]] == ["published", "held_out_1", "held_out_2"]
    assert spec["held_out_sizes"] == [c["sizes"] for c in spec["configs"][1:]] and spec["held_out_sizes"][0]
    skill = (workdir / "SKILL.md").read_text()
    for config in spec["configs"]:   # every input size it is checked at, the held-out ones too, with shapes
        assert f"| `{config['name']}` |" in skill
        assert f"`{tuple(config['inputs'][0]['shape'])}` float32" in skill
    assert "**atol = 0.01, rtol = 0.01**" in skill and "Kernels only." in skill
    assert "python compile.py" in skill and "python verify.py" in skill and "python profiling.py" in skill
    assert "No baseline timings were recorded" in skill and "**3**" in skill
    assert "class ModelNew(nn.Module)" in (workdir / "model_new.py").read_text()


def test_the_starting_solution_is_correct_but_breaks_the_rule(workdir, kernel_builds, capsys, monkeypatch):
    monkeypatch.setenv("OPGEN_EXTENSIONS_DIR", str(kernel_builds))
    assert folder_main("verify", workdir, ["--device", "cpu"]) == 1
    report = capsys.readouterr().out
    assert report.startswith("FAIL (torch_operator)") and "aten::addmm" in report and "aten::gelu" in report
    assert "Next: replace each PyTorch operator" in report


def test_a_cpp_extension_compiles_verifies_and_profiles_through_the_folders_commands(workdir, kernel_builds, capsys,
                                                                                    monkeypatch):
    """compile and verify in this process (what the folder's scripts call), profiling.py as the agent runs it."""
    monkeypatch.setenv("OPGEN_EXTENSIONS_DIR", str(kernel_builds))
    (workdir / "model_new.py").write_text(HONEST)
    assert folder_main("compile", workdir, ["--device", "cpu"]) == 0
    built = capsys.readouterr().out
    assert built.startswith("Built on a CPU worker") and "opgen_test_kernels" in built, built
    assert folder_main("verify", workdir, ["--device", "cpu"]) == 0
    verified = capsys.readouterr().out
    assert verified.startswith("PASS: model_new.py is correct on 5 input draws of each configuration "
                               "(published, held_out_1, held_out_2)"), verified
    assert "The kernels-only rule holds" in verified
    profiled = folder_command(workdir, "profiling.py", "--device", "cpu", "--no-compile-baseline", "--json",
                              builds=kernel_builds)
    assert profiled.returncode == 0, profiled.stdout + profiled.stderr
    grade = json.loads(profiled.stdout)
    assert grade["reason"] == "ok" and grade["solution_ms"] > 0 and grade["eager_ms"] > 0
    assert grade["reward"] in (1.0, 2.0) and grade["compile_ms"] is None
    solution, reference = grade["breakdown"]["solution"], grade["breakdown"]["reference"]
    assert solution["outside_ms"] > 0   # the extension's own loop runs outside any PyTorch operator
    assert {row["name"] for row in solution["rows"]} <= {"aten::empty", "aten::contiguous"}
    assert "aten::gelu" in {row["name"] for row in reference["rows"]}


def test_a_failure_says_where_and_what_to_do(workdir, kernel_builds, capsys, monkeypatch):
    monkeypatch.setenv("OPGEN_EXTENSIONS_DIR", str(kernel_builds))
    (workdir / "model_new.py").write_text(WRONG)
    assert folder_main("verify", workdir, ["--device", "cpu"]) == 1
    report = capsys.readouterr().out
    assert report.startswith("FAIL (mismatch)") and "What failed: published draw 0: output 0:" in report
    assert "That configuration's inputs: the task's own sizes; input shapes (4, 16)" in report
    assert "Next: if only held_out_* configurations fail" in report
    (workdir / "model_new.py").write_text(BROKEN)
    assert folder_main("compile", workdir, ["--device", "cpu"]) == 1
    report = capsys.readouterr().out
    assert report.startswith("FAILED (compile_error)") and "error: expected" in report


def test_a_dataset_row_brings_its_baselines_and_held_out_sizes(tmp_path, capsys):
    row = {"id": "t-linear", "code": LINEAR_GELU.read_text(), "eager_ms": 1.25, "compile_ms": 0.75,
           "hardware": "NVIDIA H100 80GB HBM3", "held_out_sizes": json.dumps([{"batch": 7}])}
    dataset = tmp_path / "tasks.jsonl"
    dataset.write_text(json.dumps(row) + "\n")
    folder = tmp_path / "work"
    assert main(["workdir", "--dataset", str(dataset), "--id", "t-linear", "--out", str(folder), "--device",
                 "cpu"]) == 0
    skill = (folder / "SKILL.md").read_text()
    assert "**NVIDIA H100 80GB HBM3**" in skill and "eager **1.25 ms**" in skill and "**0.75 ms**" in skill
    assert "| `held_out_1` | `batch=7` | `(7, 16)` float32 | `(7, 32)` float32 |" in skill
    assert json.loads((folder / "task.json").read_text())["held_out_sizes"] == [{"batch": 7}]
    capsys.readouterr()
    assert main(["workdir", "--dataset", str(dataset), "--id", "t-linear", "--out", str(folder)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err


@pytest.mark.parametrize("args, named", [
    (["workdir", "--out", "{tmp}/w"], "give either --task, or --dataset with --id"),
    (["workdir", "--task", "{tmp}/missing.py", "--out", "{tmp}/w"], "--task {tmp}/missing.py does not exist"),
    (["workdir", "--dataset", "{tmp}/missing.jsonl", "--id", "x", "--out", "{tmp}/w"],
     "--dataset {tmp}/missing.jsonl does not exist"),
])
def test_bad_input_is_one_line_and_exit_2(args, named, tmp_path, capsys):
    assert main([arg.format(tmp=tmp_path) for arg in args]) == 2
    assert capsys.readouterr().err.splitlines() == [f"opgen: error: {named.format(tmp=tmp_path)}"]


def test_the_folders_commands_have_help_and_refuse_a_folder_that_is_not_one(tmp_path, capsys):
    for command in ("compile", "verify", "profile"):
        with pytest.raises(SystemExit) as stop:
            folder_main(command, tmp_path, ["--help"])
        assert stop.value.code == 0 and capsys.readouterr().out.startswith("usage: python ")
    assert folder_main("verify", tmp_path, []) == 2
    assert "is not a work folder: task.py is missing" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        folder_main("verify", tmp_path, ["--bogus"])
    assert stop.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1
