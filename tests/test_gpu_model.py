"""One GPU model per build: a build whose rows were timed on one GPU refuses to time on another."""

from __future__ import annotations

import pytest

from opgen.errors import UsageError
from opgen.pipeline.gpu_model import recorded_gpu_model, require_recorded_gpu_model
from opgen.pipeline.rundir import RunDir

H100 = "NVIDIA H100 80GB HBM3"


def _timed_shard(rundir: RunDir, shard: int, hardware: str | None, marked: bool = True) -> None:
    folder = rundir.shard_dir(shard)
    folder.mkdir(parents=True)
    rundir.write_rows(folder, "timed", [{"id": f"t{shard}", "hardware": hardware, "eager_ms": 2.0}])
    if marked:
        rundir.mark(folder, "timing")


def test_a_build_takes_the_model_of_its_first_timed_shard(tmp_path):
    rundir = RunDir(tmp_path)
    assert recorded_gpu_model(rundir) is None
    _timed_shard(rundir, 0, "NVIDIA H200", marked=False)   # in flight when the machine went: not a baseline
    _timed_shard(rundir, 3, None)
    _timed_shard(rundir, 5, H100)
    assert recorded_gpu_model(rundir) == H100


def test_another_model_is_refused_in_one_line_naming_the_model_it_needs(tmp_path):
    rundir = RunDir(tmp_path)
    require_recorded_gpu_model(rundir, ["NVIDIA H200"])   # nothing timed yet: the first run decides
    _timed_shard(rundir, 1, H100)
    require_recorded_gpu_model(rundir, [H100, H100])
    with pytest.raises(UsageError, match=f"taken on {H100}, this machine has NVIDIA H200") as refused:
        require_recorded_gpu_model(rundir, [H100, "NVIDIA H200"])
    assert "\n" not in str(refused.value)
