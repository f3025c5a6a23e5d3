"""The transformers vocabulary: every class sampled alone, rendered, and run in eager in a subprocess."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import random
import subprocess
import sys

import networkx as nx
import pytest

from opgen.sample.render import render
from opgen.taskcode.ops import ops_from_code
from opgen.vocab import Vocabulary, load_vocabulary
from opgen.vocab.builders import sequence_input
from opgen.vocab.hf_ops import SPECS
from opgen.vocab.profiles import SMOKE, profile_sizes
from opgen.vocab.spec import OpSpec, VocabError, check_draw
from scripts.devtools.hf_probe import probe_code
from tests.conftest import REPO

NAMES = [spec.name for spec in SPECS]
REQUIRED = {
    # activations
    "GELUActivation", "NewGELUActivation", "FastGELUActivation", "QuickGELUActivation", "ClippedGELUActivation",
    "AccurateGELUActivation", "MishActivation", "LaplaceActivation", "ReLUSquaredActivation",
    # RMSNorm family
    "LlamaRMSNorm", "MistralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm", "GemmaRMSNorm", "T5LayerNorm",
    "MixtralRMSNorm",
    # MLP blocks
    "LlamaMLP", "MistralMLP", "Qwen2MLP", "GemmaMLP", "GPT2MLP", "T5DenseActDense", "T5DenseGatedActDense",
    # GPT-2 Conv1D, rotary, attention
    "Conv1D", "LlamaRotaryEmbedding", "LlamaAttention", "MistralAttention", "Qwen2Attention", "GPT2Attention",
    "BertSelfAttention",
}
ALLOWED_IMPORT_ROOTS = {"torch", "math", "transformers"}


def _imported_roots(code: str) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            roots.add((node.module or "").split(".")[0])
    return roots


def test_vocabulary_covers_the_required_classes_as_standalone_tasks():
    vocab = load_vocabulary(entry_points=False)
    transformers = [spec for spec in vocab if spec.name.startswith("transformers.")]
    assert len(transformers) >= 32
    assert REQUIRED <= {spec.name.removeprefix("transformers.") for spec in transformers}
    for spec in transformers:
        assert spec.standalone and spec.category == "transformers", spec.name
        assert spec in vocab.standalone_ops and spec not in vocab.chain_ops


@pytest.mark.parametrize("name", NAMES)
def test_rendered_task_names_its_class_and_builds_configs_in_code(name):
    """Rendering only (no task code runs here): the AST ops, the imports, and no from_pretrained."""
    spec = next(s for s in SPECS if s.name == name)
    for profile in ("smoke", "gpu"):
        code = probe_code(spec, seed=3, index=NAMES.index(name), profile=profile)
        assert name in ops_from_code(code)
        assert all(not op.endswith("Config") for op in ops_from_code(code))
        assert "from_pretrained" not in code
        assert _imported_roots(code) <= ALLOWED_IMPORT_ROOTS, code


@pytest.mark.parametrize("sizes", [SMOKE, profile_sizes("gpu")], ids=["smoke", "gpu"])
def test_draws_always_fit_and_heads_divide_the_hidden_size(sizes):
    rng = random.Random(0)
    with_heads = 0
    for spec in SPECS:
        for _ in range(30):
            shape, _ = spec.make_input(rng, sizes) if spec.make_input else ((2, 8, 16), None)
            params = check_draw(spec, sizes, rng, shape)
            assert params is not None, spec.name
            if "num_attention_heads" in params:
                with_heads += 1
                hidden, heads = params["hidden_size"], params["num_attention_heads"]
                assert hidden % heads == 0 and (hidden // heads) % 2 == 0, (spec.name, params)
    assert with_heads >= 25 * 30


def test_helpers_render_before_the_module_and_unknown_fields_are_caught():
    spec = OpSpec(name="transformers.LlamaAttention", category="transformers", phrase="attends", ranks=(3,),
                  standalone=True, make_input=sequence_input,
                  draw=lambda rng, shape, sizes: {"hidden_size": shape[-1]},
                  helpers=(("config", "LlamaConfig(hidden_size={hidden_size})"), ("rotary", "Rotary({config})")),
                  module="LlamaAttention({config}, layer_idx=0)", call="{self}({x}, {rotary}({x}))[0]",
                  args=("hidden_size",))
    graph = nx.DiGraph(batch_size=2)
    graph.add_node("x", kind="input", shape=[2, 8, 16], layout=["batch_size", "seq_len", "embed_dim"])
    graph.add_node("op0", kind="op", op=spec.name, params={"hidden_size": 16}, extras=[])
    graph.add_edge("x", "op0")
    code = render(graph, Vocabulary([spec]))
    lines = [line.strip() for line in code.splitlines()]
    start = lines.index("self.config = LlamaConfig(hidden_size=hidden_size)")
    assert lines[start + 1] == "self.rotary = Rotary(self.config)"
    assert lines[start + 2] == "self.llama_attention = LlamaAttention(self.config, layer_idx=0)"
    assert "x = self.llama_attention(x, self.rotary(x))[0]" in lines

    broken = dataclasses.replace(spec, helpers=(("config", "LlamaConfig(hidden_size={hidden})"), spec.helpers[1]))
    with pytest.raises(VocabError, match="helpers"):
        Vocabulary([broken])


@pytest.fixture(scope="module")
def probe_reports() -> dict[str, dict]:
    """Every transformers class sampled, analysed on meta, and run in eager, all in one subprocess."""
    result = subprocess.run([sys.executable, "-m", "scripts.devtools.hf_probe", "--seed", "0"], cwd=REPO,
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return {report["name"]: report for report in reports}


@pytest.mark.heavy
@pytest.mark.parametrize("name", NAMES)
def test_class_runs_in_eager_and_matches_its_record(probe_reports, name):
    report = probe_reports[name]
    assert report.get("ok"), report.get("error")
    assert report["finite"], report["code"]
    assert report["deterministic"] and report["input_dependent"], report["code"]
    assert report["eager_shape"] == report["output_shape"]
    assert name in report["ops"] and report["data_source"] == "transformers"
    assert not report["from_pretrained"]
    # the gpu profile scales only the batch: every input keeps its batch in dim 0 and the output follows
    gpu_batch = report["gpu_input_shapes"][0][0]
    assert all(shape[0] == gpu_batch for shape in report["gpu_input_shapes"])
    assert report["gpu_output_shape"][0] == gpu_batch


def test_probe_rejects_an_unknown_class():
    result = subprocess.run([sys.executable, "-m", "scripts.devtools.hf_probe", "transformers.NoSuchBlock"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "transformers.NoSuchBlock" in result.stderr
