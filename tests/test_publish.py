"""`opgen publish`: the dataset folder (push_to_hub layout, card, plots) loads offline; upload at the HfApi
boundary; token handling; local-folder targets."""

from __future__ import annotations

import json
import os
import shutil

import huggingface_hub
import pyarrow.parquet as pq
import pytest
from huggingface_hub import DatasetCard

from filters.base import Funnel, Verdict
from opgen.cli import main
from opgen.outcome import outcome_line
from opgen.pipeline.build import BuildConfig
from opgen.pipeline.rundir import write_json
from opgen.publish.card import families_section
from opgen.publish.folder import publish
from opgen.publish.plots import write_plots
from opgen.records import COLUMNS, dataset_table
from opgen.sample.sampler import DEFAULT_MIX, sample_records
from tests.test_build import reference_build

PNG = b"\x89PNG\r\n\x1a\n"
SECRET = "hf_secretTOKEN1234567890"


@pytest.fixture(scope="module")
def sampled_run(tmp_path_factory):
    """A finished-looking run folder from real sampled records (no execution: fast)."""
    run = tmp_path_factory.mktemp("sampled") / "run"
    records = [{**r, "kb_nearest": "level1/19_ReLU.py", "kb_similarity": 0.3} for r in sample_records(0, 0, 5)]
    run.mkdir()
    pq.write_table(dataset_table(records), run / "tasks.parquet")
    funnel = Funnel()
    funnel.count_input(6)
    for keep, reason in [(True, None)] * 5 + [(False, "compile_error")]:
        funnel.count(Verdict(keep, reason, stages=[("compile", 0.0)]))
    write_json(run / "config.json", BuildConfig(n=5, seed=0, reference="kb.jsonl").identity("abc"))
    write_json(run / "stats.json", {
        "tasks": 5, "candidates": 6, "survivors": 5, "surplus": 0, "rejected": {"compile_error": 1},
        "funnel": funnel.to_dict(),
        "by_source": {s: {"quota": int(s == "torch#2") * 5, "tasks": 0, "candidates": 0, "survivors": 0}
                      for s in DEFAULT_MIX}})
    return run


def load_offline(folder):
    import tempfile

    import datasets

    # A fresh cache per load, so each test reads only its own folder.
    return datasets.load_dataset(str(folder), split="train", cache_dir=tempfile.mkdtemp(prefix="opgen-hf-cache-"))


