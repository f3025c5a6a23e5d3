"""One rule decides which KernelBench a command reads: --reference, else OPGEN_KERNELBENCH, else the local copy beside
the clone or the current folder, else the Hub; an installed copy of opgen run from a clone finds the copy too."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import kernels_ref.load as load
from kernels_ref import HUB_ID, resolve_reference
from opgen.sample.sampler import sample_records
from tests.conftest import REPO


def test_the_rule_s_order(tmp_path, monkeypatch):
    beside = tmp_path / "beside.jsonl"
    monkeypatch.setattr(load, "local_copies", lambda: [tmp_path / "absent.jsonl", beside])
    monkeypatch.delenv("OPGEN_KERNELBENCH", raising=False)
    assert resolve_reference() == HUB_ID                        # nothing here: the Hub
    beside.write_text("")
    assert resolve_reference() == str(beside)                   # the first local copy that exists
    monkeypatch.setenv("OPGEN_KERNELBENCH", "env.jsonl")
    assert resolve_reference() == "env.jsonl"                   # the environment before the copy
    assert resolve_reference("given.jsonl") == "given.jsonl"    # --reference before everything


def test_the_clone_s_copy_is_looked_for_beside_it_and_beside_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    places = load.local_copies()
    assert places[0] == REPO.parent / "shared" / "kernelbench" / "problems.jsonl"   # this clone is a checkout
    assert places[-1] == tmp_path.resolve().parent / "shared" / "kernelbench" / "problems.jsonl"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def installed(tmp_path, kernelbench_problems) -> tuple[Path, dict]:
    """opgen's packages copied where a regular pip install puts them (no checkout around them), a clone folder with a
    two-problem KernelBench copy beside it, and the environment to run the copy with (the Hub unreachable)."""
    site = tmp_path / "site"
    for package in ("opgen", "filters", "kernels_ref"):
        shutil.copytree(REPO / package, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    copy = tmp_path / "shared" / "kernelbench" / "problems.jsonl"
    copy.parent.mkdir(parents=True)
    chosen = [row for row in kernelbench_problems if row["level"] == 2][:2]
    copy.write_text("".join(json.dumps(row) + "\n" for row in chosen))
    (tmp_path / "clone").mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("OPGEN_KERNELBENCH", "HF_HUB_OFFLINE")}
    env.update(PYTHONPATH=str(site), HF_ENDPOINT=f"http://127.0.0.1:{closed_port()}", PYTHONWARNINGS="ignore")
    return tmp_path, env


def test_an_installed_opgen_run_from_the_clone_reads_the_copy_beside_it(installed):
    root, env = installed
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(record) + "\n" for record in sample_records(0, 0, 2)))

    def dedup(cwd: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "opgen", "dedup", "--input", str(tasks), "--out",
                               str(root / "verdicts.jsonl"), "--cache-dir", str(root / "cache")],
                              cwd=cwd, env=env, capture_output=True, text=True, timeout=120)

    found = dedup(root / "clone")
    assert found.returncode == 0, found.stderr
    assert "reference 2 problems" in found.stderr   # the copy beside the clone, not the Hub's 270
    elsewhere = root / "clone" / "deeper"
    elsewhere.mkdir()
    missing = dedup(elsewhere)                      # no copy beside this folder: the Hub, unreachable
    assert missing.returncode == 2 and missing.stderr.startswith(
        "opgen: error: cannot load KernelBench from the Hugging Face Hub")
