"""The built-in torch vocabulary: every operator runs in eager with the shape the sampler predicted."""

from __future__ import annotations

import pytest

from opgen.sample.analyze import analyze_code
from opgen.sample.render import op_nodes, render
from opgen.sample.sampler import rescale_batch, sample_graph, sample_records
from opgen.vocab import cached_vocabulary
from opgen.vocab.spec import CATEGORIES
from scripts.devtools.vocab_probe import run_in_subprocess, single_op_record

REQUIRED = [
    "nn.Conv1d", "nn.Conv2d", "nn.Conv3d", "nn.ConvTranspose1d", "nn.ConvTranspose2d", "nn.ConvTranspose3d",
    "nn.MaxPool1d", "nn.MaxPool2d", "nn.MaxPool3d", "nn.AvgPool1d", "nn.AvgPool2d", "nn.AvgPool3d",
    "nn.AdaptiveAvgPool1d", "nn.AdaptiveAvgPool2d", "nn.AdaptiveAvgPool3d", "nn.AdaptiveMaxPool1d",
    "nn.AdaptiveMaxPool2d", "nn.AdaptiveMaxPool3d", "nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d",
    "nn.InstanceNorm1d", "nn.InstanceNorm2d", "nn.InstanceNorm3d", "F.pad", "nn.ZeroPad2d", "nn.ReflectionPad2d",
    "nn.ReplicationPad3d", "nn.ConstantPad1d", "nn.PixelShuffle", "nn.PixelUnshuffle", "nn.Upsample",
    "F.interpolate", "torch.einsum", "torch.bmm", "torch.matmul", "torch.mm", "torch.addmm", "torch.baddbmm",
    "torch.cumsum", "torch.cumprod", "torch.logcumsumexp", "torch.cummax", "torch.sum", "torch.mean", "torch.amax",
    "torch.amin", "torch.prod", "torch.std", "torch.var", "torch.logsumexp", "torch.norm", "torch.argmax",
    "nn.MultiheadAttention", "F.scaled_dot_product_attention", "nn.TransformerEncoderLayer", "nn.RNN", "nn.LSTM",
    "nn.GRU", "nn.RNNCell", "nn.LSTMCell", "nn.GRUCell", "nn.CosineSimilarity", "nn.PairwiseDistance",
    "torch.cdist", "nn.MSELoss", "nn.L1Loss", "nn.SmoothL1Loss", "nn.HuberLoss", "nn.KLDivLoss",
    "nn.CrossEntropyLoss", "nn.BCEWithLogitsLoss", "nn.GroupNorm", "nn.LayerNorm", "nn.RMSNorm",
    "nn.LocalResponseNorm", "F.normalize", "nn.Embedding", "nn.ReLU", "nn.ReLU6", "nn.LeakyReLU", "nn.ELU",
    "nn.SELU", "nn.CELU", "nn.GELU", "nn.SiLU", "nn.Mish", "nn.Softplus", "nn.Softsign", "nn.Hardtanh",
    "nn.Hardswish", "nn.Hardsigmoid", "nn.Hardshrink", "nn.Softshrink", "nn.Tanhshrink", "nn.Sigmoid",
    "nn.LogSigmoid", "nn.PReLU", "nn.Threshold", "nn.GLU", "nn.Softmax", "nn.LogSoftmax", "nn.Softmin",
    "F.gelu", "torch.relu", "torch.sin", "torch.cos", "torch.erf", "torch.abs", "torch.square", "torch.clamp",
    "torch.sign", "torch.expm1", "torch.tanh", "torch.add", "torch.mul", "torch.maximum", "torch.minimum",
    "torch.lerp", "torch.hypot", "torch.atan2", "torch.logaddexp",
]
STOCHASTIC = ("Dropout", "dropout", "RReLU", "rrelu", "Fractional", "fractional", "bernoulli", "rand")


@pytest.fixture(scope="module")
def vocab():
    return cached_vocabulary()


@pytest.fixture(scope="module")
def torch_ops(vocab):
    return [spec for spec in vocab.chain_ops if not spec.name.startswith("transformers.")]


@pytest.fixture(scope="module")
def single_op_runs(torch_ops):
    """One smoke-size task per operator and accepted rank, executed in a separate process."""
    records = [single_op_record(spec.name, seed=0, rank=rank) for spec in torch_ops for rank in spec.ranks]
    return records, run_in_subprocess(records)


def test_vocabulary_is_large_and_covers_every_category(torch_ops):
    names = {spec.name for spec in torch_ops}
    assert len(names) >= 125
    missing = [name for name in REQUIRED if name not in names]
    assert not missing, f"required operators missing: {missing}"
    categories = {spec.category for spec in torch_ops}
    assert categories == set(CATEGORIES) - {"transformers"}


def test_no_stochastic_operator_in_vocabulary(torch_ops):
    for spec in torch_ops:
        text = f"{spec.name} {spec.module or ''} {spec.call}"
        for allowed in ("torch.randn(", "torch.rand(", "dropout=0.0"):  # parameter init, disabled dropout
            text = text.replace(allowed, "")
        assert not any(word in text for word in STOCHASTIC), spec.name


def test_every_operator_runs_in_eager_with_the_predicted_shape(single_op_runs):
    records, results = single_op_runs
    failures = []
    for record in records:
        result = results.get(record["id"], {"ok": False, "error": "no result"})
        if not result["ok"]:
            failures.append((record["id"], result["error"]))
        elif result["shape"] != record["output_shape"]:
            failures.append((record["id"], f"eager {result['shape']} != record {record['output_shape']}"))
    assert not failures, failures[:20]


def test_spec_output_shape_is_exact(single_op_runs):
    records, _ = single_op_runs
    wrong = [(r["id"], r["spec_output_shape"], r["output_shape"]) for r in records
             if r["spec_output_shape"] != r["output_shape"]]
    assert not wrong, wrong[:20]


def test_ops_column_equals_the_sampled_operators(single_op_runs):
    records, _ = single_op_runs
    wrong = [(r["id"], r["ops"]) for r in records if r["ops"] != r["graph_ops"]]
    assert not wrong, wrong[:20]


def test_outputs_are_finite_and_repeatable(single_op_runs):
    records, results = single_op_runs
    bad = [rid for rid, r in results.items() if r["ok"] and not (r["finite"] and r["repeatable"])]
    assert not bad, bad[:20]


def test_batch_can_be_rescaled_without_changing_other_dims(vocab):
    """Parameters never depend on dim 0, so the renderer's batch rescaling keeps every shape consistent."""
    for index in range(60):
        graph = sample_graph(5, index, "smoke", vocab)
        scaled = rescale_batch(graph, 3)
        facts = analyze_code(render(scaled, vocab))
        last = scaled.nodes[op_nodes(scaled)[-1]]["out_shape"]
        assert facts["output_shape"] == list(last), (index, [scaled.nodes[n]["op"] for n in op_nodes(scaled)])


@pytest.mark.heavy
def test_smoke_candidates_run_in_eager():
    records = sample_records(1, 0, 500, profile="smoke")
    torch_records = [r for r in records if r["data_source"].startswith("torch#")]
    assert all(r["ops"] == r["graph_ops"] for r in torch_records)
    by_id = {r["id"]: r for r in records}
    results = run_in_subprocess(by_id.values())
    ran = [rid for rid, result in results.items() if result["ok"] and result["shape"] == by_id[rid]["output_shape"]]
    assert len(ran) >= 0.97 * len(by_id), [(by_id[k]["ops"], v) for k, v in results.items() if k not in ran][:10]
