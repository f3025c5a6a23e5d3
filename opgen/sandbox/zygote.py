"""The zygote: a preloaded interpreter that forks sandbox workers, so each starts with torch already imported.

A fresh worker spends about 4 CPU seconds on `import torch`, dynamo and inductor and on inductor's probes of the
CPU before its first compile; a worker forked from here spends none of that. The zygote runs as
`python -m opgen.sandbox.worker --zygote FD` (so every worker it forks says `opgen.sandbox.worker` in its command
line, as a fresh one does) and speaks over the socket FD, one message a packet: the parent sends
`{"id", "env"}` with the new worker's stdin, stdout and stderr as passed descriptors; the zygote answers
`{"spawned": pid, "id"}`, and `{"exited": pid, "code"}` when it reaps one (its workers are its children). The
forked child leaves the zygote's loop set up as a fresh worker: its own session, those three descriptors, the
environment it was sent, its thread count, fresh random seeds, and none of the zygote's descriptors. It never
forks after touching CUDA, so it is used only where no GPU is present (`opgen.sandbox.spawn`).
"""

from __future__ import annotations

import gc
import json
import os
import random
import selectors
import signal
import socket
import sys
import tempfile
import traceback

MAX_MESSAGE = 1 << 20


def preload() -> None:
    """What every worker would import before its first compile, and inductor's choice of vector ISA (a probe that
    compiles and loads a library per ISA, cached for the process)."""
    import torch  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    from torch._inductor import cpu_vec_isa

    cpu_vec_isa.pick_vec_isa()
    gc.collect()
    gc.freeze()   # the preloaded objects: no worker's collections scan them (nor copy their pages doing so)


def _send(control: socket.socket, message: dict) -> None:
    control.send(json.dumps(message).encode())


def serve(control_fd: int) -> None:
    """Preload, then fork one worker per request until the parent closes the socket (then exit). Returns only in a
    forked child, set up to run the worker loop."""
    control = socket.socket(fileno=control_fd)
    try:
        preload()
    except BaseException:  # noqa: BLE001 - the parent falls back to fresh workers and keeps the reason
        _send(control, {"error": traceback.format_exc(limit=5)})
        os._exit(1)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)   # a handler, so the wakeup descriptor hears of every exit
    signal.set_wakeup_fd(wake_write)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    selector.register(wake_read, selectors.EVENT_READ)
    _send(control, {"ready": os.getpid()})
    while True:
        ready = {key.fileobj for key, _ in selector.select()}
        if wake_read in ready:
            while True:
                try:
                    if not os.read(wake_read, 512):
                        break
                except BlockingIOError:
                    break
        _reap(control)
        if control not in ready:
            continue
        message, fds, _, _ = socket.recv_fds(control, MAX_MESSAGE, 3)
        if not message:   # the parent is gone
            os._exit(0)
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            selector.close()
            for fd in (wake_read, wake_write):
                os.close(fd)
            control.close()
            _become_worker(request["env"], fds)
            return
        for fd in fds:
            os.close(fd)
        _send(control, {"spawned": pid, "id": request["id"]})


def _reap(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(control, {"exited": pid, "code": os.waitstatus_to_exitcode(status)})


def paths_read_again() -> None:
    """The paths the preloaded modules took from the zygote's environment, taken again from the worker's: the
    temporary folder (a confined worker's is its own scratch), inductor's precompiled-header folder beneath it, and
    inductor's cache folder."""
    tempfile.tempdir = None
    codecache = sys.modules.get("torch._inductor.codecache")
    if codecache is None:
        return
    if hasattr(codecache, "_HEADER_DIR"):
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        codecache._HEADER_DIR = os.path.join(default_cache_dir(), "precompiled_headers")
        codecache._HEADER_LOCK_DIR = os.path.join(codecache._HEADER_DIR, "locks")
    local_cache = getattr(getattr(codecache, "CacheBase", None), "get_local_cache_path", None)
    if hasattr(local_cache, "cache_clear"):   # inductor's cache folder, as the zygote's environment had it
        local_cache.cache_clear()


def _become_worker(env: dict[str, str], fds: list[int]) -> None:
    """Set this forked child up as `python -m opgen.sandbox.worker` started with `env` and these stdin, stdout and
    stderr would be."""
    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    paths_read_again()
    import torch

    threads = env.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:   # the OpenMP runtime read the zygote's value when torch loaded
        torch.set_num_threads(int(threads))
    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    sys.argv = sys.argv[:1]   # the worker module's path, as `-m` gave it
