"""Executors that run a stage's shard jobs: a local process pool (default) or Ray tasks with declared resources.

A stage is a module-level function `fn(payload) -> result` plus the resources one job needs. Executors only
compute: `submit(stage, payload)` returns a future, and the driver writes the shard files and markers as
futures finish, so a killed run loses at most the jobs in flight. Jobs of different stages run at the same
time (validation of one shard while another is timed); jobs of one own-worker stage run one after another in
each of its lanes.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from multiprocessing import forkserver, resource_tracker

import psutil
from tqdm import tqdm

from opgen.errors import UsageError
from opgen.interrupts import spared_children
from opgen.ray_cluster import join_cluster

RAY_MAX_RETRIES = 3   # a job whose worker process died is run again this many times


@dataclass(frozen=True)
class Stage:
    """One stage of the build, NeMo-Curator style: what a job needs and how the local executor runs it.

    `own_workers`: the stage starts its own sandboxed worker processes (validation, timing), so the local
    executor runs its jobs in driver threads instead of in its process pool: one at a time, or, for a stage
    with `lane_workers`, in parallel lanes of that many sandbox workers each, every lane taking the next
    job as soon as it is free (a shard's slowest candidate then idles only its own lane's workers); `lanes`
    fixes their number instead (the timing stage: one lane per timing worker).
    """

    name: str
    fn: Callable[[dict], dict]
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    own_workers: bool = False
    lane_workers: int = 0
    lanes: int = 0


Job = tuple[object, dict]   # (key, payload)
OnResult = Callable[[object, dict], None]


def exit_with_parent(driver_pid: int, poll_s: float = 0.5) -> None:
    """Pool-worker initializer: exit as soon as the driver is gone, so a killed build leaves no worker behind (an
    orphaned pool worker would wait forever and keep the driver's stdout open). The driver is not the worker's
    parent (the fork server is, and it lives while any of its workers does), and a driver that died counts as gone
    while still a zombie: its parent may reap it only once its stdout closes."""
    try:
        driver = psutil.Process(driver_pid)
    except psutil.Error:
        os._exit(1)

    def alive() -> bool:
        try:
            return driver.is_running() and driver.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def watch() -> None:
        while alive():
            time.sleep(poll_s)
        os._exit(1)

    threading.Thread(target=watch, name="opgen-parent-watch", daemon=True).start()


# What the pool's fork server imports once, so that no pool worker imports torch and the sampler again (3.7 CPU
# seconds a worker on the 2-core development machine), nor what its first candidate loads (pool_warmup: 2-3 more).
POOL_PRELOAD = ["opgen.pipeline.build", "opgen.pipeline.stages", "opgen.sample.sampler", "opgen.sample.composition",
                "filters.static", "opgen.vocab", "opgen.pipeline.pool_warmup"]


def pool_context() -> multiprocessing.context.BaseContext:
    """Fork server, not fork: the driver has torch and threads loaded, and a forked copy of them can deadlock; the
    fork server is a fresh interpreter that imports POOL_PRELOAD and forks the workers from there."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(POOL_PRELOAD)
    return context


class _Lanes:
    """A stage's lanes: `count` driver threads that take its jobs from one queue, in submission order.

    A lane that finishes early takes the next job, so no job waits behind another lane's slow shard; each job
    learns which lane runs it (`lane`, `lanes` in its payload), and so which of the stage's kept pools to use.
    Each job also gets a `stop` event in its payload: `stop(future)` sets it, and the job then starts no more
    of its tasks and returns early (see `SandboxPool.run_many`).
    """

    def __init__(self, stage_name: str, count: int):
        self.count = count
        self._numbers = itertools.count()
        self._local = threading.local()
        self._threads = ThreadPoolExecutor(count, thread_name_prefix=f"opgen-{stage_name}",
                                           initializer=self._claim_number)
        self._stops: dict[Future, threading.Event] = {}

    def _claim_number(self) -> None:
        self._local.index = next(self._numbers)   # threads are never replaced, so numbers stay 0 .. count-1

    def _run(self, fn: Callable[[dict], dict], payload: dict, stop: threading.Event) -> dict:
        return fn({**payload, "lane": self._local.index, "lanes": self.count, "stop": stop})

    def submit(self, fn: Callable[[dict], dict], payload: dict) -> Future:
        stop = threading.Event()
        future = self._threads.submit(self._run, fn, payload, stop)
        self._stops[future] = stop
        future.add_done_callback(lambda done: self._stops.pop(done, None))
        return future

    def stop(self, future: Future) -> bool:
        """Ask the job of `future`, if it is still running, to stop early; whether it was asked."""
        stop = self._stops.get(future)
        if stop is not None:
            stop.set()
        return stop is not None

    def shutdown(self) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)


