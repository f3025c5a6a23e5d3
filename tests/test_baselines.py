"""Baselines a consumer can use: KernelBench-format timing files (checked against KernelBench's own), and
`opgen retime` adding a `baseline-<gpu>` config that `datasets.load_dataset(folder, config)` loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from huggingface_hub import DatasetCard

from opgen.cli import main
from opgen.publish.baselines import (
    KB_FILES,
    KB_LEVEL_KEY,
    gpu_slug,
    kernelbench_timings,
    write_kernelbench_files,
)
from opgen.publish.folder import publish
from tests.test_build import reference_build

KB_TIMING = Path(__file__).resolve().parents[2] / "shared" / "kernelbench" / "timing"


def _timed_row(task_id: str, hardware: str = "NVIDIA H200") -> dict:
    row = {"id": task_id, "hardware": hardware, "cuda_version": "13.0"}
    for kind, base in (("eager", 2.0), ("compile", 1.0)):
        row.update({f"{kind}_ms_mean": base, f"{kind}_ms_std": 0.01, f"{kind}_ms_min": base * 0.99,
                    f"{kind}_ms_max": base * 1.2, f"{kind}_ms_count": 17})
    return row


def _kernelbench_file() -> dict:
    files = sorted(KB_TIMING.glob("*baseline_time_torch.json"))
    if not files:
        pytest.skip(f"KernelBench's timing files are not at {KB_TIMING}")
    return json.loads(files[0].read_text())


def assert_kernelbench_shape(ours: Path, kind: str) -> dict:
    """`ours`, read back, has the shape of KernelBench's own file of the same kind (eager or compile): the same
    file-name suffix, {group: {"<problem>.py": entry}}, every entry with KernelBench's keys and value types."""
    theirs_files = sorted(KB_TIMING.glob(f"*_{KB_FILES[kind]}"))
    if not theirs_files:
        pytest.skip(f"KernelBench's timing files are not at {KB_TIMING}")
    assert ours.name.endswith(f"_{KB_FILES[kind]}")
    theirs, read = json.loads(theirs_files[0].read_text()), json.loads(ours.read_text())
    types: dict[str, set[type]] = {}
    for problems in theirs.values():
        for entry in problems.values():
            for key, value in entry.items():
                types.setdefault(key, set()).add(type(value))
    assert list(read) == [KB_LEVEL_KEY] and isinstance(read[KB_LEVEL_KEY], dict)
    for name, entry in read[KB_LEVEL_KEY].items():
        assert name.endswith(".py") and set(entry) == set(types), (name, entry)
        assert all(type(value) in types[key] for key, value in entry.items()), (name, entry)
    return read[KB_LEVEL_KEY]


def test_our_files_have_kernelbenchs_shape():
    theirs = _kernelbench_file()
    level, problems = next(iter(theirs.items()))
    their_entry = next(iter(problems.values()))
    ours = kernelbench_timings([_timed_row("ops-1"), _timed_row("ops-2"), {"id": "ops-3", "eager_ms_mean": None}],
                               "eager")
    assert list(ours) == [KB_LEVEL_KEY] and set(ours[KB_LEVEL_KEY]) == {"ops-1.py", "ops-2.py"}
    for entry in ours[KB_LEVEL_KEY].values():
        assert set(entry) == set(their_entry)
        assert {k: type(v) for k, v in entry.items()} == {k: type(v) for k, v in their_entry.items()}
    assert ours[KB_LEVEL_KEY]["ops-1.py"]["device"] == "cuda:0" and level.startswith("level")


def test_files_are_written_per_gpu_for_eager_and_compile(tmp_path):
    written = write_kernelbench_files([_timed_row("a"), _timed_row("b", "NVIDIA H100 80GB HBM3")], tmp_path)
    names = sorted(p.name for p in written)
    assert names == ["NVIDIA_H100_80GB_HBM3_baseline_time_torch.json",
                     "NVIDIA_H100_80GB_HBM3_baseline_time_torch_compile_inductor_default.json",
                     "NVIDIA_H200_baseline_time_torch.json",
                     "NVIDIA_H200_baseline_time_torch_compile_inductor_default.json"]
    compiled = json.loads((tmp_path / names[-1]).read_text())
    assert compiled[KB_LEVEL_KEY]["a.py"]["mean"] == 1.0 and "b.py" not in compiled[KB_LEVEL_KEY]
    assert write_kernelbench_files([{"id": "x", "hardware": None}], tmp_path / "none") == []


def test_gpu_slug():
    assert gpu_slug("NVIDIA H200") == "nvidia-h200"
    assert gpu_slug("cpu: AMD EPYC 7B13 64-Core Processor") == "cpu-amd-epyc-7b13-64-core-processor"


@pytest.mark.heavy
def test_retime_adds_a_config_that_load_dataset_loads(tmp_path_factory, tmp_path):
    import datasets

    run = reference_build(tmp_path_factory)
    folder = tmp_path / "dataset"
    publish(run, "opgen/retime-test", dry_run=True, out=folder)
    assert main(["retime", str(folder), "--device", "cpu", "--name", "ci-cpu", "--trials", "3", "--warmups", "0",
                 "--no-compile", "--no-progress"]) == 0
    config = "baseline-ci-cpu"
    rows = datasets.load_dataset(str(folder), config, split="train")
    tasks = datasets.load_dataset(str(folder), split="train")
    assert sorted(rows["id"]) == sorted(tasks["id"]) and all(ms > 0 for ms in rows["eager_ms"])
    assert set(rows["eager_ms_count"]) == {3} and rows[0]["precision"] == "default"
    card = DatasetCard.load(folder / "README.md")
    assert [c["config_name"] for c in card.data.configs] == ["default", config]
    assert "## Baselines" in card.text
    assert f"| {rows[0]['hardware']} | `{config}` | `baselines/ci-cpu/` |" in card.text   # the GPU (here the CPU)
    files = sorted((folder / "baselines" / "ci-cpu").glob("*.json"))
    assert len(files) == 2
    eager = assert_kernelbench_shape(files[0], "eager")
    assert assert_kernelbench_shape(files[1], "compile") == {}   # --no-compile: no compile timings
    assert set(eager) == {f"{task_id}.py" for task_id in tasks["id"]}
    assert {e["num_trials"] for e in eager.values()} == {3} and {e["device"] for e in eager.values()} == {"cpu"}
    # a second retime replaces its own config, and a rebuilt folder keeps it
    assert main(["retime", str(folder), "--device", "cpu", "--name", "ci-cpu", "--trials", "2", "--warmups", "0",
                 "--no-compile", "--no-progress", "--limit", "2"]) == 0
    [data] = (folder / "baselines" / "ci-cpu").glob("train-*.parquet")
    again = datasets.load_dataset(str(folder), config, split="train")   # the same cache: its new rows, not the old
    assert list(again["eager_ms"]) == pq.read_table(data).column("eager_ms").to_pylist() and again.num_rows == 2
    publish(run, "opgen/retime-test", dry_run=True, out=folder)
    assert [c["config_name"] for c in DatasetCard.load(folder / "README.md").data.configs] == ["default", config]
    shutil.rmtree(folder)


def test_retime_bad_input_is_one_line(tmp_path, capsys):
    assert main(["retime", str(tmp_path), "--device", "cpu"]) == 2
    assert main(["retime", "not a dataset", "--device", "cpu"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(line.startswith("opgen: error:") for line in errors)
