"""Start a sandbox worker process: forked from a zygote (opgen/sandbox/zygote.py) where no GPU is present, else fresh.

`start_worker(env, stderr)` returns a `subprocess.Popen` or a `ForkedProcess`, which offers the part of Popen's
interface the pool uses (pid, stdin, stdout, poll, wait, kill, returncode). One zygote serves every worker this
process starts whose environment agrees with it on the variables read while torch is imported (`import_key`); the
others are applied in the forked child. A zygote that cannot start, or dies, leaves its workers' environment to
fresh interpreters, as before. `OPGEN_SANDBOX_FORK=0` starts every worker fresh, `=1` forks even beside a GPU.
Forking is off by default where a GPU is present: a worker forked there has not yet been measured on one.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import psutil

from opgen.sandbox.landlock import SCRATCH_ENV, gpu_device_present
from opgen.sandbox.scratch import SCRATCH_VARIABLES

FORK_ENV = "OPGEN_SANDBOX_FORK"
WORKER_COMMAND = (sys.executable, "-m", "opgen.sandbox.worker")
ZYGOTE_START_S = 180.0   # the zygote's imports: a fresh worker's start-up limit (STARTUP_TIMEOUT_S) and more
SPAWN_S = 30.0
# variables a process reads while torch, its compile stack and the C runtimes load: a zygote serves only workers
# that agree with it on these (thread counts excepted: the child sets its own)
IMPORT_TIME_PREFIXES = ("TORCH", "PYTORCH", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS", "CUDA", "NVIDIA",
                        "TRITON", "LD_", "PYTHON", "MALLOC", "ATEN_", "DNNL_", "ONEDNN_", "HOME", "XDG_", "TMPDIR")
THREAD_COUNTS = {"OMP_NUM_THREADS", "MKL_NUM_THREADS"}
# ... nor, for confined workers, on their own folders (each one's scratch: opgen/sandbox/scratch.py): their zygote is
# started without them, and a forked worker reads them again (zygote.py, `paths_read_again`)
SCRATCH_NAMES = set(SCRATCH_VARIABLES) | {SCRATCH_ENV}


def _per_worker(env: dict[str, str]) -> set[str]:
    return THREAD_COUNTS | SCRATCH_NAMES if SCRATCH_ENV in env else THREAD_COUNTS


class ZygoteError(RuntimeError):
    """The zygote could not start or fork a worker: start the worker fresh instead."""


def forking_enabled() -> bool:
    """Whether workers are forked from a zygote: `OPGEN_SANDBOX_FORK` if set, else only on a machine with no GPU."""
    setting = os.environ.get(FORK_ENV)
    if setting in ("0", "1"):
        return setting == "1"
    return not gpu_device_present()


def import_key(env: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((name, value) for name, value in env.items()
                        if name.startswith(IMPORT_TIME_PREFIXES) and name not in _per_worker(env)))


class Zygote:
    """One zygote process and the socket to it; a thread reads its answers (forked pids, reaped exit codes)."""

    def __init__(self, env: dict[str, str]):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.log = tempfile.TemporaryFile(mode="a+b")
        try:
            self.proc = subprocess.Popen([*WORKER_COMMAND, "--zygote", str(theirs.fileno())], env=env,
                                         pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=self.log, start_new_session=True)
        except OSError as error:
            ours.close()
            self.log.close()
            raise ZygoteError(f"the zygote cannot start: {error}") from None
        finally:
            theirs.close()
        self.socket = ours
        self.alive = True
        self.error = ""
        self._changed = threading.Condition()
        self._spawned: dict[int, int] = {}
        self._exits: dict[int, int] = {}
        self._next_id = 0
        self._spawn_lock = threading.Lock()
        self._ready = False
        threading.Thread(target=self._read, name="opgen-zygote-reader", daemon=True).start()
        with self._changed:
            self._changed.wait_for(lambda: self._ready or not self.alive, timeout=ZYGOTE_START_S)
        if not self._ready:
            self.close()
            raise ZygoteError(f"the zygote did not start: {self.error or self._log_tail()}")

    def _log_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self.log.seek(0)
            return self.log.read().decode(errors="replace")[-500:].strip()
        return ""

    def _read(self) -> None:
        while True:
            try:
                packet = self.socket.recv(1 << 16)
            except OSError:
                packet = b""
            with self._changed:
                if not packet:
                    self.alive = False
                    self._changed.notify_all()
                    return
                message = json.loads(packet)
                if "ready" in message:
                    self._ready = True
                elif "spawned" in message:
                    self._spawned[message["id"]] = message["spawned"]
                elif "exited" in message:
                    self._exits[message["exited"]] = message["code"]
                elif "error" in message:
                    self.error = message["error"].strip().splitlines()[-1]
                self._changed.notify_all()

    def spawn(self, env: dict[str, str], fds: tuple[int, int, int]) -> int:
        """Fork a worker with `env` and these stdin, stdout and stderr descriptors; its pid."""
        with self._spawn_lock:
            self._next_id += 1
            request = self._next_id
            try:
                socket.send_fds(self.socket, [json.dumps({"id": request, "env": env}).encode()], list(fds))
            except OSError as error:
                raise ZygoteError(f"the zygote is gone: {error}") from None
            with self._changed:
                self._changed.wait_for(lambda: request in self._spawned or not self.alive, timeout=SPAWN_S)
                if request not in self._spawned:
                    raise ZygoteError("the zygote forked no worker")
                return self._spawned.pop(request)

    def exit_code(self, pid: int) -> int | None:
        """The worker's exit code once it has ended (negative: the signal that ended it), else None."""
        with self._changed:
            if pid in self._exits:
                return self._exits[pid]
            if self.alive:
                return None
        # the zygote died before reaping it: gone (or a zombie no one will reap) counts as killed
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return None
        except psutil.Error:
            pass
        return -signal.SIGKILL

    def wait_changed(self, timeout: float) -> None:
        with self._changed:
            self._changed.wait(timeout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)   # wakes the reader thread; the zygote reads the end and exits
        with contextlib.suppress(OSError):
            self.socket.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class ForkedProcess:
    """A worker forked by a zygote, with the part of `subprocess.Popen`'s interface the sandbox pool uses."""

    def __init__(self, pid: int, stdin, stdout, zygote: Zygote):
        self.pid, self.stdin, self.stdout = pid, stdin, stdout
        self._zygote = zygote
        self._returncode: int | None = None

    @property
    def returncode(self) -> int | None:
        return self.poll()

    def poll(self) -> int | None:
        if self._returncode is None:
            self._returncode = self._zygote.exit_code(self.pid)
        return self._returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = 0.05 if deadline is None else min(0.05, deadline - time.monotonic())
            if left <= 0:
                raise subprocess.TimeoutExpired(list(WORKER_COMMAND), timeout)
            self._zygote.wait_changed(left)
        return self._returncode   # type: ignore[return-value]

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