class LocalExecutor:
    """Runs pure stages in a pool of `workers` processes (spawned lazily, reused), own-worker stages in lanes."""

    name = "local"

    def __init__(self, workers: int = 2):
        self.workers = max(1, workers)
        self._pool: ProcessPoolExecutor | None = None
        self._lanes: dict[str, _Lanes] = {}

    def submit(self, stage: Stage, payload: dict) -> Future:
        """Start one job: an own-worker stage in its lanes (the first free lane takes it; the payload learns
        `lane` and `lanes`), any other in the process pool."""
        if stage.own_workers or self.workers == 1:
            key = f"{stage.name}x{self.lanes(stage)}"
            if key not in self._lanes:
                self._lanes[key] = _Lanes(stage.name, self.lanes(stage))
            return self._lanes[key].submit(stage.fn, payload)
        pool = self._get_pool()
        with spared_children():   # a pool worker it starts never sees the terminal's Ctrl-C
            return pool.submit(stage.fn, payload)

    def stop(self, future: Future) -> bool:
        """Ask a running own-worker job to stop early (it comes back with `stopped`); whether it could be asked:
        not for jobs of the process pool."""
        return any(lanes.stop(future) for lanes in self._lanes.values())

    def lanes(self, stage: Stage) -> int:
        """Parallel lanes of an own-worker stage: its fixed `lanes`, or workers // lane_workers, else one."""
        if stage.own_workers and stage.lanes:
            return stage.lanes
        if not stage.own_workers or not stage.lane_workers:
            return 1
        return max(1, self.workers // stage.lane_workers)

    def job_workers(self, stage: Stage) -> int:
        """Sandbox workers one job of an own-worker stage may start: its lane's share of them."""
        return max(1, self.workers // self.lanes(stage))

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.workers, mp_context=pool_context(), initializer=exit_with_parent,
                                             initargs=(os.getpid(),))
            # the resource tracker unblocks SIGINT in the thread that starts it: started now, not inside
            # `spared_children` as the first worker starts (which would then see the terminal's Ctrl-C)
            resource_tracker.ensure_running()
            with spared_children():   # the fork server, and so every worker it forks, starts with SIGINT blocked
                forkserver.ensure_running()
        return self._pool

    def close(self) -> None:
        for lanes in self._lanes.values():
            lanes.shutdown()
        self._lanes.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class RayExecutor:
    """Runs every job as a Ray task with the stage's num_cpus/num_gpus, retried when its worker dies.

    Joins the cluster at RAY_ADDRESS or one already initialised in this process, else starts a local one
    with `workers` CPUs (and shuts it down on close).
    """

    name = "ray"

    def __init__(self, workers: int = 2):
        self.workers = max(1, workers)
        self.ray, self._started = join_cluster(self.workers)
        self._remote: dict[str, object] = {}

    def job_workers(self, stage: Stage) -> int:
        """One sandbox worker per job: Ray gives each job its own CPU, and runs as many jobs as fit."""
        return max(1, int(stage.num_cpus))

    def _remote_fn(self, stage: Stage):
        if stage.name not in self._remote:
            self._remote[stage.name] = self.ray.remote(stage.fn).options(
                num_cpus=stage.num_cpus, num_gpus=stage.num_gpus, max_retries=RAY_MAX_RETRIES,
                retry_exceptions=False, name=f"opgen-{stage.name}")
        return self._remote[stage.name]

    def submit(self, stage: Stage, payload: dict) -> Future:
        """Start one job as a Ray task; its result comes back as a concurrent.futures.Future."""
        return self._remote_fn(stage).remote(payload).future()

    def stop(self, future: Future) -> bool:
        """A running Ray task is left to finish: no job can be asked to stop early."""
        return False

    def close(self) -> None:
        if self._started:
            self.ray.shutdown()
            self._started = False


def run_jobs(executor: LocalExecutor | RayExecutor, stage: Stage, jobs: list[Job], on_result: OnResult,
             desc: str, progress: bool = True, initial: int = 0) -> None:
    """Run `jobs` on `executor` and hand each result to `on_result(key, result)` in the driver as it finishes
    (ties in key order); jobs still running when one fails are cancelled where they can be."""
    bar = tqdm(total=initial + len(jobs), initial=initial, desc=desc, unit="shard", file=sys.stderr,
               disable=not progress, dynamic_ncols=True)
    pending = {executor.submit(stage, payload): key for key, payload in jobs}
    try:
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: str(pending[f])):
                key = pending.pop(future)
                on_result(key, future.result())
                bar.update(1)
    finally:
        for future in pending:
            future.cancel()
        bar.close()


def make_executor(name: str, workers: int = 2) -> LocalExecutor | RayExecutor:
    """The executor called `name` ("local" or "ray")."""
    if name == "local":
        return LocalExecutor(workers)
    if name == "ray":
        return RayExecutor(workers)
    raise UsageError(f"unknown executor {name!r} (choose local or ray)")
