"""`--focus`: candidates built around chosen operators (sampling, the build, the up-front and in-build stops) and
publishing several builds as one dataset (a focused build topping up an earlier one)."""

from __future__ import annotations

import hashlib
import json
import textwrap
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from filters.base import Funnel
from filters.dedup.near import dedup_verdicts
from opgen.cli import main
from opgen.pipeline.build import BuildConfig
from opgen.pipeline.rundir import write_json
from opgen.records import dataset_table
from opgen.sample.focus import focus_hits, focused_mix, resolve_focus
from opgen.sample.render import op_nodes
from opgen.sample.sampler import DEFAULT_MIX, graph_from_json, sample_records
from opgen.vocab import load_vocabulary
from tests.conftest import KERNELBENCH, run_cli, run_main

PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "my_ops.py"
PLUGIN_OPS = ("torch.deg2rad", "nn.LPPool3d", "torch.nansum")
# sha256 over the ids of `opgen sample --seed 1` candidates 0-39 (smoke, built-in vocabulary) as sampled before
# `--focus` existed: sampling without a focus must stay byte for byte what it was. A deliberate change to the
# sampler or the vocabulary changes it: then set it again, from the output of the new sampler.
UNFOCUSED_IDS_SHA256 = "5b78eff753ed77d5f41b5d133d0879ad3256a95e631a5f7975ef08c92f6a7792"

NEVER_FITS = textwrap.dedent('''
    """A plugin operator whose output is over every profile's tensor limit: no chain can hold it."""
    from opgen.vocab.spec import OpSpec

    SPECS = [OpSpec(name="torch.outer_huge", category="elementwise", phrase="an outer product with a huge vector",
                    ranks=(2,), out_shape=lambda shape, p: shape + (1 << 20,), call="torch.outer_huge({x})")]
''')
ALWAYS_NAN = textwrap.dedent('''
    """A plugin operator that fits every chain and whose output is always NaN: it fails every filter."""
    from opgen.vocab.spec import OpSpec

    SPECS = [OpSpec(name="torch.log_of_negative", category="elementwise", phrase="takes the log of a negative number",
                    call="torch.log(-torch.abs({x}) - 1.0)")]
''')


@pytest.fixture(scope="module")
def plugin_vocab():
    return load_vocabulary([PLUGIN])


@pytest.fixture(scope="module")
def focused_records(plugin_vocab):
    focus = resolve_focus(["plugins"], plugin_vocab, [PLUGIN])
    return sample_records(0, 0, 240, "smoke", plugin_vocab, mix=focused_mix(DEFAULT_MIX, plugin_vocab, focus),
                          focus=focus)


def test_unfocused_sampling_is_unchanged():
    ids = "\n".join(r["id"] for r in sample_records(1, 0, 40, "smoke"))
    assert hashlib.sha256(ids.encode()).hexdigest() == UNFOCUSED_IDS_SHA256


def test_plugins_names_every_plugin_operator_and_a_family_names_its_spellings(plugin_vocab):
    assert resolve_focus(["plugins"], plugin_vocab, [PLUGIN]) == PLUGIN_OPS
    relu = resolve_focus(["relu"], plugin_vocab)
    assert "nn.ReLU" in relu and "F.relu" in relu and all(plugin_vocab[name].family == "relu" for name in relu)
    # a torch-only focus cannot make a standalone transformers task: that source leaves the mix
    assert "transformers" not in focused_mix(DEFAULT_MIX, plugin_vocab, PLUGIN_OPS)


def test_every_focused_candidate_holds_a_focused_operator(focused_records):
    held = Counter()
    for record in focused_records:
        assert record["focus"] == list(PLUGIN_OPS)
        in_code = [name for name in PLUGIN_OPS if name in record["ops"]]   # the code's own AST, not the graph
        assert in_code, record["ops"]
        held.update(in_code)
    # candidate i takes the focused operators in turn from the (i mod 3)-th: each about a third
    assert all(60 <= held[name] <= 100 for name in PLUGIN_OPS), held


def test_focused_operator_takes_every_position_in_varied_company(focused_records):
    positions = Counter()
    company = Counter()
    for record in focused_records:
        graph = graph_from_json(record["graph"])
        names = [graph.nodes[node]["op"] for node in op_nodes(graph)]
        for position, name in enumerate(names):
            if name in PLUGIN_OPS:
                positions[(len(names), position)] += 1
            else:
                company[name] += 1
    first, second = positions[(2, 0)], positions[(2, 1)]
    assert first and second and 0.6 <= first / second <= 1.6, positions   # drawn uniformly, not where it fits best
    longer = {position for (length, position) in positions if length >= 3}
    assert {0, 1, 2} <= longer, positions   # first, middle and last of longer chains
    assert len(company) >= 40 and company.most_common(1)[0][1] <= 0.15 * sum(company.values()), company


