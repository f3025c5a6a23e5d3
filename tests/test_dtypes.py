"""Tasks in bf16 and fp16: the rendering (inputs in the precision, parameters cast to it), the tolerance the
checks take from the outputs' dtype, and a reduced-precision task that the visibility rule rejects."""

from __future__ import annotations

import json
import math

import pytest
import torch

from opgen.sample.analyze import estimate_gpu_ms
from opgen.sample.sampler import record_from_graph, sample_graph, sample_records
from opgen.taskcode.dtypes import TOLERANCES, dtype_of, tolerance_of
from opgen.vocab import cached_vocabulary
from tests.test_grader_proof import SOFTMAX, task, verdict


def run_task(code: str) -> torch.Tensor:
    namespace: dict = {}
    exec(compile(code, "<task>", "exec"), namespace)
    model = namespace["Model"](*namespace["get_init_inputs"]()).eval()
    return model(*namespace["get_inputs"]())


@pytest.mark.parametrize("dtype, spelling, torch_dtype", [("bf16", "torch.bfloat16", torch.bfloat16),
                                                          ("fp16", "torch.float16", torch.float16)])
def test_a_reduced_precision_task_draws_its_inputs_and_holds_its_parameters_in_it(dtype, spelling, torch_dtype,
                                                                                 tmp_path, monkeypatch):
    from opgen.vocab import dtype_support

    monkeypatch.setattr(dtype_support, "SUPPORT_PATH", tmp_path / "none.json")   # every operator has a kernel
    dtype_support.vocabulary_for.cache_clear()
    fp32 = sample_records(0, 0, 6, "smoke")
    reduced = sample_records(0, 0, 6, "smoke", dtype=dtype)
    dtype_support.vocabulary_for.cache_clear()
    assert [r["ops"] for r in reduced] == [r["ops"] for r in fp32]     # the same chains, in another precision
    assert all("dtype=" not in r["code"] and "self.to(" not in r["code"] for r in fp32)
    for record in reduced:
        assert f"self.to({spelling})" in record["code"] and f"dtype={spelling}" in record["code"]
        assert record["id"] != fp32[reduced.index(record)]["id"]
    record = next(r for r in reduced if "Conv" in " ".join(r["ops"]) or "Linear" in " ".join(r["ops"]))
    namespace: dict = {}
    exec(compile(record["code"], "<task>", "exec"), namespace)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    assert {p.dtype for p in model.parameters()} == {torch_dtype}
    if dtype == "bf16":   # half-precision kernels are not all on the CPU; bf16 ones are
        assert run_task(record["code"]).dtype == torch_dtype


def test_the_tolerance_follows_the_outputs_dtype():
    assert dtype_of([torch.zeros(2, dtype=torch.long), torch.zeros(2, dtype=torch.bfloat16)]) == "bf16"
    assert dtype_of([torch.zeros(2, dtype=torch.long)]) == "fp32"
    assert tolerance_of([torch.zeros(2, dtype=torch.float16)]) is TOLERANCES["fp16"]
    for tolerance in TOLERANCES.values():   # each names where its figures come from
        assert tolerance.source and tolerance.repeat_rtol < tolerance.rtol
    assert TOLERANCES["fp32"].text() == "atol=rtol=0.01"


def test_the_visibility_rule_rejects_a_bf16_softmax_over_long_rows_at_the_bf16_tolerance():
    code = task(SOFTMAX, "torch.randn(64, 1024, dtype=torch.bfloat16)")
    result = verdict(code)
    assert (result.reason, result.stages[-1][0]) == ("degenerate_output", "visible")
    assert (result.metrics["dtype"], result.metrics["atol"], result.metrics["rtol"]) == ("bf16", 0.01, 0.01)
    short = verdict(task(SOFTMAX, "torch.randn(64, 16, dtype=torch.bfloat16)"))
    assert short.keep and short.metrics["dtype"] == "bf16"


