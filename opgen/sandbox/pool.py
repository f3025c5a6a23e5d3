"""A pool of persistent worker processes that run untrusted code with a wall-clock and a memory limit each.

Each worker is a fresh interpreter (`python -m opgen.sandbox.worker`, forked with torch already imported where no
GPU is present: opgen/sandbox/spawn.py) in its own session, speaking JSON lines over private pipes. The parent enforces the limits: a task past its deadline, or whose worker tree
grows past `memory_mb` of resident memory (polled with psutil; RLIMIT_AS breaks torch, which reserves
huge address ranges), has its worker's process group killed; a worker that dies (segfault, `os._exit`)
is replaced. Every payload gets exactly one `SandboxResult`, in input order.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
from tqdm import tqdm

from opgen.errors import MachineFault
from opgen.sandbox.confine import CONFINE_ENV, FILE_LIMIT_ENV, PIECES, SKIP_ENV
from opgen.sandbox.landlock import HIDDEN_ENV, SCRATCH_ENV, WRITABLE_ENV
from opgen.sandbox.quiet import register_worker, unregister_worker
from opgen.sandbox.scratch import (
    allowed_environment,
    empty_scratch,
    make_scratch,
    remove_scratch,
    scratch_bytes,
    scratch_environment,
)
from opgen.sandbox.spawn import start_worker
from opgen.sandbox.worker import SYS_PATH_ENV

POLL_S = 0.05
STARTUP_TIMEOUT_S = 120.0
STDERR_TAIL_CHARS = 1500
DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "opgen-inductor-cache"
STOPPED = "stopped"   # a result's status when its task was never sent: the caller stopped the call
MEMORY_LIMIT = "memory limit exceeded"  # how a result killed for passing the pool's resident limit starts
SCRATCH_LIMIT = "scratch limit exceeded"   # ... for writing more than its scratch may hold
PROCESS_LIMIT = "process limit exceeded"   # ... for starting more processes than a confined worker may
SCRATCH_MB = 4096      # what a confined worker's scratch folder may hold during one task, and its largest file
PROCESSES = 256        # processes a confined worker's task may have running beside it (a compile's tools included)
SCRATCH_POLL_S = 0.5   # how often a task's scratch folder is measured


@dataclass
class SandboxResult:
    """The outcome of one payload: `ok` (value is the function's dict), `error` (it raised), `crash`, `timeout`,
    `forged` (the worker's channel carried an answer its worker loop did not write: the task's code wrote there),
    `stopped` (never sent: see `SandboxPool.run_many`);
    `seconds` from sending the payload to its answer (the worker's time on it, its clean-up after the last
    payload and the pipes included); `cpu_s` the CPU seconds the worker spent on the function (0 when the
    worker did not answer); `pid` the worker process and `task_number` which of its tasks this was (1: its
    first, which pays for its imports and first compile; 0 when never sent)."""

    status: str
    value: dict | None
    detail: str
    seconds: float = 0.0
    cpu_s: float = 0.0
    pid: int = 0
    task_number: int = 0


GARBLED = "garbled"   # what the pool makes of a line on a worker's channel that is no message


def is_gpu_out_of_memory(message: str | None) -> bool:
    """Whether an error message means the GPU ran out of memory (not the pool's resident limit on the host)."""
    text = (message or "").lower()
    return "cuda" in text and "out of memory" in text


def is_out_of_memory(message: str | None) -> bool:
    """Whether an error message means memory pressure: CUDA out of memory (OutOfMemoryError, or
    AcceleratorError "CUDA error: out of memory" when a library allocates), or the pool's resident limit."""
    text = (message or "").lower()
    return "out of memory" in text or MEMORY_LIMIT in text


def over_memory_limit(result: SandboxResult) -> bool:
    """A worker the pool killed for passing its resident-memory limit: a limit of the pipeline's own, not a crash."""
    return result.status == "crash" and result.detail.startswith(MEMORY_LIMIT)


def out_of_memory(result: SandboxResult, error_key: str) -> bool:
    """A result caused by memory pressure: the worker's crash or error, or the error the function reported
    under `error_key` of its value."""
    if result.status == "ok":
        return isinstance(result.value, dict) and is_out_of_memory(result.value.get(error_key))
    return result.status in ("crash", "error") and is_out_of_memory(result.detail)


class _Worker:
    """One worker process, its protocol pipes, and the task it is running."""

    def __init__(self, env: dict[str, str], slot: int = 0, scratch: Path | None = None):
        self.slot = slot  # which of the pool's worker environments it runs with
        self.scratch = scratch   # a confined worker's own folder (opgen/sandbox/scratch.py)
        self.log = tempfile.TemporaryFile(mode="a+b")  # append mode: the log can be truncated between tasks
        try:
            self.proc = start_worker({**env, **scratch_environment(scratch)} if scratch else env, self.log)
        except OSError as error:  # no process can be started here (process limit, memory): the machine's fault
            self.log.close()
            if scratch:
                remove_scratch(scratch)
            raise MachineFault(f"a sandbox worker cannot start: {error}") from None
        self.worker_pid = self.proc.pid   # the process that runs tasks: the keeper's child, once the worker is kept
        self.kept = False                 # split from a keeper (opgen/sandbox/keeper.py), as its ready line says
        self.scratch_checked = 0.0
        self.confinement: dict[str, bool] = {}
        register_worker(self.proc.pid)   # one a timed run's quiet hold pauses (quiet.py)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.buffer = b""
        self.ready = False
        self.index: int | None = None  # payload index in flight
        self.deadline = time.monotonic() + STARTUP_TIMEOUT_S
        self.started = False
        self.sent_at = 0.0
        self.nonce = ""   # the current task's: the worker loop's answer carries it, an answer forged by task code not

    def send(self, index: int, fn_path: str, payload: dict, startup_s: float) -> None:
        self.log.truncate(0)
        self.index, self.started, self.sent_at = index, False, time.monotonic()
        self.deadline = time.monotonic() + startup_s  # importing the function's module is not the task's time
        self.nonce = secrets.token_hex(16)
        request = {"fn": fn_path, "payload": payload, "nonce": self.nonce}
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        self.proc.stdin.flush()

    def read_messages(self) -> list[dict] | None:
        """Messages completed by the bytes now available; None when the worker's stdout has closed."""
        try:
            chunk = self.proc.stdout.read()
        except (BlockingIOError, ValueError):
            chunk = b""
        if chunk is None:
            chunk = b""
        if chunk == b"" and self.proc.poll() is not None:
            return None
        self.buffer += chunk
        messages = []
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                message = None
            if not isinstance(message, dict):   # task code wrote on the channel: not the worker loop's
                message = {"status": GARBLED, "detail": line[:200].decode(errors="replace")}
            messages.append(message)
        return messages

    def became_ready(self, message: dict) -> None:
        """The worker's ready line: a kept worker runs in the keeper's child, which a quiet hold pauses instead."""
        pid = message.get("pid")
        self.confinement = message.get("confinement") or {}   # the pieces of the confinement that hold
        if self.confinement.get("processes") and isinstance(pid, int) and pid != self.proc.pid:
            unregister_worker(self.proc.pid)
            self.worker_pid, self.kept = pid, True
            register_worker(pid)
        self.ready = True

    def processes(self) -> list[psutil.Process]:
        """The worker's processes: those beneath its keeper (the keeper itself, a process that runs no task, is not
        counted), else the worker and those beneath it."""
        try:
            root = psutil.Process(self.proc.pid)
            below = root.children(recursive=True)
        except psutil.Error:
            return []
        return below if self.kept else [root, *below]

    def strays(self) -> list[psutil.Process]:
        """The processes beneath the keeper that are not the worker: what a task started and left running."""
        return [process for process in self.processes() if process.pid != self.worker_pid] if self.kept else []

    def rss_mb(self, processes: list[psutil.Process] | None = None) -> float:
        total = 0
        for process in self.processes() if processes is None else processes:
            try:
                total += process.memory_info().rss
            except psutil.Error:
                pass
        return total / 2**20

    def end_strays(self) -> None:
        """End every process a task left beneath the keeper (SIGKILL, again for those re-parented meanwhile)."""
        for _ in range(20):
            strays = self.strays()
            if not strays:
                return
            for process in strays:
                try:
                    process.kill()
                except psutil.Error:
                    pass
            psutil.wait_procs(strays, timeout=1)

    def stderr_tail(self) -> str:
        try:
            self.log.seek(0)
            text = self.log.read().decode("utf-8", errors="replace")
        except (OSError, ValueError):
            return ""
        return text[-STDERR_TAIL_CHARS:].strip()

    def kill(self) -> None:
        if self.kept:   # the worker first: its keeper then ends every process left beneath it and exits
            try:
                os.killpg(self.worker_pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:   # a keeper that cannot end them: what is beneath it, then the keeper
                for process in self.processes():
                    try:
                        process.kill()
                    except psutil.Error:
                        pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._close()

    def stop(self) -> None:
        """Ask an idle worker to exit (EOF on its request pipe); kill it if it does not."""
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()

    def _close(self) -> None:
        unregister_worker(self.worker_pid)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.log.close()
        if self.scratch:
            remove_scratch(self.scratch)

    def scratch_over(self, limit_bytes: int) -> int | None:
        """The bytes in the worker's scratch when past `limit_bytes` (measured every SCRATCH_POLL_S), else None."""
        now = time.monotonic()
        if self.scratch is None or now - self.scratch_checked < SCRATCH_POLL_S:
            return None
        self.scratch_checked = now
        used = scratch_bytes(self.scratch, stop_at=limit_bytes)
        return used if used > limit_bytes else None

    def exit_description(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "worker closed its output"
        if code < 0:
            try:
                return f"worker killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"worker killed by signal {-code}"
        return f"worker exited with status {code}"


_UNCONFINED_WARNINGS = {   # what solution code may do where a piece of the confinement (opgen/sandbox/confine.py) fails
    "signals": "signal other processes, the grader's included (no seccomp filter)",
    "network": "open network connections (no seccomp filter)",
    "writes": "write any file its user may, the grader's own source included (no Landlock)",
    "reads": "read any file its user may and other processes' environments (no Landlock)",
    "capabilities": "use the capabilities of the user running it",
    "file_size": "write files of any size",
    "processes": "leave processes running after its grade (no child subreaper)",
}
_unconfined_warned: set[str] = set()


def warn_unconfined(what: str = "signals") -> None:
    """One line on stderr, once a process for each `what`: workers asked to run confined could not take that piece
    of the confinement, or the environment (OPGEN_SANDBOX_CONFINE_SKIP) left it out."""
    if what not in _unconfined_warned:
        _unconfined_warned.add(what)
        print(f"opgen: warning: confined sandbox workers run without '{what}' here: solution code may "
              f"{_UNCONFINED_WARNINGS[what]}", file=sys.stderr)


def warn_once(text: str) -> None:
    """`text` on stderr as a warning, once a process."""
    if text not in _unconfined_warned:
        _unconfined_warned.add(text)
        print(f"opgen: warning: {text}", file=sys.stderr)


def missing_pieces(message: dict) -> list[str]:
    """The pieces of the confinement a confined worker's ready line says do not hold (the capabilities only where
    the worker had any to drop: a user's process has none)."""
    held = message.get("confinement")
    if not isinstance(held, dict):   # a worker that names no pieces: what its two older flags say
        held = {"signals": message.get("confined"), "writes": message.get("writes_confined")}
    return [piece for piece in PIECES if piece in held and not held[piece]]


class SandboxPool:
    """Persistent sandbox workers: `run_many(fn_path, payloads)` runs `fn(payload)` in them, in parallel.

    `env` is added to the workers' environment (e.g. {"CUDA_VISIBLE_DEVICES": "0"}); `slot_envs`, if given,
    adds one more mapping per worker slot, round-robin (e.g. one GPU each, so validation spreads over every
    GPU of the machine); a replacement worker takes the slot of the one it replaces. All workers share
    one inductor cache folder (`TORCHINDUCTOR_CACHE_DIR` from `env` or the parent's environment, else
    DEFAULT_CACHE_DIR) so compiles are reused across workers and runs. Each worker gets `threads` OpenMP
    threads (default: the machine's cores shared among this pool's workers; a caller running several pools
    side by side shares them among all of their workers, or the pools' threads oversubscribe the cores).
    `confined` workers (those that run solution code) are confined (opgen/sandbox/confine.py): they signal only
    themselves, reach no network, keep only an allow-list of this process's environment, read no user's files, and
    write only beneath a scratch folder of their own (emptied after each task, at most `scratch_mb` in it) and the
    `writable` folders; whatever processes a task starts (at most `processes` at once) are ended after it.
    `OPGEN_SANDBOX_CONFINE=0` in this process's environment turns all of it off.
    """

    def __init__(self, workers: int, timeout_s: float, memory_mb: int | None, env: dict[str, str] | None = None,
                 *, max_tasks_per_worker: int | None = None, slot_envs: list[dict[str, str]] | None = None,
                 threads: int | None = None, confined: bool = False, writable: tuple[str, ...] = (),
                 scratch_mb: int = SCRATCH_MB, processes: int = PROCESSES):
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers
        self.timeout_s = float(timeout_s)
        self.memory_mb = memory_mb
        self.max_tasks_per_worker = max_tasks_per_worker
        self.threads = threads or max(1, (os.cpu_count() or 1) // workers)
        self.confined = confined and os.environ.get(CONFINE_ENV) != "0"
        self.writable = tuple(writable)
        self.scratch_mb, self.process_limit = scratch_mb, processes
        self.env = self._worker_env(env or {})
        self.slot_envs = [dict(extra) for extra in slot_envs or []]
        self._pool: list[_Worker] = []
        self._tasks_done: dict[int, int] = {}

    def _worker_env(self, extra: dict[str, str]) -> dict[str, str]:
        # a confined worker keeps an allow-list of this environment (no tokens: opgen/sandbox/scratch.py)
        env = allowed_environment(dict(os.environ)) if self.confined else dict(os.environ)
        env.setdefault("OMP_NUM_THREADS", str(self.threads))
        env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(DEFAULT_CACHE_DIR))
        env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # no compile subprocess pool per worker
        # inductor's compile cache on (its default) in every pool alike: compiles are reused across workers and runs
        # through it, and torch reads the variable as it loads, so pools that differed in it could not share a zygote
        # (opgen/sandbox/spawn.py): a CPU build would start two
        env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        # the interpreter's bin folder first: tools installed beside it (pip's ninja, for extension builds) are found
        env["PATH"] = os.pathsep.join(p for p in (str(Path(sys.executable).parent), env.get("PATH")) if p)
        env[SYS_PATH_ENV] = json.dumps([p for p in sys.path if p])
        package_root = str(Path(__file__).resolve().parents[2])  # so `-m opgen.sandbox.worker` resolves
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env.update(extra)
        for name in (CONFINE_ENV, WRITABLE_ENV, HIDDEN_ENV, FILE_LIMIT_ENV):
            env.pop(name, None)
        if self.confined:   # workers that run solution code: opgen/sandbox/confine.py
            env[CONFINE_ENV] = "1"
            env[FILE_LIMIT_ENV] = str(self.scratch_mb)
            if self.writable:
                env[WRITABLE_ENV] = os.pathsep.join(self.writable)
            # this process's home and temporary folder stay out of a confined worker's reach (its own are its scratch)
            hidden = [str(Path.home()), tempfile.gettempdir(), *os.environ.get(HIDDEN_ENV, "").split(os.pathsep)]
            env[HIDDEN_ENV] = os.pathsep.join(p for p in hidden if p)
            if os.environ.get(SKIP_ENV):
                env[SKIP_ENV] = os.environ[SKIP_ENV]
        else:
            Path(env["TORCHINDUCTOR_CACHE_DIR"]).mkdir(parents=True, exist_ok=True)
        return env

    def __enter__(self) -> SandboxPool:
        self._fill_pool()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        for worker in self._pool:
            worker.stop()
        self._pool.clear()

    def run_many(self, fn_path: str, payloads: list[dict], progress: bool = False,
                 stop: threading.Event | None = None,
                 again: Callable[[int, SandboxResult], dict | None] | None = None) -> list[SandboxResult]:
        """Run `fn(payload)` for every payload; results in input order, exactly one per payload.

        Once `stop` is set no further payload is sent: the tasks under way finish, and the others come back with
        status STOPPED (the caller no longer needs them). `again(index, result)`, called on each result as it
        comes, may return a payload to run in its place: it joins the end of the queue at once, so a try again
        waits for no other payload's first try to end, and its result replaces the first."""
        payloads = list(payloads)
        results: list[SandboxResult | None] = [None] * len(payloads)
        pending = collections.deque(range(len(payloads)))
        bar = tqdm(total=len(payloads), file=sys.stderr, disable=not progress or not payloads, unit="task",
                   dynamic_ncols=True)   # nothing to run: no bar
        selector = selectors.DefaultSelector()
        try:
            while pending or any(w.index is not None for w in self._pool):
                if stop is not None and stop.is_set():
                    for index in pending:
                        results[index] = SandboxResult(STOPPED, None, "stopped before it was sent: not needed", 0.0)
                    pending.clear()
                if pending:
                    self._fill_pool()
                for worker in self._pool:
                    if worker.ready and worker.index is None and pending:
                        self._dispatch(worker, pending, fn_path, payloads)
                selector = self._reselect(selector)
                waiting = [w for w in self._pool if w.index is not None or not w.ready]  # idle workers have no deadline
                timeout = max(0.0, min([POLL_S] + [w.deadline - time.monotonic() for w in waiting]))
                selector.select(timeout)
                for worker in list(self._pool):
                    done = self._service(worker, results)
                    if done is None:
                        continue
                    retry = again(done, results[done]) if again is not None else None
                    if retry is not None:
                        payloads[done], results[done] = retry, None
                        pending.append(done)
                    else:
                        bar.update(1)
        finally:
            selector.close()
            bar.close()
        return results  # type: ignore[return-value]

    def _dispatch(self, worker: _Worker, pending: collections.deque, fn_path: str, payloads: list[dict]) -> None:
        index = pending.popleft()
        worker.send(index, fn_path, payloads[index], max(STARTUP_TIMEOUT_S, self.timeout_s))

    def _fill_pool(self) -> None:
        taken = {worker.slot for worker in self._pool}
        for slot in range(self.workers):
            if slot not in taken:
                scratch = make_scratch() if self.confined else None
                env = {**self._slot_env(slot), SCRATCH_ENV: str(scratch)} if scratch else self._slot_env(slot)
                self._pool.append(_Worker(env, slot, scratch))

    def _slot_env(self, slot: int) -> dict[str, str]:
        if not self.slot_envs:
            return self.env
        return {**self.env, **self.slot_envs[slot % len(self.slot_envs)]}

    def _reselect(self, selector: selectors.BaseSelector) -> selectors.BaseSelector:
        selector.close()
        selector = selectors.DefaultSelector()
        for worker in self._pool:
            selector.register(worker.proc.stdout, selectors.EVENT_READ)
        return selector

    def _service(self, worker: _Worker, results: list) -> int | None:
        """Read the worker's messages and enforce its limits; returns the index of a payload that finished."""
        messages = worker.read_messages()
        if messages is None:
            return self._replace(worker, results, "crash", worker.exit_description())
        for message in messages:
            status = message.get("status")
            if status == GARBLED or (status not in ("ready", "started") and worker.index is not None
                                     and message.get("nonce") != worker.nonce):
                return self._replace(worker, results, "forged", "the worker's channel carried an answer its worker "
                                     f"did not send (the task's code wrote there): {str(message)[:200]}")
            if status == "ready":
                worker.became_ready(message)
                for piece in missing_pieces(message) if self.confined else []:
                    warn_unconfined(piece)
            elif status == "started":
                worker.started = True
                worker.deadline = time.monotonic() + self.timeout_s
            elif worker.index is not None:
                index, worker.index = worker.index, None
                number = self._after_task(worker, bool(message.get("exiting")))
                results[index] = SandboxResult(status, message.get("value"), message.get("detail", ""),
                                               time.monotonic() - worker.sent_at, float(message.get("cpu_s", 0.0)),
                                               worker.proc.pid, number)
                return index
        now = time.monotonic()
        if now > worker.deadline:
            if worker.index is None and worker.ready:
                return None
            what = "task" if worker.started else ("worker start-up" if not worker.ready else "module import")
            return self._replace(worker, results, "timeout", f"{what} exceeded {self._limit(worker):.0f} s")
        if worker.index is not None:
            return self._check_limits(worker, results)
        return None

    def _check_limits(self, worker: _Worker, results: list) -> int | None:
        """Stop a running task past the pool's limits: resident memory, and a confined worker's processes and
        scratch."""
        processes = worker.processes() if self.memory_mb is not None or worker.kept else []
        if self.memory_mb is not None:
            rss = worker.rss_mb(processes)
            if rss > self.memory_mb:
                return self._replace(worker, results, "crash",
                                     f"{MEMORY_LIMIT}: {rss:.0f} MB resident > {self.memory_mb} MB")
        if worker.kept and len(processes) - 1 > self.process_limit:
            return self._replace(worker, results, "crash", f"{PROCESS_LIMIT}: {len(processes) - 1} processes beside "
                                 f"the worker > {self.process_limit}")
        used = worker.scratch_over(self.scratch_mb << 20)
        if used is not None:
            return self._replace(worker, results, "crash",
                                 f"{SCRATCH_LIMIT}: {used >> 20} MB written > {self.scratch_mb} MB")
        return None

    def _limit(self, worker: _Worker) -> float:
        return self.timeout_s if worker.started else max(STARTUP_TIMEOUT_S, self.timeout_s)

    def _after_task(self, worker: _Worker, exiting: bool = False) -> int:
        """Count the worker's finished task (returns which of its tasks it was); recycle a worn-out or bloated one,
        and retire one that said it is exiting (its task asked for a fresh process after it)."""
        count = self._tasks_done.get(worker.proc.pid, 0) + 1
        self._tasks_done[worker.proc.pid] = count
        worker.end_strays()   # nothing a task started outlives it, and nothing it wrote is seen by the next
        if worker.scratch is not None:
            empty_scratch(worker.scratch)
        worn_out = self.max_tasks_per_worker is not None and count >= self.max_tasks_per_worker
        bloated = self.memory_mb is not None and worker.rss_mb() > 0.75 * self.memory_mb
        if worn_out or bloated or exiting:  # recycle before the next task trips the limit on memory it did not use
            worker.stop()
            self._pool.remove(worker)
        return count

    def _replace(self, worker: _Worker, results: list, status: str, detail: str) -> int | None:
        index = worker.index
        tail = worker.stderr_tail()
        worker.kill()
        self._pool.remove(worker)
        if index is None:
            if not worker.ready:  # a worker that cannot even start would loop forever: the machine's fault
                last = (tail.strip().splitlines() or [""])[-1][:300]
                raise MachineFault(f"a sandbox worker cannot start ({detail}){': ' + last if last else ''}")
            return None
        results[index] = SandboxResult(status, None, detail + (f"\n{tail}" if tail else ""),
                                       time.monotonic() - worker.sent_at, pid=worker.proc.pid,
                                       task_number=self._tasks_done.get(worker.proc.pid, 0) + 1)
        return index


class KeptPools:
    """Sandbox pools kept for the life of this process, by key, so consecutive calls (the build's shards)
    skip worker start-up: importing torch, a CUDA context and the first compile's set-up. Safe to share
    between threads (a stage's lanes), each of which uses pools of its own keys."""

    def __init__(self) -> None:
        self._pools: dict[tuple, SandboxPool] = {}
        self._lock = threading.Lock()
        atexit.register(self.close_except, set())

    def get(self, key: tuple, make: Callable[[], SandboxPool]) -> SandboxPool:
        with self._lock:
            if key not in self._pools:
                self._pools[key] = make().__enter__()
            return self._pools[key]

    def discard(self, key: tuple) -> None:
        """Stop the kept pool of `key`, if any: the next `get` starts a fresh one."""
        with self._lock:
            pool = self._pools.pop(key, None)
        if pool is not None:
            pool.close()

    def close_except(self, keys: set[tuple]) -> None:
        """Stop the kept pools whose key is not in `keys`."""
        with self._lock:
            stale = [self._pools.pop(k) for k in list(self._pools) if k not in keys]
        for pool in stale:
            pool.close()

    def __len__(self) -> int:
        return len(self._pools)

    def keys(self) -> list[tuple]:
        with self._lock:
            return list(self._pools)

    def values(self) -> list[SandboxPool]:
        with self._lock:
            return list(self._pools.values())