def test_focus_on_a_family_builds_around_it():
    records = sample_records(3, 0, 30, "smoke", focus=resolve_focus(["layer_norm"], load_vocabulary()),
                             mix=dict(DEFAULT_MIX, transformers=0.0))
    assert all("layer_norm" in record["families"] for record in records)


def test_unknown_focus_name_is_one_line_and_exit_2(tmp_path, capsys):
    result = run_main(capsys, "sample", "--n", "3", "--seed", "0", "--out", str(tmp_path / "c.jsonl"),
                      "--focus", "F.relu", "nn.NoSuchOp")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "'nn.NoSuchOp'" in result.stderr and "Traceback" not in result.stderr
    result = run_main(capsys, "sample", "--n", "3", "--seed", "0", "--out", str(tmp_path / "c.jsonl"), "--focus",
                      "plugins")
    assert result.returncode == 2 and "--vocab-plugin" in result.stderr and result.stderr.count("\n") == 1
    assert not (tmp_path / "c.jsonl").exists()


def test_sample_cli_focus_plugins(tmp_path):
    out = tmp_path / "c.jsonl"
    result = run_cli("sample", "--n", "12", "--seed", "5", "--out", str(out), "--vocab-plugin", str(PLUGIN),
                     "--focus", "plugins")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 12 and all(focus_hits(r, PLUGIN_OPS) for r in records)
    assert {name for r in records for name in focus_hits(r, PLUGIN_OPS)} == set(PLUGIN_OPS)