def test_the_probe_leaves_out_an_operator_without_a_kernel_in_the_precision(tmp_path, monkeypatch, capsys):
    import json

    from opgen.cli import main
    from opgen.vocab import cached_vocabulary, dtype_support

    support = tmp_path / "support.json"
    assert main(["vocab", "--probe-dtypes", "bf16", "--device", "cpu", "--ops", "torch.cdist", "F.relu",
                 "--out", str(support)]) == 0
    found = json.loads(support.read_text())
    assert list(found["bf16"]["unsupported"]) == ["torch.cdist"]          # the CPU has no bf16 cdist kernel
    assert "BFloat16" in found["bf16"]["unsupported"]["torch.cdist"] and found["probe"]["device"] == "cpu"

    monkeypatch.setattr(dtype_support, "SUPPORT_PATH", support)
    dtype_support.vocabulary_for.cache_clear()
    capsys.readouterr()
    assert main(["vocab", "--dtype", "bf16", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert "torch.cdist" in listed["left_out"] and "torch.cdist" not in {op["name"] for op in listed["operators"]}
    assert "torch.cdist" not in dtype_support.vocabulary_for(cached_vocabulary(), "bf16")
    assert "torch.cdist" in dtype_support.vocabulary_for(cached_vocabulary(), "fp32")
    dtype_support.vocabulary_for.cache_clear()


@pytest.mark.heavy
def test_builds_in_two_precisions_publish_as_configs_named_by_dtype(tmp_path_factory, tmp_path):
    import shutil

    import datasets
    import pyarrow.parquet as pq
    from huggingface_hub import DatasetCard

    from opgen.cli import main
    from tests.conftest import run_cli
    from tests.test_build import build_args, reference_build

    fp32 = reference_build(tmp_path_factory)
    bf16 = tmp_path / "bf16"
    result = run_cli(*build_args(bf16), "--dtype", "bf16")
    assert result.returncode == 0, result.stderr[-3000:]
    folder = tmp_path / "dataset"
    assert main(["publish", str(fp32), str(bf16), "--repo-id", "opgen/precisions", "--dry-run",
                 "--out", str(folder)]) == 0
    # another folder of the same name, the same fp32 rows and fewer bf16 rows, read through one cache: its own rows
    smaller = tmp_path / "bf16-small"
    shutil.copytree(bf16, smaller)
    pq.write_table(pq.read_table(smaller / "tasks.parquet").slice(0, 2), smaller / "tasks.parquet")
    other = tmp_path / "other" / "dataset"
    assert main(["publish", str(fp32), str(smaller), "--repo-id", "opgen/precisions", "--dry-run",
                 "--out", str(other)]) == 0
    cache = str(tmp_path / "hf-cache")
    for published, rows in ((folder, pq.read_metadata(bf16 / "tasks.parquet").num_rows), (other, 2)):
        assert datasets.load_dataset(str(published), "bf16", split="train", cache_dir=cache).num_rows == rows
    default = datasets.load_dataset(str(folder), split="train")
    reduced = datasets.load_dataset(str(folder), "bf16", split="train")
    assert set(default["dtype"]) == {"fp32"} and set(reduced["dtype"]) == {"bf16"}
    assert all("dtype=torch.bfloat16" in code for code in reduced["code"])
    assert sorted(datasets.load_dataset(str(folder), "fp32", split="train")["id"]) == sorted(default["id"])
    card = DatasetCard.load(folder / "README.md")
    assert [c["config_name"] for c in card.data.configs][:3] == ["default", "fp32", "bf16"]
    assert "## Precisions" in card.text and "| `bf16` | bf16 |" in card.text
    assert main(["retime", str(folder), "--device", "cpu", "--config", "bf16", "--name", "ci-cpu", "--trials", "2",
                 "--warmups", "0", "--no-compile", "--no-progress"]) == 0
    assert main(["check", str(folder), "--config", "bf16", "--device", "cpu", "--sample", "2", "--no-progress"]) == 0
    timed = datasets.load_dataset(str(folder), "baseline-ci-cpu-bf16", split="train")
    assert sorted(timed["id"]) == sorted(reduced["id"]) and all(ms > 0 for ms in timed["eager_ms"])
    from scripts.analysis import precision_twins

    twins_file = tmp_path / "twins.jsonl"
    assert precision_twins.main(["twins", str(folder), "--config", "bf16", "--out", str(twins_file)]) == 0
    twins = [json.loads(line) for line in twins_file.read_text().splitlines()]
    assert sorted(t["twin_of"] for t in twins) == sorted(reduced["id"]) and {t["dtype"] for t in twins} == {"fp32"}


def test_precision_twins_are_the_same_graph_in_fp32_and_give_the_speedups(tmp_path):
    """A bf16 task's fp32 twin is its own graph and sizes rendered in fp32 (not the fp32 sample of the same seed,
    which may fit other sizes); the speed-ups divide the twin's time by the task's."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts" / "analysis"))
    try:
        import precision_twins
    finally:
        sys.path.pop(0)
    from opgen.sample.render import render
    from opgen.sample.sampler import graph_from_json
    from opgen.vocab import cached_vocabulary

    tasks = sample_records(0, 0, 4, "smoke", dtype="bf16")
    source = tmp_path / "tasks.jsonl"
    source.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    assert precision_twins.main(["twins", str(source), "--dtype", "fp32", "--out", str(tmp_path / "twins.jsonl")]) == 0
    twins = [json.loads(line) for line in (tmp_path / "twins.jsonl").read_text().splitlines()]
    for bf16_task, twin in zip(tasks, twins):
        graph = graph_from_json(bf16_task["graph"])
        graph.graph.pop("dtype")
        assert twin["twin_of"] == bf16_task["id"] and twin["code"] == render(graph, cached_vocabulary())
        assert "bfloat16" in bf16_task["code"] and "bfloat16" not in twin["code"] and twin["id"] != bf16_task["id"]
    timed_tasks = [{**t, "eager_ms": 1.0, "compile_ms": 2.0} for t in tasks]
    timed_twins = [{**w, "eager_ms": 2.0 + i, "compile_ms": 2.0} for i, w in enumerate(twins)]
    report = precision_twins.speedups(timed_tasks, timed_twins)
    assert report["eager"]["pairs"] == 4 and report["eager"]["median_speedup"] == 3.5
    assert report["compile"]["geomean_speedup"] == pytest.approx(1.0)


def test_a_reduced_precision_gpu_task_is_sized_for_its_element_and_its_tensor_cores():
    """Under the same 1.5 GiB tensor cap a bf16 element is half an fp32 one, so a memory-bound chain grows to twice
    the elements; matrix work is estimated at the tensor cores' rate, so the same product reads faster."""
    vocab = cached_vocabulary()
    graph = sample_graph(0, 11, "gpu", source="torch#1")   # one elementwise operator, grown to the tensor cap
    reduced = graph.copy()
    reduced.graph["dtype"] = "bf16"
    fp32, bf16 = record_from_graph(graph, vocab), record_from_graph(reduced, vocab)
    assert fp32["flops"] == 0 and "torch.bfloat16" in bf16["code"]
    assert math.prod(bf16["output_shape"]) == 2 * math.prod(fp32["output_shape"])
    assert bf16["bytes_moved"] == fp32["bytes_moved"]
    flops, moved = 10**12, 10**9
    assert estimate_gpu_ms(flops, moved, 1, "bf16") < estimate_gpu_ms(flops, moved, 1, "fp32") / 2
    assert estimate_gpu_ms(flops, moved, 1, "bf16") == estimate_gpu_ms(flops, moved, 1, "fp16")
