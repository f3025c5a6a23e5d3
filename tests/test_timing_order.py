"""A resumed build's backlog of executed shards goes to the timing lanes lightest first, so its first task does not
wait behind its heaviest shard."""

from __future__ import annotations

from concurrent.futures import Future

from opgen.pipeline.build import Build, BuildConfig, RoundState, lightest_first
from tests.conftest import KERNELBENCH


class RecordingExecutor:
    """Takes jobs and keeps them, in the order they came."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    def submit(self, stage, payload: dict) -> Future:
        self.sent.append(payload)
        return Future()


def test_a_backlog_is_sent_to_timing_lightest_first(tmp_path, monkeypatch):
    executor = RecordingExecutor()
    build = Build(BuildConfig(n=5, seed=0, cpu_timing=True, reference=str(KERNELBENCH)), tmp_path / "run", executor)
    rough = {3: [126.0], 4: [2.0, 1.5], 5: [], 6: [30.0]}   # shard -> its survivors' rough eager medians (ms)
    for shard in rough:
        build.rundir.shard_dir(shard).mkdir(parents=True)
    monkeypatch.setattr(build, "_executed_in", lambda state, shard: [
        {"sample_index": 10 * shard + i, "eager_ms_cuda": ms} for i, ms in enumerate(rough[shard] or [None])])
    state = RoundState(0, list(rough), executed=set(rough))
    build._send_timing(state)
    sent = [payload["records"][0]["sample_index"] // 10 for payload in executor.sent]
    assert sent == [5, 4, 6, 3]   # 0 (no median), 3.5, 30, then 126 ms
    assert state.timing_sent == set(rough)


def test_shards_without_rough_medians_keep_their_order():
    shards = [(2, [{"eager_ms_cpu": 9.0}]), (1, [{}]), (7, [{"eager_ms_cuda": None}])]
    assert [shard for shard, _ in lightest_first(shards)] == [1, 2, 7]
