"""The Ray executor's stages declare what they need of a cluster; that a build on it gives the local executor's
dataset is tests/test_build_stream.py's (`test_ray_executor_streams_to_the_same_dataset`: one Ray build for both, a
cluster start and a build being about 50 s of a CI machine's two cores)."""

from __future__ import annotations

from opgen.pipeline.stages import EXECUTE, SAMPLE, TIMING


def test_stages_declare_their_resources():
    assert SAMPLE.num_gpus == 0 and EXECUTE.num_cpus == 1 and EXECUTE.num_gpus == 0
    assert TIMING.num_gpus == 1
