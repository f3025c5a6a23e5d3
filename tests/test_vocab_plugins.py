"""Extending the vocabulary without editing opgen: plugin files, entry points, and load-time errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from opgen.sample.render import op_nodes
from opgen.sample.sampler import record_from_graph, sample_graph
from opgen.vocab import ENTRY_POINT_GROUP, VocabError, load_vocabulary
from opgen.vocab.spec import OpSpec
from tests.conftest import REPO, run_main

PLUGIN = REPO / "examples" / "my_ops.py"


def test_plugin_operators_are_sampled_and_run(tmp_path):
    vocab = load_vocabulary([PLUGIN])
    assert {"torch.deg2rad", "nn.LPPool3d", "torch.nansum"} <= set(vocab.specs)
    found: dict[str, dict] = {}
    for index in range(4000):
        graph = sample_graph(0, index, "smoke", vocab)
        names = {graph.nodes[n]["op"] for n in op_nodes(graph)}
        for name in names & {"torch.deg2rad", "nn.LPPool3d", "torch.nansum"} - set(found):
            found[name] = record_from_graph(graph, vocab)
        if len(found) == 3:
            break
    assert set(found) == {"torch.deg2rad", "nn.LPPool3d", "torch.nansum"}
    runner = (
        "import json, sys, torch\n"
        "for code in json.load(sys.stdin):\n"
        "    ns = {}\n"
        "    exec(code, ns)\n"
        "    model = ns['Model'](*ns['get_init_inputs']()).eval()\n"
        "    with torch.no_grad():\n"
        "        out = model(*ns['get_inputs']())\n"
        "    print(json.dumps(list(out.shape)))\n"
    )
    codes = [record["code"] for record in found.values()]
    result = subprocess.run([sys.executable, "-c", runner], input=json.dumps(codes), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    shapes = [json.loads(line) for line in result.stdout.splitlines()]
    assert shapes == [record["output_shape"] for record in found.values()]
    for name, record in found.items():
        assert name in record["ops"]


def test_cli_vocab_lists_plugin_operators(capsys):
    result = run_main(capsys, "vocab", "--json", "--vocab-plugin", str(PLUGIN))
    assert result.returncode == 0, result.stderr
    names = {row["name"]: row for row in json.loads(result.stdout)["operators"]}
    assert names["torch.deg2rad"]["defined_in"] == str(PLUGIN)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('OpSpec(name="torch.special.i0e", category="elementwise", phrase="x", call="torch.special.i0e(y)")', "'call'"),
        ('OpSpec(name="torch.special.i0e", category="magic", phrase="x", call="torch.special.i0e({x})")', "'category'"),
        ('OpSpec(name="torch.special.i0e", category="elementwise", phrase="x", call="torch.special.i0e({x}, {k})")', "'call'"),
        ('OpSpec(name="nn.ReLU", category="activation", phrase="x", module="nn.ReLU()")', "'name'"),
        ('OpSpec(name="torch.special.i0e", category="elementwise", phrase="x", call="torch.special.i0e({x})", '
         'out_shape=lambda s, p: (0,))', "'out_shape'"),
    ],
)
def test_wrong_spec_fails_at_load_with_operator_and_field(tmp_path: Path, body: str, field: str, capsys):
    plugin = tmp_path / "bad_ops.py"
    plugin.write_text(f"from opgen.vocab.spec import OpSpec\nSPECS = [{body}]\n")
    with pytest.raises(VocabError) as error:
        load_vocabulary([plugin])
    message = str(error.value)
    assert field in message and ("torch.special.i0e" in message or "nn.ReLU" in message)
    result = run_main(capsys, "vocab", "--vocab-plugin", str(plugin))
    assert result.returncode == 2
    assert field in result.stderr and "Traceback" not in result.stderr


def test_entry_point_group_is_loaded(monkeypatch):
    class FakeEntryPoint:
        name, value = "extra", "my_pkg.ops:SPECS"

        def load(self):
            return [OpSpec(name="torch.special.i0e", category="elementwise", phrase="applies sinc", call="torch.special.i0e({x})")]

    from opgen import vocab as vocab_module

    monkeypatch.setattr(vocab_module.metadata, "entry_points",
                        lambda group: [FakeEntryPoint()] if group == ENTRY_POINT_GROUP else [])
    assert "torch.special.i0e" in load_vocabulary()
