"""Mining the composition prior: the tracer's families, data-flow pairs and sizes on real modules, the aggregate,
the shipped prior file, and `opgen prior`."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from opgen.mining.prior import aggregate, mine, model_summary
from opgen.mining.trace import trace_forward
from opgen.mining.zoo import ZooModel, library_versions, select
from opgen.vocab import cached_vocabulary
from opgen.vocab.families import FamilyTable
from opgen.vocab.prior import PRIOR_PATH, load_prior
from tests.conftest import run_cli, run_main


class BasicBlock(nn.Module):
    """A ResNet basic block, written as torchvision writes it (conv-bn-relu-conv-bn, residual add, relu)."""

    def __init__(self, channels: int = 64):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels, 10)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = self.relu(out + x)
        return self.fc(torch.flatten(out.mean((2, 3)), 1))


def trace(model: nn.Module, **inputs):
    vocab = cached_vocabulary()
    return trace_forward(model.eval(), inputs, vocab, FamilyTable(vocab))


def test_tracer_records_vocabulary_modules_as_one_op_and_the_residual_data_flow():
    with torch.device("meta"):
        uses = trace(BasicBlock(), x=torch.empty(1, 64, 56, 56))
    assert [u.family for u in uses] == ["conv2d", "batch_norm", "relu", "conv2d", "batch_norm", "add", "relu",
                                        "mean", "matmul"]
    pairs = {(producer, use.family) for use in uses for producer in use.producers}
    # the residual add reads the block's input (no producer: a model input) and bn2's output
    assert ("batch_norm", "add") in pairs and ("add", "relu") in pairs and ("relu", "mean") in pairs
    assert uses[0].producers == ()  # the first conv reads the model's input
    # torch.flatten passes its producer through: mean feeds the classifier directly
    assert ("mean", "matmul") in pairs
    assert uses[0].sizes == {"channels": [64], "spatial": [56]}
    assert uses[-1].sizes["features"] == [10, 64]


def test_tracer_skips_plumbing_on_buffers_and_sees_blocks_as_their_operators():
    from transformers import BertConfig, BertModel

    config = BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        vocab_size=100, max_position_embeddings=64)
    with torch.device("meta"):
        model = BertModel._from_config(config, attn_implementation="eager")
        uses = trace(model, input_ids=torch.zeros(1, 16, dtype=torch.long))
    families = [u.family for u in uses]
    assert "transformer_encoder_layer" not in families  # a BertLayer is a block: its operators are recorded
    pairs = {(p, u.family) for u in uses for p in u.producers}
    assert {("layer_norm", "matmul"), ("matmul", "gelu"), ("softmax", "matmul"), ("add", "layer_norm")} <= pairs
    assert families.count("gelu") == 2  # GELUActivation, one per layer, recorded as the gelu it is
    # position ids come from a buffer: their embedding lookup is plumbing, only the token embedding counts
    assert families.count("embedding") == 1
    heads = [u.sizes["heads"] for u in uses if "heads" in u.sizes]
    assert heads and all(h == [2] for h in heads)


def test_aggregate_weighs_every_model_the_same():
    big = {"ops": 100, "families": {"conv2d": 50, "relu": 50}, "pairs": {"conv2d -> relu": 99},
           "sizes": {"channels": {"64": 100}}}
    small = {"ops": 2, "families": {"matmul": 2}, "pairs": {"matmul -> matmul": 1}, "sizes": {"features": {"768": 2}}}
    prior = aggregate({"big": big, "small": small})
    assert prior["families"] == {"matmul": 0.5, "conv2d": 0.25, "relu": 0.25}
    assert prior["pairs"] == {"conv2d -> relu": 0.5, "matmul -> matmul": 0.5}
    assert prior["transitions"] == {"conv2d": {"relu": 1.0}, "matmul": {"matmul": 1.0}}
    assert prior["sizes"] == {"channels": {"64": 1.0}, "features": {"768": 1.0}}


def test_mine_reports_and_skips_a_model_that_fails():
    def broken():
        raise RuntimeError("no such architecture here")

    def block():
        with torch.device("meta"):
            return BasicBlock(16).eval(), {"x": torch.empty(1, 16, 8, 8)}

    seen = []
    prior = mine([ZooModel("test.broken", "torchvision", "vision", broken),
                  ZooModel("test.block", "torchvision", "vision", block)], cached_vocabulary(),
                 lambda name, summary, error: seen.append((name, error)))
    assert list(prior["models"]) == ["test.block"] and "no such architecture" in prior["failed"]["test.broken"]
    assert seen[0][0] == "test.broken" and seen[0][1] and seen[1] == ("test.block", None)
    assert prior["transitions"]["conv2d"]["batch_norm"] == 1.0
    assert model_summary([])["ops"] == 0


def test_shipped_prior_is_mined_from_both_libraries_and_names_vocabulary_families():
    data = json.loads(PRIOR_PATH.read_text())
    libraries = {summary["library"] for summary in data["models"].values()}
    assert libraries == {"torchvision", "transformers"} and len(data["models"]) >= 40 and not data["failed"]
    prior = load_prior()
    known = {spec.family for spec in cached_vocabulary()}
    # the families real models run most are vocabulary families, and their defining pairs are there
    top = list(prior.families)[:10]
    assert {"conv2d", "batch_norm", "relu", "add", "matmul", "layer_norm", "gelu"} <= set(top)
    assert set(top) <= known
    for pair in ("conv2d -> batch_norm", "batch_norm -> relu", "matmul -> gelu", "layer_norm -> matmul",
                 "rms_norm -> matmul", "softmax -> matmul"):
        assert prior.pairs[pair] > 0, pair
    for table in prior.transitions.values():
        assert abs(sum(table.values()) - 1) < 1e-3
    values, weights = prior.size_table("spatial")
    assert {7, 14, 28, 56, 224} <= set(values) and abs(sum(weights) - 1) < 1e-3


@pytest.mark.heavy
def test_prior_command_writes_a_prior_the_sampler_uses(tmp_path, capsys):
    out = tmp_path / "prior.json"
    result = run_cli("prior", "--library", "transformers", "--models", "bert", "llama", "--out", str(out))
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert list(data["models"]) == ["transformers.bert", "transformers.llama"]
    assert data["pairs"]["rms_norm -> matmul"] > 0 and data["libraries"]["transformers"]
    candidates = tmp_path / "c.jsonl"
    result = run_cli("sample", "--n", "20", "--seed", "0", "--out", str(candidates), "--composition", "prior",
                     "--composition-prior", str(out))
    assert result.returncode == 0, result.stderr
    families = {f for line in candidates.read_text().splitlines() for f in json.loads(line)["families"]}
    assert "conv2d" not in families  # no vision model in this prior, and pure prior never explores
    bad = run_main(capsys, "prior", "--models", "no_such_model", "--out", str(tmp_path / "x.json"))
    assert bad.returncode == 2 and "unknown model" in bad.stderr and "Traceback" not in bad.stderr


def test_prior_command_needs_torchvision_for_vision_models(tmp_path, capsys):
    if library_versions()["torchvision"] is not None:  # torchvision works here: mine a real model with it
        module, inputs = select(["resnet18"])[0].build()
        vocab = cached_vocabulary()
        uses = trace_forward(module, inputs, vocab, FamilyTable(vocab))
        assert [u.family for u in uses][:3] == ["conv2d", "batch_norm", "relu"]
        return
    result = run_main(capsys, "prior", "--models", "resnet18", "--out", str(tmp_path / "p.json"))
    assert result.returncode == 2 and "torchvision cannot be imported" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "p.json").exists()
