"""The KernelBench reference loads from a JSONL file, a parquet file, a checkout folder and (up to the datasets
call) the Hub, and its fingerprints are cached on disk by content hash."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kernels_ref.index as index_module
from kernels_ref import HUB_ID, load_reference, reference_index
from opgen.errors import UsageError
from tests.conftest import KERNELBENCH as KB_JSONL

needs_kb = pytest.mark.skipif(not KB_JSONL.is_file(), reason="offline KernelBench copy not present")

SIGMOID = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(x)

batch_size = 16
dim = 16384

def get_inputs():
    return [torch.randn(batch_size, dim)]

def get_init_inputs():
    return []
"""
CONV_RELU_BIAS = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x)
        x = x + self.bias
        return x

def get_inputs():
    return [torch.rand(128, 3, 32, 32)]

def get_init_inputs():
    return [3, 16, 3, (16, 1, 1)]
"""


def sampled(seed: int, count: int) -> list[dict]:
    """Sampler candidates (smoke profile), skipping any index the sampler itself fails on."""
    from opgen.sample.sampler import sample_records

    records = []
    for index in range(count):
        try:
            records.extend(sample_records(seed, index, 1, profile="smoke"))
        except Exception:  # noqa: BLE001 - a sampler failure is not what these tests judge
            continue
    return records


def _folder(root: Path) -> Path:
    (root / "level1").mkdir(parents=True)
    (root / "level2").mkdir()
    (root / "level1" / "21_Sigmoid.py").write_text(SIGMOID)
    (root / "level2" / "1_Conv2D_ReLU_BiasAdd.py").write_text(CONV_RELU_BIAS)
    (root / "level2" / "notes.txt").write_text("not a problem")
    return root


@needs_kb
def test_loads_the_offline_jsonl_copy():
    rows = load_reference(str(KB_JSONL))
    assert len(rows) == 270
    assert {row["level"] for row in rows} == {1, 2, 3, 4}
    assert set(rows[0]) == {"code", "level", "name", "problem_id"}
    assert (rows[0]["level"], rows[0]["problem_id"]) == (1, 1)


@pytest.mark.parametrize("nested", [False, True])
def test_loads_a_kernelbench_style_folder(tmp_path, nested):
    root = _folder(tmp_path / "KernelBench") if nested else _folder(tmp_path)
    rows = load_reference(str(tmp_path if nested else root))
    assert [(r["level"], r["problem_id"], r["name"]) for r in rows] == [
        (1, 21, "21_Sigmoid.py"), (2, 1, "1_Conv2D_ReLU_BiasAdd.py")]
    assert rows[0]["code"] == SIGMOID


def test_loads_parquet(tmp_path):
    path = tmp_path / "kb.parquet"
    pq.write_table(pa.table({"code": [SIGMOID], "level": [1], "name": ["21_Sigmoid.py"], "problem_id": [21]}), path)
    assert load_reference(str(path)) == [{"code": SIGMOID, "level": 1, "name": "21_Sigmoid.py", "problem_id": 21}]


def test_hub_path_calls_load_dataset_per_level_and_uses_its_rows(monkeypatch):
    import datasets

    monkeypatch.setattr("opgen.hub.hub_unreachable", lambda: None)   # the Hub answers

    calls = []

    def fake_load_dataset(path, split=None, **kwargs):
        calls.append((path, split))
        level = int(split.split("_")[1])
        return [{"code": SIGMOID, "level": level, "name": f"{level}_Task.py", "problem_id": level, "extra": 1}]

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    rows = load_reference(HUB_ID)
    assert calls == [(HUB_ID, "level_1"), (HUB_ID, "level_2"), (HUB_ID, "level_3"), (HUB_ID, "level_4")]
    assert [(r["level"], r["name"]) for r in rows] == [(1, "1_Task.py"), (2, "2_Task.py"), (3, "3_Task.py"),
                                                       (4, "4_Task.py")]


def test_a_hub_that_answers_but_cannot_serve_kernelbench_is_one_clear_usage_error(monkeypatch):
    import datasets

    monkeypatch.setattr("opgen.hub.hub_unreachable", lambda: None)

    def offline(path, split=None, **kwargs):
        raise ConnectionError("Couldn't reach 'x' on the Hub (LocalEntryNotFoundError)\nmore detail")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(UsageError, match=r"cannot load KernelBench from the Hugging Face Hub .*--reference"):
        load_reference("someorg/somekb")


@pytest.mark.parametrize("bad", ["/nowhere/problems.jsonl", "./missing_folder", "kb.parquet"])
def test_missing_local_reference_is_a_usage_error(bad):
    with pytest.raises(UsageError, match="not found"):
        load_reference(bad)


def test_malformed_jsonl_row_names_the_line(tmp_path):
    path = tmp_path / "kb.jsonl"
    path.write_text(json.dumps({"code": SIGMOID, "level": 1, "name": "a.py", "problem_id": 1}) + "\n{\"code\": 1}\n")
    with pytest.raises(UsageError, match=r"kb.jsonl:2"):
        load_reference(str(path))


def test_fingerprints_are_cached_by_content_hash(tmp_path, monkeypatch):
    root = _folder(tmp_path / "kb")
    cache = tmp_path / "cache"
    first = reference_index(str(root), cache_dir=cache)
    assert first.names == ["level1/21_Sigmoid.py", "level2/1_Conv2D_ReLU_BiasAdd.py"]
    assert first.signatures == [("sigmoid",), ("conv2d", "relu", "add")]
    files = list(cache.glob("kernelbench-*.json"))
    assert len(files) == 1 and first.content_hash[:24] in files[0].name

    def no_rebuild(*args, **kwargs):
        raise AssertionError("the cached fingerprints should have been used")

    monkeypatch.setattr(index_module, "build_index", no_rebuild)
    cached = reference_index(str(root), cache_dir=cache)
    assert cached.signatures == first.signatures and cached.shingles == first.shingles
    monkeypatch.undo()

    (root / "level1" / "21_Sigmoid.py").write_text(SIGMOID.replace("sigmoid", "tanh"))
    changed = reference_index(str(root), cache_dir=cache)
    assert changed.content_hash != first.content_hash
    assert changed.signatures[0] == ("tanh",)
    assert len(list(cache.glob("kernelbench-*.json"))) == 2