def test_dry_run_writes_a_folder_that_loads_offline(sampled_run, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "ds"
    assert main(["publish", str(sampled_run), "--repo-id", "opgen/cuda-ops-test", "--dry-run", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert str(out) in printed and "load_dataset" in printed
    assert sorted(p.name for p in (out / "data").iterdir()) == ["train-00000-of-00001.parquet"]
    dataset = load_offline(out)
    assert tuple(dataset.column_names) == COLUMNS and dataset.num_rows == 5
    assert dataset.features["eager_ms"].dtype == "float64" and all(v is None for v in dataset["eager_ms"])
    card = DatasetCard.load(out / "README.md")
    meta = card.data.to_dict()
    assert meta["license"] == "mit" and meta["size_categories"] == ["n<1K"] and "pytorch" in meta["tags"]
    assert meta["task_categories"] and meta["configs"][0]["data_files"][0]["path"] == "data/train-*"
    for section in ("## How it was made", "## Funnel", "## Summary", "`compile_error` | 1", "Timing plots skipped"):
        assert section in card.text
    for plot in ("data_source_mix.png", "operator_frequency.png"):
        assert (out / "plots" / plot).read_bytes().startswith(PNG) and f"plots/{plot}" in card.text
    assert not (out / "plots" / "eager_ms.png").exists()


def test_timing_plots_are_drawn_when_timings_exist(tmp_path):
    rows = [{"data_source": "torch#2", "ops": ["torch.tanh", "F.gelu"], "eager_ms": 1.0 + i, "compile_speedup": 1.1 + i / 10}
            for i in range(6)]
    plots, note = write_plots(rows, DEFAULT_MIX, tmp_path)
    assert note is None and len(plots) == 4
    for name in ("eager_ms.png", "compile_speedup.png"):
        assert (tmp_path / "plots" / name).read_bytes().startswith(PNG)


def test_upload_calls_hfapi_with_the_repo_and_never_shows_the_token(sampled_run, tmp_path, capsys, monkeypatch):
    calls = []
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo",
                        lambda self, repo_id, **kw: calls.append(("create_repo", repo_id, kw)))
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder",
                        lambda self, **kw: calls.append(("upload_folder", kw["repo_id"], kw)))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    out = tmp_path / "ds"
    code = main(["publish", str(sampled_run), "--repo-id", "org/name", "--private", "--token", SECRET, "--out", str(out)])
    assert code == 0
    (create, repo, create_kw), (upload, repo2, upload_kw) = calls
    assert (create, repo, repo2, upload) == ("create_repo", "org/name", "org/name", "upload_folder")
    assert create_kw["repo_type"] == "dataset" and create_kw["private"] is True
    assert upload_kw["repo_type"] == "dataset" and os.path.samefile(upload_kw["folder_path"], out)
    captured = capsys.readouterr()
    assert "huggingface.co/datasets/org/name" in captured.out
    assert SECRET not in captured.out + captured.err
    assert all(SECRET.encode() not in p.read_bytes() for p in out.rglob("*") if p.is_file())


def test_token_from_env_and_a_failed_upload_is_one_line_with_the_folder_kept(sampled_run, tmp_path, capsys,
                                                                             monkeypatch):
    def refuse(self, repo_id, **kw):
        raise RuntimeError(f"401 Unauthorized for token {kw.get('token')}")

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", refuse)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    out = tmp_path / "ds"
    assert main(["publish", str(sampled_run), "--repo-id", "org/name", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "upload to org/name failed" in err and SECRET not in err
    assert (out / "data" / "train-00000-of-00001.parquet").is_file() and (out / "README.md").is_file()


def test_missing_token_is_a_clear_error_and_keeps_the_folder(sampled_run, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    out = tmp_path / "ds"
    assert main(["publish", str(sampled_run), "--repo-id", "org/name", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "HF_TOKEN" in err and len(err.strip().splitlines()) == 1
    assert (out / "README.md").is_file()


def test_local_repo_id_publishes_by_copying(sampled_run, tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", lambda *a, **k: pytest.fail("no network for a path"))
    target = tmp_path / "hub-copy"
    result = publish(sampled_run, str(target))
    assert result.target == str(target) and (target / "README.md").is_file()
    assert load_offline(target).num_rows == 5


def test_bad_inputs_exit_2(sampled_run, tmp_path, capsys):
    assert main(["publish", str(tmp_path), "--repo-id", "org/name", "--dry-run"]) == 2
    assert "no finished build" in capsys.readouterr().err
    assert main(["publish", str(sampled_run), "--repo-id", "not a repo id", "--dry-run"]) == 2
    assert "ORG/NAME" in capsys.readouterr().err


@pytest.mark.heavy
def test_publish_a_real_build(tmp_path_factory, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = reference_build(tmp_path_factory)
    result = publish(run, "opgen/cuda-ops-smoke", dry_run=True, out=tmp_path / "ds")
    dataset = load_offline(result.folder)
    assert tuple(dataset.column_names) == COLUMNS
    assert dataset.to_list() == pq.read_table(run / "tasks.parquet").to_pylist()
    stats = json.loads((run / "stats.json").read_text())
    card = DatasetCard.load(result.folder / "README.md")
    assert outcome_line(stats["outcome"]) in card.text


def test_rebuilt_folder_of_the_same_name_loads_its_own_rows(sampled_run, tmp_path, monkeypatch):
    """`datasets` caches local folders; the card's dataset_info (as push_to_hub writes it) keys that cache."""
    import datasets

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cache = str(tmp_path / "hf-cache")  # one shared cache, as a user's ~/.cache is
    first = tmp_path / "a" / "dataset"
    assert main(["publish", str(sampled_run), "--repo-id", "opgen/t", "--dry-run", "--out", str(first)]) == 0
    assert datasets.load_dataset(str(first), split="train", cache_dir=cache).num_rows == 5
    smaller = tmp_path / "small-run"
    shutil.copytree(sampled_run, smaller)
    pq.write_table(pq.read_table(smaller / "tasks.parquet").slice(0, 3), smaller / "tasks.parquet")
    second = tmp_path / "b" / "dataset"
    assert main(["publish", str(smaller), "--repo-id", "opgen/t", "--dry-run", "--out", str(second)]) == 0
    card = DatasetCard.load(second / "README.md").data.to_dict()
    assert card["dataset_info"]["splits"][0]["num_examples"] == 3
    assert datasets.load_dataset(str(second), split="train", cache_dir=cache).num_rows == 3


def test_card_shows_the_family_mix_with_synonyms_counted_as_one():
    rows = [{"ops": ["torch.mm", "F.relu"]}, {"ops": ["torch.matmul", "nn.ReLU"]},
            {"ops": ["nn.Linear", "torch.tanh"], "families": ["matmul", "tanh"]}, {"ops": ["nn.Conv2d"]}]
    text = "\n".join(families_section(rows))
    assert "Distinct families: 4; distinct family chains: 3; distinct adjacent pairs: 2." in text
    assert "| `matmul` | 3 | 75.0% |" in text and "| `relu` | 2 | 50.0% |" in text
    assert "| `matmul` → `relu` | 2 | 50.0% |" in text and "| `matmul` → `tanh` | 1 | 25.0% |" in text
    assert text.index("`matmul` → `relu`") < text.index("`matmul` → `tanh`")  # most common first


def test_published_card_has_the_family_section(sampled_run, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "ds"
    assert main(["publish", str(sampled_run), "--repo-id", "opgen/fam", "--dry-run", "--out", str(out)]) == 0
    card = DatasetCard.load(out / "README.md").text
    assert "## Operator families" in card and "adjacent family pairs" in card
    rows = pq.read_table(out / "data" / "train-00000-of-00001.parquet").to_pylist()
    assert all(len(r["families"]) == len(r["ops"]) for r in rows)
    assert f"`{rows[0]['families'][0]}`" in card.split("## Operator families")[1]


def test_the_audits_read_a_published_folder_as_its_run(sampled_run, tmp_path, monkeypatch):
    from opgen.analysis.families import family_report
    from opgen.analysis.grader_proof import audit
    from opgen.analysis.rows import read_task_rows

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "ds"
    assert main(["publish", str(sampled_run), "--repo-id", "opgen/audit", "--dry-run", "--out", str(out)]) == 0
    published, built = read_task_rows(out), read_task_rows(sampled_run)
    assert [r["id"] for r in published] == [r["id"] for r in built] and len(published) == 5
    assert audit(published, 0.99) == audit(built, 0.99)
    reference = tmp_path / "kb.jsonl"
    relu = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
    reference.write_text(json.dumps({"level": 1, "problem_id": 19, "name": "19_ReLU.py", "code": relu}) + "\n")
    assert family_report(published, str(reference), "tasks") == family_report(built, str(reference), "tasks")
