"""A timed run's quiet hold pauses every other sandbox worker on the host, resumes them after, and a dead-man's
switch resumes them should the holder never come back."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from opgen.sandbox import quiet
from opgen.sandbox.pool import SandboxPool
from opgen.sandbox.quiet import other_worker_groups, quiet_host, register_worker, unregister_worker

HELPERS = __name__.rpartition(".")[0] + ".test_sandbox_helpers" if "." in __name__ else "test_sandbox_helpers"


def _count(path: Path) -> int:
    for _ in range(50):
        try:
            return int(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.01)
    raise AssertionError(f"no count in {path}")


def _advances(path: Path, wait_s: float = 0.4) -> bool:
    before = _count(path)
    time.sleep(wait_s)
    return _count(path) > before


@pytest.fixture(autouse=True)
def own_registry(tmp_path, monkeypatch):
    """A registry of this test's workers alone: the sandbox workers of tests running beside it are never paused."""
    from opgen.sandbox import quiet

    folder = tmp_path / "registry"
    monkeypatch.setattr(quiet, "registry", lambda: folder)
    return folder


def test_the_other_workers_stop_inside_and_go_on_after(tmp_path):
    """Stopped inside, going on after; one timing on another GPU left alone; the switch when the holder is late."""
    counter, done = tmp_path / "count", tmp_path / "done"
    with SandboxPool(workers=1, timeout_s=60.0, memory_mb=1024) as pool:
        # the worker counts until the test is done with it, however long its steps take on this machine
        busy = threading.Thread(target=pool.run_many, args=(f"{HELPERS}:count_into", [
            {"path": str(counter), "until": str(done), "seconds": 50.0}]))
        busy.start()
        try:
            while not counter.exists():
                time.sleep(0.02)
            [worker] = pool._pool
            assert _advances(counter)
            with quiet_host() as paused:
                assert worker.proc.pid in paused and not _advances(counter)
            assert _advances(counter)
            with quiet_host(enabled=False) as paused:   # a first timing: nobody is paused
                assert paused == [] and _advances(counter)
            timing = quiet.registry() / f"{worker.proc.pid}.timing"   # as its exclusive hold of another GPU says
            timing.touch()
            try:
                with quiet_host() as paused:   # its timed trials on that GPU go on
                    assert worker.proc.pid not in paused and _advances(counter)
            finally:
                timing.unlink()
            with quiet_host(max_s=0.3):   # the holder never comes back in time: the switch resumes them
                time.sleep(0.6)
                assert _advances(counter)
        finally:
            done.touch()
            busy.join()


def test_only_live_opgen_workers_are_paused(tmp_path):
    """A stale entry (a pid now of another program, or gone) is never stopped and is dropped from the registry."""
    import subprocess
    import sys

    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        register_worker(stranger.pid)
        register_worker(2**22 + 17)   # no such process
        assert stranger.pid not in other_worker_groups()
        assert not (quiet.registry() / str(stranger.pid)).exists()
        assert not (quiet.registry() / str(2**22 + 17)).exists()
    finally:
        unregister_worker(stranger.pid)
        stranger.kill()
        stranger.wait()
