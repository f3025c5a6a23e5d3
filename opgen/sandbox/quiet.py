"""A quiet host for a timed run: every other sandbox worker on the machine paused while it holds the GPU alone.

A launch-bound task (a recurrent cell, a chain of tiny kernels) runs at the speed of the host thread that launches
its kernels, so a build's other workers, compiling on every core, slow its CUDA-event time although the GPU is
held alone: on one H100, an `nn.RNN` task timed 7.24 ms in a build ran in 4.21 ms alone. Inside a quiet hold the
other workers' process groups (each sandbox worker leads its own, with the compile processes it starts) are
stopped with SIGSTOP and continued with SIGCONT after. Taken only inside the GPU's exclusive hold, so no stopped
process holds the GPU's lock, and for the short timed section alone. On a machine with several GPUs a worker in
an exclusive hold of another GPU (its timed trials) is left running: it says so in the registry while it holds
one (`holding_exclusive`), and one that took its hold as the others were being stopped is continued at once. A
dead-man's switch, started first in a session of its own, continues them after QUIET_MAX_S should the holder die
inside.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil

QUIET_MAX_S = 120.0   # the longest a quiet hold may keep the others stopped (the dead-man's switch fires after)
WORKER_MODULE = "opgen.sandbox.worker"
_SWITCH = ("import os, signal, sys, time\n"
           "time.sleep(float(sys.argv[1]))\n"
           "for group in sys.argv[2:]:\n"
           "    try:\n"
           "        os.killpg(int(group), signal.SIGCONT)\n"
           "    except OSError:\n"
           "        pass\n")


def registry() -> Path:
    """The folder that lists the machine's live sandbox workers, one empty file named by each one's pid."""
    return Path(tempfile.gettempdir()) / f"opgen-workers-{os.getuid()}"


def register_worker(pid: int) -> None:
    """List a worker (the leader of its own process group) as one a quiet hold pauses."""
    with contextlib.suppress(OSError):
        registry().mkdir(exist_ok=True)
        (registry() / str(pid)).touch()


def unregister_worker(pid: int) -> None:
    with contextlib.suppress(OSError):
        (registry() / str(pid)).unlink()


def _timing_marker(group: int) -> Path:
    return registry() / f"{group}.timing"


@contextlib.contextmanager
def holding_exclusive() -> Iterator[None]:
    """Say, for the time inside, that this process's group holds a GPU alone (its timed trials): a quiet hold
    taken for another GPU leaves it running."""
    marker = _timing_marker(os.getpgid(0))
    try:
        registry().mkdir(exist_ok=True)
        marker.touch()
    except OSError:
        pass
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            marker.unlink()


def _timing_now(groups: list[int]) -> list[int]:
    return [group for group in groups if _timing_marker(group).exists()]


def other_worker_groups() -> list[int]:
    """The process groups of the listed workers that are alive, are opgen sandbox workers leading their group (a
    pid reused by another program is never stopped) and are not this process's own group."""
    own = os.getpgid(0)
    groups = []
    with contextlib.suppress(OSError):
        for entry in registry().iterdir():
            if not entry.name.isdigit() or int(entry.name) == own or _timing_marker(int(entry.name)).exists():
                continue
            pid = int(entry.name)
            try:
                process = psutil.Process(pid)
                if os.getpgid(pid) == pid and WORKER_MODULE in process.cmdline():
                    groups.append(pid)
                    continue
            except (psutil.Error, OSError):
                pass
            with contextlib.suppress(OSError):
                entry.unlink()   # gone, or not ours any more
    return sorted(groups)


def _signal_groups(groups: list[int], signum: int) -> list[int]:
    reached = []
    for group in groups:
        with contextlib.suppress(OSError):
            os.killpg(group, signum)
            reached.append(group)
    return reached


@contextlib.contextmanager
def quiet_host(enabled: bool = True, max_s: float = QUIET_MAX_S) -> Iterator[list[int]]:
    """Hold the host quiet: the other sandbox workers stopped inside, continued on the way out (yields their
    process groups). Nothing when not `enabled`. Take it inside the GPU's exclusive hold only."""
    groups = other_worker_groups() if enabled else []
    if not groups:
        yield []
        return
    switch = subprocess.Popen([sys.executable, "-I", "-S", "-c", _SWITCH, str(max_s), *map(str, groups)],
                              start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    stopped: list[int] = []
    try:
        stopped = _signal_groups(groups, signal.SIGSTOP)
        timing = _timing_now(stopped)   # took another GPU alone as they were being stopped: let it time
        stopped = [group for group in stopped if group not in _signal_groups(timing, signal.SIGCONT)]
        yield stopped
    finally:
        _signal_groups(stopped, signal.SIGCONT)
        switch.kill()
        switch.wait()
