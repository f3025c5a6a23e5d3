"""`opgen build` on the Ray executor (a local 2-CPU cluster) gives the same dataset as the local executor."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from opgen.pipeline.build import BuildConfig, run_build
from opgen.pipeline.executors import RayExecutor
from opgen.pipeline.stages import EXECUTE, SAMPLE, TIMING
from tests.conftest import KERNELBENCH
from tests.test_build import reference_build


def test_stages_declare_their_resources():
    assert SAMPLE.num_gpus == 0 and EXECUTE.num_cpus == 1 and EXECUTE.num_gpus == 0
    assert TIMING.num_gpus == 1


@pytest.mark.heavy
def test_ray_executor_builds_the_same_dataset_as_the_local_one(tmp_path_factory, tmp_path):
    ray = pytest.importorskip("ray")
    reference = reference_build(tmp_path_factory)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        executor = RayExecutor(2)
        config = BuildConfig(n=4, seed=0, profile="smoke", device="cpu", reference=str(KERNELBENCH), shard_size=2)
        result = run_build(config, tmp_path / "run", executor, progress=False)
        executor.close()
        assert ray.is_initialized()          # a cluster the executor joined is not shut down by it
    finally:
        ray.shutdown()
    assert result.tasks == 4
    assert pq.read_table(tmp_path / "run" / "tasks.parquet").to_pylist() == \
        pq.read_table(reference / "tasks.parquet").to_pylist()
