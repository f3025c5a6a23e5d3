"""Shared fixtures: paths to the offline KernelBench copy and a helper to run opgen's CLI in a subprocess."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from kernels_ref import resolve_reference

REPO = Path(__file__).resolve().parents[1]
# Inductor checks each vector ISA the CPU lists by building and loading a probe in a subprocess, 1.2 s in every new
# process that compiles on the CPU (901 s for the suite with it, 848 s without); the CPU's own list picks the same
# ISA where the compiler builds them all, as on the machines that run the suite. Set before any worker starts (they
# inherit the environment).
os.environ.setdefault("TORCHINDUCTOR_VEC_ISA_OK", "1")
# the tests read KernelBench by the commands' rule (README, "KernelBench"): a local copy, never the Hub
KERNELBENCH = Path(resolve_reference())


@pytest.fixture(scope="session")
def kernelbench_path() -> Path:
    if not KERNELBENCH.exists():
        pytest.fail(f"offline KernelBench copy missing: {KERNELBENCH}")
    return KERNELBENCH


@pytest.fixture(scope="session")
def kernelbench_problems(kernelbench_path) -> list[dict]:
    return [json.loads(line) for line in kernelbench_path.read_text().splitlines() if line.strip()]


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 900):
    """Run `python -m opgen ARGS` and return the CompletedProcess (text mode)."""
    full_env = {**os.environ, "PYTHONWARNINGS": "ignore", **(env or {})}
    return subprocess.run([sys.executable, "-m", "opgen", *args], cwd=cwd or REPO, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def run_main(capsys, *args: str) -> subprocess.CompletedProcess:
    """`opgen ARGS` in this process, its exit status and output as `run_cli` gives them: for the commands' error
    paths, which answer before any work (a subprocess spends seconds importing torch first)."""
    from opgen.cli import main

    capsys.readouterr()
    status = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(["opgen", *args], status, out.out, out.err)


def side_by_side(lane: Callable[[int], None], lanes: tuple[int, ...] = (0, 1), timeout: float = 300) -> None:
    """Run `lane(k)` for every k at once, each in its own thread, and wait for all (as a stage's lanes run)."""
    threads = [threading.Thread(target=lane, args=(k,)) for k in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)


# Where a GPU test writes the figures it measured (one JSON line each) for the benchmark report, when set:
# scripts/gpu/grade.sh sets it to $OUT/figures.jsonl.
FIGURES_ENV = "OPGEN_TEST_FIGURES"
FIGURE_KEYS = ("reason", "reward", "solution_ms", "eager_ms", "compile_ms", "speedup_eager", "speedup_compile",
               "trials", "hardware", "worker_s", "compiled")


def record_figures(test: str, grade: dict) -> None:
    """Append a grade's figures, named by `test`, to the file FIGURES_ENV names (nothing when it is unset)."""
    path = os.environ.get(FIGURES_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"test": test, **{key: grade.get(key) for key in FIGURE_KEYS}}) + "\n")


@contextlib.contextmanager
def made_once(tmp_path_factory, name: str):
    """A folder of the session's that the first test to ask makes, whichever xdist worker runs it: yields (folder,
    whether it is made already) under a lock in the workers' common temporary folder. The caller makes it and
    writes `done` in it; a folder without `done` (a failed try) is emptied for the next."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = (folder / "done").exists()
        if not made:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
        yield folder, made


@pytest.fixture(scope="session")
def kernel_builds(tmp_path_factory) -> Path:
    """One folder of extension builds for the session (every xdist worker's), the tests' shared C++ extension
    (tests/kernel_solutions.py) compiled into it once by the grader's compile stage: every solution that embeds it
    loads this build (a compile is about 25 s of a CI machine's two cores)."""
    from opgen.grading.extensions import compile_stage
    from opgen.grading.run import GradeOptions, payload_for
    from opgen.grading.tasks import task_from_file
    from tests.kernel_solutions import HONEST, LINEAR_GELU, build_tools_or_fail

    build_tools_or_fail()
    with made_once(tmp_path_factory, "extension-builds") as (folder, made):
        root = folder / "builds"
        if not made:
            options = GradeOptions(device="cpu", extensions_dir=str(root))
            payload = payload_for(task_from_file(LINEAR_GELU), HONEST, options, threads=1)
            assert compile_stage([payload], options) == {}, "the shared test extension failed to compile"
            assert [e["name"] for e in payload["compiled"]["extensions"]] == ["opgen_test_kernels"]
            (folder / "done").write_text("")
    return root


# The longest modules first, longest first (seconds each from an empty cache, `--durations`: 395 down to about 28):
# `make test` gives modules to its two workers in this order, and a long one given last keeps one worker busy while
# the other waits; the short ones, in collection order after these, even out the end.
LONGEST_FIRST = ("test_build_stream", "test_validate_bad_tasks", "test_grade", "test_validate_kernelbench_level2",
                 "test_sampler", "test_kernels_only", "test_build", "test_focus", "test_build_state", "test_dtypes",
                 "test_sandbox", "test_publish", "test_outcome", "test_checkpoint", "test_timing",
                 "test_verdicts_unchanged", "test_interrupt", "test_heldout", "test_validate_kernelbench",
                 "test_sandbox_spawn", "test_agent_workdir", "test_vocab_ops", "test_validate_memory")


def pytest_collection_modifyitems(config, items):
    rank = {name: index for index, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.module.__name__.rpartition(".")[2], len(rank)))
