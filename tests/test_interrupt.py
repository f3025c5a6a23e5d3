"""Ctrl-C on a build: the terminal sends SIGINT to its whole process group (the build and its pool workers); the build
stops in one line, no traceback from any process, keeps what it finished, and the same command goes on to the same
dataset."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.test_build import build_args, dataset_rows, reference_build


@pytest.fixture
def reference_run(tmp_path_factory) -> Path:
    return reference_build(tmp_path_factory)   # the session's one uninterrupted build of these options


def markers(run: Path) -> set[str]:
    return {str(path.relative_to(run)) for path in run.rglob("*.done")}


@pytest.mark.heavy
def test_a_first_ctrl_c_stops_a_build_in_one_line_and_the_same_command_goes_on(reference_run, tmp_path):
    run = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "opgen", *build_args(run)], cwd=REPO,
                               env={**os.environ, "PYTHONWARNINGS": "ignore"}, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True,
                               # as a terminal's foreground job: Ctrl-C raises KeyboardInterrupt (not ignored)
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 240
    while not markers(run) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)   # until its first shard is sampled: the pool's workers are up
    finished = markers(run)
    assert finished and process.poll() is None, "the build ended (or never got going) before it could be interrupted"
    os.killpg(process.pid, signal.SIGINT)   # what the terminal does on Ctrl-C
    out, err = process.communicate(timeout=240)
    lines = [line for line in err.splitlines() if line.strip()]
    assert process.returncode == 130, err
    assert "Traceback" not in err and 1 <= len(lines) <= 2, err
    assert lines[-1] == f"opgen: interrupted: {run} keeps every finished stage; the same command goes on from it"
    assert out == "" and finished <= markers(run)   # nothing it had finished was lost
    resumed = run_cli(*build_args(run))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [row["id"] for row in dataset_rows(run)] == [row["id"] for row in dataset_rows(reference_run)]