@pytest.mark.parametrize("command", ["sample", "build"])
def test_a_plugin_operator_that_never_fits_is_named_up_front(tmp_path, command, capsys):
    plugin = tmp_path / "huge_ops.py"
    plugin.write_text(NEVER_FITS)
    out = tmp_path / ("c.jsonl" if command == "sample" else "run")
    args = ["--n", "4", "--seed", "0", "--out", str(out), "--vocab-plugin", str(plugin), "--focus", "plugins"]
    if command == "build":
        args += ["--reference", str(KERNELBENCH), "--no-progress"]
    result = run_main(capsys, command, *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert "'torch.outer_huge'" in result.stderr and "never fits" in result.stderr
    assert "over the profile's limit" in result.stderr   # the reason
    assert not out.exists()   # nothing started: no candidates, no run folder


@pytest.mark.heavy
def test_focused_build_end_to_end(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["build", "--n", "3", "--seed", "0", "--device", "cpu", "--profile", "smoke", "--shard-size", "2",
            "--workers", "2", "--no-progress", "--out", str(out), "--reference", str(KERNELBENCH),
            "--vocab-plugin", str(PLUGIN), "--focus", "plugins"]
    result = run_cli(*args)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = pq.read_table(out / "tasks.parquet").to_pylist()
    assert len(rows) == 3
    assert all(row["focus"] == list(PLUGIN_OPS) and focus_hits(row, PLUGIN_OPS) for row in rows)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["focus"]["operators"] == list(PLUGIN_OPS)
    assert stats["focus"]["tasks"] == {name: sum(name in row["ops"] for row in rows) for name in PLUGIN_OPS}
    assert "focus (plugins): tasks holding each focused operator" in result.stdout
    assert json.loads((out / "config.json").read_text())["focus"] == ["plugins"]
    # a resumed build with another focus is refused like any changed option
    args[args.index("plugins")] = "torch.nansum"
    again = run_main(capsys, *args)
    assert again.returncode == 2 and "differs in: focus" in again.stderr


@pytest.mark.heavy
def test_a_focused_operator_that_fails_every_filter_stops_the_build(tmp_path):
    plugin = tmp_path / "nan_ops.py"
    plugin.write_text(ALWAYS_NAN)
    result = run_cli("build", "--n", "2", "--seed", "0", "--device", "cpu", "--profile", "smoke", "--shard-size", "4",
                     "--workers", "2", "--no-progress", "--out", str(tmp_path / "run"), "--reference", str(KERNELBENCH),
                     "--vocab-plugin", str(plugin), "--focus", "plugins")
    assert result.returncode == 2, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert "'torch.log_of_negative' fails every filter" in last and "non_finite" in last, last
    assert "Traceback" not in result.stderr


# publishing several builds as one dataset ------------------------------------------------------------------------
def _write_run(folder: Path, records: list[dict], config: BuildConfig) -> Path:
    """A finished-looking run folder of these records (no execution: fast)."""
    folder.mkdir()
    pq.write_table(dataset_table(records), folder / "tasks.parquet")
    write_json(folder / "config.json", config.identity("abc"))
    sources = Counter(r["data_source"] for r in records)
    write_json(folder / "stats.json", {
        "tasks": len(records), "candidates": len(records), "survivors": len(records), "surplus": 0, "rejected": {},
        "funnel": Funnel().to_dict(),
        "by_source": {s: {"quota": sources[s], "tasks": sources[s], "candidates": sources[s], "survivors": sources[s]}
                      for s in DEFAULT_MIX}})
    return folder


def _clean(records: list[dict]) -> list[dict]:
    """The records that dedup and decontamination keep, as a finished build's would be."""
    return [r for r, v in zip(records, dedup_verdicts(records, reference=str(KERNELBENCH), max_per_chain=0)) if v["keep"]]


def test_publish_tops_up_a_dataset_with_a_focused_build(tmp_path, plugin_vocab, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    base = _clean([{**r, "kb_nearest": None, "kb_similarity": 0.1} for r in sample_records(0, 0, 12)])
    focus = resolve_focus(["plugins"], plugin_vocab, [PLUGIN])
    topup = _clean(sample_records(1, 0, 12, "smoke", plugin_vocab, mix=focused_mix(DEFAULT_MIX, plugin_vocab, focus),
                                  focus=focus))
    assert len(base) >= 8 and len(topup) >= 8
    # the top-up also holds two exact copies of earlier tasks and one renamed copy (a comment and new names)
    renamed = base[2]["code"].replace("def forward(self, x):", "def forward(self, inp):  # renamed\n        x = inp")
    assert renamed != base[2]["code"]
    near = {**base[2], "code": renamed, "id": "ops-" + hashlib.sha256(renamed.encode()).hexdigest()[:16]}
    planted = [dict(base[0]), dict(base[1]), near]
    run_a = _write_run(tmp_path / "a", base, BuildConfig(n=len(base), seed=0, reference=str(KERNELBENCH)))
    run_b = _write_run(tmp_path / "b", topup + planted,
                       BuildConfig(n=len(topup), seed=1, reference=str(KERNELBENCH), vocab_plugins=(str(PLUGIN),),
                                   focus=("plugins",)))
    out = tmp_path / "merged"
    assert main(["publish", str(run_a), str(run_b), "--repo-id", "opgen/topped-up", "--dry-run", "--out", str(out)]) == 0
    rows = pq.read_table(out / "data").to_pylist()
    ids = [row["id"] for row in rows]
    assert len(ids) == len(set(ids))                                   # ids unique
    assert ids[:len(base)] == [r["id"] for r in base]                  # the earlier dataset whole, first
    assert near["id"] not in ids                                       # the renamed copy dropped as a duplicate
    assert Counter(ids)[base[0]["id"]] == 1 and Counter(ids)[base[1]["id"]] == 1
    added = rows[len(base):]
    assert added and all(row["focus"] == list(PLUGIN_OPS) and row["seed"] == 1 for row in added)   # provenance
    assert all(row["focus"] is None and row["seed"] == 0 for row in rows[:len(base)])
    card = (out / "README.md").read_text()
    assert "## Sources" in card and "## Focus" in card and "--focus plugins" in card
    merge_row = next(line for line in card.splitlines() if line.startswith("| merge |"))
    assert merge_row.split("|")[2].strip() == str(len(base) + len(topup) + 3)
    assert int(merge_row.split("|")[4]) >= 3                          # at least the three planted copies
    import tempfile

    import datasets

    loaded = datasets.load_dataset(str(out), split="train", cache_dir=tempfile.mkdtemp(prefix="opgen-hf-cache-"))
    assert loaded.num_rows == len(rows)


def test_publish_refuses_builds_of_another_device(tmp_path, capsys):
    records = sample_records(0, 0, 2)
    run_a = _write_run(tmp_path / "a", records, BuildConfig(n=2, seed=0))
    run_b = _write_run(tmp_path / "b", records, BuildConfig(n=2, seed=1, device="cuda"))
    result = run_main(capsys, "publish", str(run_a), str(run_b), "--repo-id", "opgen/x", "--dry-run")
    assert result.returncode == 2 and "--device" in result.stderr and result.stderr.count("\n") == 1
