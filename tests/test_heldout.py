"""Held-out input sizes: which sizes a task leaves free, configurations of them, the task at a configuration, and
the stage that validates them on a published folder (and `opgen check` that validates them again)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
import torch

from opgen.cli import main
from opgen.heldout.derive import candidate_configs
from opgen.publish.folder import publish
from opgen.taskcode.sizes import (
    NoHeldOutSizes,
    free_sizes,
    held_out_inputs,
    held_out_value,
    inputs_at,
    scaled_configs,
    sized_code,
)
from tests.test_build import reference_build

SCALED_BY_A_PARAMETER = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, param_shape):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(param_shape))

    def forward(self, x):
        return torch.sigmoid(x) * self.scale

batch_size = 16
channels = 8
height = 12
width = 2 * 6
param_shape = (8, 1, 1)

def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]

def get_init_inputs():
    return [param_shape]
'''

LINEAR = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features, out_features):
        super().__init__()
        self.linear = nn.Linear(features, out_features)

    def forward(self, x):
        return self.linear(x)

batch_size = 64
features = 32
out_features = 16
hidden = features * 2

def get_inputs():
    return [torch.randn(batch_size, features)]

def get_init_inputs():
    return [features, out_features]
'''


def test_free_sizes_are_those_only_get_inputs_reads():
    assert free_sizes(LINEAR) == {"batch_size": 64}   # features sets the weights
    assert free_sizes(SCALED_BY_A_PARAMETER) == {"batch_size": 16, "channels": 8, "height": 12, "width": 12}
    everything_fixed = LINEAR.replace("torch.randn(batch_size, features)", "torch.randn(features, features)")
    with pytest.raises(NoHeldOutSizes, match="also sets the weights"):
        free_sizes(everything_fixed)


def test_an_annotated_size_constant_is_a_size_too():
    annotated = LINEAR.replace("batch_size = 64", "batch_size: int = 64")
    assert annotated != LINEAR and free_sizes(annotated) == {"batch_size": 64}
    assert "batch_size: int = 5" in sized_code(annotated, {"batch_size": 5})


def test_kernelbench_problems_mostly_have_free_sizes(kernelbench_problems):
    found = 0
    for problem in kernelbench_problems:
        try:
            sizes = free_sizes(problem["code"])
        except NoHeldOutSizes:
            continue
        found += 1
        assert all(isinstance(v, int) and v > 0 for v in sizes.values())
    assert found >= 0.95 * len(kernelbench_problems)


def test_configurations_differ_are_smaller_and_odd():
    configs = list(scaled_configs({"batch_size": 64, "seq": 100}))
    assert configs[0] == {"batch_size": 33, "seq": 51}
    assert len(configs) == len({json.dumps(c, sort_keys=True) for c in configs})
    assert all(c != {"batch_size": 64, "seq": 100} for c in configs)
    assert all(c["batch_size"] % 2 == 1 for c in configs if c["batch_size"] > 2)
    assert held_out_value(64, 0.5, aligned=True) == 32 and held_out_value(48, 0.5, aligned=True) == 24


def test_the_meta_screen_keeps_sizes_the_weights_fix_out():
    configs = candidate_configs(SCALED_BY_A_PARAMETER, 4)
    assert configs and all(c["channels"] == 8 for c in configs if "channels" in c)
    assert all(c["batch_size"] != 16 and c["height"] != 12 for c in configs)


def test_sizes_that_only_change_together_are_varied_together():
    code = LINEAR.replace("return self.linear(x)", "return self.linear(x) + self.linear(y)").replace(
        "def forward(self, x):", "def forward(self, x, y):").replace(
        "return [torch.randn(batch_size, features)]", "return [torch.randn(batch_size, features), torch.randn(rows, features)]"
    ).replace("hidden = features * 2", "rows = 64")
    assert free_sizes(code) == {"batch_size": 64, "rows": 64}
    configs = candidate_configs(code, 2)
    assert configs and all(c["batch_size"] == c["rows"] != 64 for c in configs)


def test_the_task_at_a_configuration():
    code = sized_code(SCALED_BY_A_PARAMETER, {"batch_size": 3, "width": 5})
    assert "batch_size = 3" in code and "width = 5" in code and "height = 12" in code
    [x] = inputs_at(code, seed=0)
    [y] = inputs_at(SCALED_BY_A_PARAMETER, {"batch_size": 3, "width": 5}, seed=0)
    assert x.shape == (3, 8, 12, 5) and torch.equal(x, y)
    [z] = held_out_inputs(SCALED_BY_A_PARAMETER, json.dumps([{"batch_size": 1}, {"batch_size": 5}]), 1, seed=0)
    assert z.shape == (5, 8, 12, 12)
    with pytest.raises(IndexError):
        held_out_inputs(SCALED_BY_A_PARAMETER, "[]", 0)


@pytest.mark.heavy
def test_the_stage_on_a_published_folder_and_its_check(tmp_path_factory, tmp_path):
    run = reference_build(tmp_path_factory)
    folder = tmp_path / "dataset"
    publish(run, "opgen/held-out-test", dry_run=True, out=folder)
    assert main(["heldout", str(folder), "--device", "cpu", "--no-progress"]) == 0
    [shard] = (folder / "data").glob("train-*.parquet")
    rows = pq.read_table(shard).to_pylist()
    assert all(r["held_out_count"] == len(json.loads(r["held_out_sizes"])) for r in rows)
    assert sum(r["held_out_count"] >= 2 for r in rows) >= len(rows) - 1
    assert "## Held-out sizes" in (folder / "README.md").read_text()
    assert not list(folder.glob(".held-out*"))   # a dataset folder keeps no log
    import datasets

    loaded = datasets.load_dataset(str(folder), split="train")
    assert loaded.num_rows == len(rows) and "held_out_sizes" in loaded.column_names
    row = next(r for r in rows if r["held_out_count"])
    first = json.loads(row["held_out_sizes"])[0]
    shapes = [tuple(t.shape) for t in held_out_inputs(row["code"], row["held_out_sizes"], 0)]
    assert shapes != [tuple(s) for s in row["input_shapes"]] and first

    # `opgen grade` checks a row at every configuration it holds: the reference passes at all of them, a solution
    # fitted to the timed input shape fails at the first held-out one
    import opgen
    from opgen.grading.tasks import reference_solution

    reference = reference_solution(row["code"])
    graded = opgen.grade(solution_code=reference, dataset=folder, id=row["id"], device="cpu")
    assert graded["correct"], graded
    assert graded["configs"] == ["published", *(f"held_out_{i}" for i in range(1, row["held_out_count"] + 1))]
    timed_shape = tuple(row["input_shapes"][0])
    fitted = row["code"] + (f"\n\nclass ModelNew(Model):\n    def forward(self, *inputs):\n"
                          f"        if tuple(inputs[0].shape) != {timed_shape!r}:\n"
                          f"            raise RuntimeError('written for the shipped sizes')\n"
                          f"        return super().forward(*inputs)\n")
    graded = opgen.grade(solution_code=fitted, dataset=folder, id=row["id"], device="cpu")
    assert not graded["correct"] and graded["detail"].startswith("held_out_1 draw 0: "), graded

    # a configuration that no longer runs (a size the weights fix) fails `opgen check`, named with its sizes
    table = pq.read_table(shard)
    sizes = table.column("held_out_sizes").to_pylist()
    index = next(i for i, r in enumerate(rows) if r["held_out_count"])
    broken = {name: 0 for name in json.loads(sizes[index])[0]}
    sizes[index] = json.dumps([broken])
    pq.write_table(table.set_column(table.schema.get_field_index("held_out_sizes"), "held_out_sizes", [sizes]), shard)
    report = tmp_path / "report.json"
    assert main(["check", str(folder), "--device", "cpu", "--sample", "0", "--report", str(report),
                 "--no-progress"]) == 1
    failures = json.loads(report.read_text())["failures"]
    assert [f["id"] for f in failures] == [rows[index]["id"]]
    assert failures[0]["detail"].startswith("held-out sizes ")


def test_heldout_bad_input_is_one_line(tmp_path, capsys):
    assert main(["heldout", str(tmp_path / "missing")]) == 2
    assert main(["heldout", str(tmp_path)]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(line.startswith("opgen: error:") for line in errors)