_zygotes: dict[tuple, Zygote | None] = {}   # by import key; None: it could not start, start those workers fresh
_zygotes_lock = threading.Lock()


def _zygote_for(env: dict[str, str]) -> Zygote | None:
    key = import_key(env)
    with _zygotes_lock:
        zygote = _zygotes.get(key)
        if key in _zygotes and (zygote is None or zygote.alive):
            return zygote
        try:
            zygote = Zygote({name: value for name, value in env.items() if name not in _per_worker(env) - THREAD_COUNTS})
        except ZygoteError:
            zygote = None
        _zygotes[key] = zygote
        return zygote


def close_zygotes() -> None:
    with _zygotes_lock:
        zygotes = [zygote for zygote in _zygotes.values() if zygote is not None]
        _zygotes.clear()
    for zygote in zygotes:
        zygote.close()


def _forget_zygotes() -> None:
    """In a process forked from this one: its zygotes answer this process, not the copy (which starts its own)."""
    global _zygotes_lock
    _zygotes.clear()
    _zygotes_lock = threading.Lock()


atexit.register(close_zygotes)
os.register_at_fork(after_in_child=_forget_zygotes)


def _fork(zygote: Zygote, env: dict[str, str], stderr) -> ForkedProcess:
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    try:
        pid = zygote.spawn(env, (stdin_read, stdout_write, stderr.fileno()))
    except ZygoteError:
        for fd in (stdin_write, stdout_read):
            os.close(fd)
        raise
    finally:
        for fd in (stdin_read, stdout_write):
            os.close(fd)
    return ForkedProcess(pid, os.fdopen(stdin_write, "wb"), os.fdopen(stdout_read, "rb"), zygote)


def start_worker(env: dict[str, str], stderr) -> subprocess.Popen | ForkedProcess:
    """A running `python -m opgen.sandbox.worker` in a session of its own, with `env`, its stdin and stdout pipes
    to this process and its stderr to the file `stderr`."""
    if forking_enabled():
        zygote = _zygote_for(env)
        if zygote is not None:
            with contextlib.suppress(ZygoteError):
                return _fork(zygote, env, stderr)
    return subprocess.Popen(list(WORKER_COMMAND), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            env=env, start_new_session=True)
