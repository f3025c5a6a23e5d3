"""The keeper of a confined worker: nothing a solution starts outlives the worker that ran it.

A confined worker's process splits in two before it reads its first request (`split`): the keeper, which runs no
task code and is not confined, and the worker, its child, in a process group of its own (so a solution's
`kill(0, ...)` reaches the worker's group, never the keeper). The keeper is a child subreaper
(`PR_SET_CHILD_SUBREAPER`): a process that leaves its parent behind (fork, `setsid`, fork again) is re-parented to
the keeper, not to init, so every process the worker starts stays beneath the keeper. The pool ends those left
beneath it after every task (opgen/sandbox/pool.py); once the worker exits, however it exits, the keeper ends them
itself and exits as the worker did. Linux 3.4 and later; elsewhere the worker runs unsplit, and says so.

The keeper also outlives no grader: it watches the worker's request pipe, and once nobody can write to it (the
grader killed, or its pool closed) it gives the worker GRACE_S to end by itself (an idle worker reads the end of its
requests and exits), then ends the worker's group. A solution that hangs in a grade whose grader was killed (a
trainer's crash) is ended with it, not left holding a core or a GPU.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import select
import signal
import threading
import time
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 2.0   # how long a worker whose requests have ended may take to exit by itself


def _become_subreaper() -> bool:
    name = ctypes.util.find_library("c")
    if not name:
        return False
    libc = ctypes.CDLL(name, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def split() -> bool:
    """Split this process into a keeper and the worker; returns in the worker (True: it is kept) or, where the
    machine has no subreapers, in the unsplit process (False). The keeper never returns."""
    if not _become_subreaper():
        return False
    worker = os.fork()
    if worker == 0:
        os.setpgid(0, 0)
        return True
    requests = os.dup(0)   # read never: watched for the moment no one can write to it
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):   # the protocol's pipes are the worker's: the pool hears their end when the worker's go
        os.dup2(devnull, fd)
    os.close(devnull)
    threading.Thread(target=_end_with_the_requests, args=(requests, worker), daemon=True).start()
    _keep(worker)
    return False   # never reached


def _end_with_the_requests(requests: int, worker: int) -> None:
    """Once the request pipe's every writer is gone, GRACE_S for the worker to exit; then end its group."""
    watch = select.poll()
    watch.register(requests, 0)   # no event asked for: poll reports the hang-up alone, never waiting data
    while not any(mask & (select.POLLHUP | select.POLLERR | select.POLLNVAL) for _, mask in watch.poll()):
        pass
    time.sleep(GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(worker, signal.SIGKILL)


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` (its threads' children alike)."""
    found = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                found += [int(child) for child in (task / "children").read_text().split()]
    return found


def end_children() -> None:
    """SIGKILL every process beneath this one and reap it: the children first, then whatever is re-parented here
    as they die, until none is left."""
    me = os.getpid()
    while True:
        for child in children_of(me):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(child, signal.SIGKILL)
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _keep(worker: int) -> None:
    """Reap what is re-parented here until the worker exits; then end every process left and exit as it did."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a Ctrl-C is the grader's to handle, and it ends the worker
    status = 0
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == worker:
            break
    end_children()
    if os.WIFSIGNALED(status):
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)
