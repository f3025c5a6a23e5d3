"""Canonical operator families: every spec names one, synonyms share one, every `ops` spelling maps to one."""

from __future__ import annotations

import json

import pytest

from opgen.records import COLUMN_REGISTRY, COLUMNS
from opgen.sample.sampler import sample_records
from opgen.taskcode.ops import ops_from_code
from opgen.vocab import VocabError, Vocabulary, load_vocabulary
from opgen.vocab.families import families_of, family_of, family_signature
from opgen.vocab.spec import FAMILY_PATTERN, OpSpec, default_family
from tests.conftest import run_main
from tests.test_vocab_plugins import PLUGIN


@pytest.fixture(scope="module")
def vocab():
    return load_vocabulary(entry_points=False)


def test_every_spec_names_a_family(vocab):
    assert all(FAMILY_PATTERN.match(spec.family) for spec in vocab)
    families = {spec.family for spec in vocab}
    assert len(families) < len(vocab)          # synonyms share
    assert len(families) >= 150


@pytest.mark.parametrize("synonyms, family", [
    (("torch.mm", "torch.matmul", "torch.einsum", "F.linear", "nn.Linear", "torch.addmm"), "matmul"),
    (("nn.ReLU", "F.relu", "torch.relu"), "relu"),
    (("nn.CosineSimilarity", "F.cosine_similarity"), "cosine_similarity"),
    (("nn.Softmax", "F.softmax", "torch.softmax", "nn.Softmax2d"), "softmax"),
    (("nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d"), "batch_norm"),
    (("nn.CrossEntropyLoss", "F.cross_entropy"), "cross_entropy"),
    (("nn.RMSNorm", "F.rms_norm", "transformers.LlamaRMSNorm", "transformers.Qwen3RMSNorm"), "rms_norm"),
])
def test_synonyms_share_one_family(vocab, synonyms, family):
    assert {vocab[name].family for name in synonyms} == {family}
    assert {family_of(name) for name in synonyms} == {family}


def test_distinct_operators_keep_distinct_families(vocab):
    names = ["nn.Conv2d", "nn.Conv3d", "nn.ConvTranspose2d", "nn.ReLU", "nn.ReLU6", "nn.GELU", "torch.matmul",
             "torch.bmm", "torch.mv", "nn.LayerNorm", "nn.GroupNorm", "nn.MaxPool2d", "nn.AvgPool2d", "nn.LSTMCell",
             "nn.GRUCell", "torch.sum", "torch.mean"]
    assert len({vocab[name].family for name in names}) == len(names)


@pytest.mark.parametrize("spelling, family", [
    ("torch.relu_", "relu"), ("F.batch_norm", "batch_norm"), ("F.conv_transpose3d", "conv_transpose3d"),
    ("F.conv3d", "conv3d"), ("torch.clip", "clamp"), ("nn.Dropout2d", "dropout"), ("F.sigmoid", "sigmoid"),
    ("torch.amax", "max"), ("nn.LazyLinear", "matmul"), ("torch.frobnicate", "frobnicate"),
    ("nn.SomeNewLayer", "some_new_layer"),
])
def test_spellings_that_are_no_spec_name_still_map(spelling, family):
    assert family_of(spelling) == family


def test_default_family_handles_acronyms():
    assert [default_family(n) for n in ("nn.LeakyReLU", "nn.PReLU", "nn.LSTMCell", "nn.MSELoss", "nn.LPPool2d",
                                        "transformers.LlamaRMSNorm")] == [
        "leaky_relu", "prelu", "lstm_cell", "mse_loss", "lp_pool2d", "llama_rms_norm"]


def test_family_signature_drops_eval_time_no_ops():
    assert family_signature(families_of(["nn.Linear", "nn.Dropout", "nn.ReLU"])) == ("matmul", "relu")


def test_plugin_specs_get_a_default_family_or_keep_their_own():
    plain = OpSpec(name="torch.deg2rad", category="elementwise", phrase="converts", call="torch.deg2rad({x})")
    named = OpSpec(name="torch.nansum", category="reduction", phrase="sums", call="torch.sum({x})", family="sum")
    assert (plain.family, named.family) == ("deg2rad", "sum")
    assert load_vocabulary([PLUGIN])["nn.LPPool3d"].family == "lp_pool3d"
    bad = OpSpec(name="torch.deg2rad", category="elementwise", phrase="converts", call="torch.deg2rad({x})",
                 family="Not A Family")
    with pytest.raises(VocabError, match="field 'family'"):
        Vocabulary([bad])


def test_sampled_records_carry_families_beside_ops():
    assert COLUMNS.index("families") == COLUMNS.index("ops") + 1
    assert [c.name for c in COLUMN_REGISTRY].count("families") == 1
    for record in sample_records(3, 0, 40):
        assert record["ops"] == ops_from_code(record["code"])
        assert record["families"] == families_of(record["ops"]) and len(record["families"]) == len(record["ops"])


def test_cli_vocab_lists_every_family(capsys):
    as_json = run_main(capsys, "vocab", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    families = {row["family"] for row in data["operators"]}
    assert set(data["families"]) == families
    assert sorted(sum(data["families"].values(), [])) == sorted(row["name"] for row in data["operators"])
    text = run_main(capsys, "vocab")
    assert text.returncode == 0, text.stderr
    assert f"{len(families)} families" in text.stdout
    header, first = text.stdout.splitlines()[:2]
    assert header.split() == ["operator", "category", "family", "ranks"]
    assert first.split()[0] == data["operators"][0]["name"]
    listed = {line.split()[0] for line in text.stdout.split("families (synonyms share one):")[1].splitlines()
              if line.strip()}
    assert listed == families


def test_every_family_of_a_sampled_task_is_a_vocabulary_family(vocab):
    known = {spec.family for spec in vocab}
    records = sample_records(4, 0, 40, source="transformers") + sample_records(4, 0, 60)
    assert {family for record in records for family in record["families"]} <= known
