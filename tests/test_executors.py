"""The local executor's lanes: a laned own-worker stage runs jobs side by side, each lane with its share of workers,
every lane taking the next job when it is free."""

from __future__ import annotations

import threading
from pathlib import Path

from opgen.pipeline.executors import LocalExecutor, Stage
from tests.conftest import side_by_side

BARRIER = threading.Barrier(2, timeout=20)


def meet(payload: dict) -> dict:
    BARRIER.wait()  # breaks (BrokenBarrierError) unless the two jobs run at the same time
    return {"lane": payload["lane"], "lanes": payload["lanes"]}


RELEASE = threading.Event()


def wait_or_pass(payload: dict) -> dict:
    if payload["wait"]:
        assert RELEASE.wait(timeout=30)
    return {"lane": payload["lane"]}


def lane_of(payload: dict) -> dict:
    return {"lane": payload["lane"], "thread": threading.current_thread().name}


def test_laned_stage_runs_jobs_side_by_side_with_a_share_of_the_workers():
    executor = LocalExecutor(4)
    laned = Stage("laned", meet, own_workers=True, lane_workers=2)
    try:
        assert executor.lanes(laned) == 2 and executor.job_workers(laned) == 2
        results = [f.result(timeout=30) for f in [executor.submit(laned, {}), executor.submit(laned, {})]]
        assert sorted(r["lane"] for r in results) == [0, 1] and {r["lanes"] for r in results} == {2}
    finally:
        executor.close()


def test_a_free_lane_takes_the_next_job_while_another_lane_is_stuck():
    executor = LocalExecutor(2)
    laned = Stage("stuck", wait_or_pass, own_workers=True, lane_workers=1)
    try:
        stuck = executor.submit(laned, {"wait": True})
        # with jobs dealt to lanes in turn, the third job would queue behind the stuck one
        quick = [executor.submit(laned, {"wait": False}) for _ in range(3)]
        lanes = [future.result(timeout=30)["lane"] for future in quick]
        assert not stuck.done() and len(set(lanes)) == 1
        RELEASE.set()
        assert stuck.result(timeout=30)["lane"] != lanes[0]
    finally:
        RELEASE.set()
        executor.close()


def test_unlaned_own_worker_stage_runs_one_job_at_a_time_with_every_worker():
    executor = LocalExecutor(4)
    single = Stage("single", lane_of, own_workers=True)
    try:
        assert executor.lanes(single) == 1 and executor.job_workers(single) == 4
        results = [executor.submit(single, {}).result(timeout=30) for _ in range(3)]
        assert {r["lane"] for r in results} == {0} and len({r["thread"] for r in results}) == 1
    finally:
        executor.close()


def test_execute_lanes_keep_a_pool_each_and_run_side_by_side():
    from filters import validate

    bad = Path(__file__).parent / "bad_tasks"
    records = [{"id": "identity", "code": (bad / "trivial__identity.py").read_text()},
               {"id": "raises", "code": (bad / "exec_error__raises.py").read_text()}]
    lines: dict[int, list[dict]] = {}

    def lane(index: int) -> None:
        lines[index] = validate.execute_verdicts(records, workers=1, timeout_s=60, memory_mb=None, reuse_pool=True,
                                                 lane=index, lanes=2)

    kept = len(validate._KEPT_POOLS)
    try:
        side_by_side(lane)
        assert [[line["reason"] for line in lines[index]] for index in (0, 1)] == [["trivial", "exec_error"]] * 2
        pools = [validate.shared_pool(1, 60, None, None, index) for index in (0, 1)]
        assert len(validate._KEPT_POOLS) == kept + 2 and pools[0] is not pools[1]
        pids = [[worker.proc.pid for worker in pool._pool] for pool in pools]
        lane(0)   # the next shard of lane 0 runs in the worker lane 0 kept
        assert lines[0][0]["reason"] == "trivial" and [w.proc.pid for w in pools[0]._pool] == pids[0]
        assert set(pids[0]).isdisjoint(pids[1])
    finally:
        validate._KEPT_POOLS.close_except(set())


def stoppable(payload: dict) -> dict:
    return {"stopped": payload["stop"].wait(timeout=30)}


def test_a_running_lane_job_can_be_asked_to_stop_and_a_pool_job_cannot():
    executor = LocalExecutor(2)
    laned = Stage("stoppable", stoppable, own_workers=True, lane_workers=1)
    try:
        first, second = executor.submit(laned, {}), executor.submit(laned, {})
        assert executor.stop(second) and second.result(timeout=30) == {"stopped": True}
        assert not first.done()
        assert executor.stop(first) and first.result(timeout=30) == {"stopped": True}
        assert not executor.stop(first)   # finished: nothing left to ask
        pooled = executor.submit(Stage("pooled", lane_of), {"lane": 0})
        assert not executor.stop(pooled)
        pooled.result(timeout=60)
    finally:
        executor.close()


def test_execute_checks_asked_to_stop_return_nothing():
    from filters import validate

    bad = Path(__file__).parent / "bad_tasks"
    records = [{"id": "identity", "code": (bad / "trivial__identity.py").read_text()}]
    stop = threading.Event()
    stop.set()
    assert validate.execute_verdicts(records, workers=1, timeout_s=60, memory_mb=None, stop=stop) is None


def test_the_timing_stage_runs_one_lane_per_timing_worker_each_asking_for_one_worker():
    from opgen.pipeline.stages import TIMING, timing_lanes

    stage, job_workers = timing_lanes(4)
    executor = LocalExecutor(12)   # the execute workers: no say in the timing lanes
    try:
        assert executor.lanes(stage) == 4 and job_workers == 1 and stage.name == TIMING.name
        assert timing_lanes(1) == (TIMING, 1) and timing_lanes(None) == (TIMING, None)
        assert executor.lanes(TIMING) == 1
    finally:
        executor.close()
