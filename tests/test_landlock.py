"""Workers that run solution code may write files only beneath their scratch and cache folders (Landlock): a
solution cannot rewrite the grader's source or open the grader's memory, however it spells the call; other workers
are not confined, and `OPGEN_SANDBOX_CONFINE=0` turns it off."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import opgen
from opgen.sandbox.confine import CONFINE_ENV
from opgen.sandbox.landlock import gpu_device_present, writable_folders
from opgen.sandbox.pool import SandboxPool

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(opgen.__file__).resolve().parent
LINEAR_GELU = Path(__file__).parent / "grade_corpus" / "tasks" / "linear_gelu.py"


def _landlock_applies() -> bool:
    """Whether this kernel takes a Landlock ruleset: tried in a child process, never in the test's own."""
    probe = "import sys\nfrom opgen.sandbox.landlock import confine_writes\nsys.exit(0 if confine_writes([]) else 1)"
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT).returncode == 0


def _package_is_writable_scratch() -> bool:
    """A checkout beneath the temporary folder (or a cache) is, rightly, writable to a confined worker."""
    return any(PACKAGE.is_relative_to(folder.resolve()) for folder in writable_folders())


pytestmark = [pytest.mark.skipif(not _landlock_applies(), reason="this kernel has no Landlock"),
              pytest.mark.skipif(_package_is_writable_scratch(), reason="the checkout lies beneath a scratch folder")]


def _attempt(action) -> str:
    try:
        action()
        return "allowed"
    except PermissionError:
        return "refused"


def probe_writes(payload: dict) -> dict:
    """Inside a worker: which writes it may make (nothing is written where it is refused)."""
    target = Path(payload["target"])
    with tempfile.TemporaryFile() as scratch:
        scratch.write(b"scratch")
    return {"scratch": "allowed",
            "new file in the package": _attempt(lambda: target.write_text("written")),
            "append to the package's source": _attempt(lambda: open(payload["source"], "a").close()),
            "the parent's memory": _attempt(lambda: open(f"/proc/{os.getppid()}/mem", "r+b").close()),
            "/dev/null": _attempt(lambda: open(os.devnull, "w").close())}


@pytest.fixture
def target():
    path = PACKAGE / f".landlock-probe-{os.getpid()}"
    yield path
    path.unlink(missing_ok=True)


def _probe(target: Path, confined: bool) -> dict:
    with SandboxPool(1, 60, None, confined=confined) as pool:
        [result] = pool.run_many(f"{__name__}:probe_writes",
                                 [{"target": str(target), "source": str(PACKAGE / "version.py")}])
    assert result.status == "ok", result.detail
    return result.value


def test_a_confined_worker_writes_only_beneath_its_scratch(target):
    assert _probe(target, confined=True) == {"scratch": "allowed", "new file in the package": "refused",
                                             "append to the package's source": "refused",
                                             "the parent's memory": "refused", "/dev/null": "allowed"}
    assert not target.exists()


def test_other_workers_write_freely_and_the_environment_can_turn_it_off(target, monkeypatch):
    free = {"scratch": "allowed", "new file in the package": "allowed", "append to the package's source": "allowed",
            "the parent's memory": "allowed", "/dev/null": "allowed"}
    assert _probe(target, confined=False) == free
    target.unlink()
    monkeypatch.setenv(CONFINE_ENV, "0")
    assert _probe(target, confined=True) == free


WRITER = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)
        system = getattr(torch, "o" + "s")                   # a computed name: no scan of the source sees it
        try:   # O_WRONLY | O_CREAT: a module a later reference worker would import
            descriptor = getattr(system, "op" + "en")({target!r}, 0o101, 0o644)
            getattr(system, "wri" + "te")(descriptor, b"raise SystemExit")
        except OSError:
            pass

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))
'''


def test_a_solution_cannot_plant_a_file_in_the_grader_package(target):
    module = target.with_suffix(".py")
    try:
        grade = opgen.grade(solution_code=WRITER.format(target=str(module)), task=LINEAR_GELU, device="cpu")
        assert grade["reason"] == "ok", grade   # an honest model besides: the write failed, nothing else did
        assert not module.exists()
    finally:
        module.unlink(missing_ok=True)


def move_between_folders(payload: dict) -> str:
    """Inside a worker: move a file from one folder of its scratch to another, as Triton's cache does (it compiles
    into a temporary folder, then moves the result into place)."""
    root = Path(tempfile.mkdtemp())
    (root / "built").mkdir()
    (root / "cache").mkdir()
    (root / "built" / "kernel.so").write_bytes(b"\0")
    try:
        os.replace(root / "built" / "kernel.so", root / "cache" / "kernel.so")
        return "moved"
    except OSError as error:
        return f"{type(error).__name__}: {error}"


@pytest.mark.parametrize("skip", ["", "writes"])
def test_a_confined_worker_moves_files_between_its_folders(skip, monkeypatch):
    """Landlock refuses a move to another folder (EXDEV) under any ruleset that grants it nowhere, reads alone
    included: the confinement grants it where the worker may write, and everywhere when its writes are not confined."""
    from opgen.sandbox.confine import SKIP_ENV

    monkeypatch.setenv(SKIP_ENV, skip)
    with SandboxPool(1, 60, None, confined=True) as pool:
        [result] = pool.run_many(f"{__name__}:move_between_folders", [{}])
    assert (result.status, result.value) == ("ok", "moved"), result.detail


def name_a_thread(payload: dict) -> str:
    """Inside a worker: name another of its threads through /proc, as CUDA's start does (pthread_setname_np from the
    thread that made it), and try the same on its parent's main thread."""
    import threading

    ready, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=lambda: (ready.set(), done.wait(10)))
    thread.start()
    ready.wait(10)
    try:
        with open(f"/proc/self/task/{thread.native_id}/comm", "w") as comm:
            comm.write("cuda-EvtHandlr")
        own = open(f"/proc/self/task/{thread.native_id}/comm").read().strip()
    except PermissionError:
        own = "refused"
    finally:
        done.set()
        thread.join()
    return {"own thread": own, "parent": _attempt(lambda: open(f"/proc/{os.getppid()}/comm", "w").close()),
            "own memory": _attempt(lambda: open("/proc/self/mem", "r+b").close())}


def test_a_confined_worker_names_its_own_threads_beside_a_gpu_alone_and_no_other_process_s():
    """CUDA's start names its threads through /proc/self/task/<tid>/comm: beside a GPU a worker may write its own
    /proc entries (its memory file among them); elsewhere none, so no solution writes its memory without ctypes."""
    with SandboxPool(1, 60, None, confined=True) as pool:
        [result] = pool.run_many(f"{__name__}:name_a_thread", [{}])
    assert result.status == "ok", result.detail
    if gpu_device_present():
        assert result.value == {"own thread": "cuda-EvtHandlr", "parent": "refused", "own memory": "allowed"}
    else:
        assert result.value == {"own thread": "refused", "parent": "refused", "own memory": "refused"}
