"""Static filters and the funnel: parse, task shape, unsafe and stochastic scans, chain order, funnel algebra."""

from __future__ import annotations

import json

import pytest

from filters.static import Funnel, static_verdicts
from filters.static.stochastic import stochastic_reason
from filters.static.unsafe import unsafe_reason
from opgen.taskcode.syntax import parse
from scripts.devtools.shrink import shrink_sizes

GOOD = '''import torch
import torch.nn as nn
import math


class Model(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.linear = nn.Linear(16, 8)
        nn.init.normal_(self.linear.weight)
        self.drop = nn.Dropout(0.0)

    def forward(self, x):
        return torch.nn.functional.dropout(torch.tanh(self.linear(x)) * math.pi, p=0.0)


def get_inputs():
    return [torch.randn(4, 16)]


def get_init_inputs():
    return [0.0]
'''


def _verdict(code: str) -> dict:
    return static_verdicts([{"source": "t.py", "id": "t", "code": code}])[0]


def test_a_good_task_passes_every_static_filter():
    line = _verdict(GOOD)
    # `stage` names the last static stage that ran: a kept task went through the whole chain.
    assert line == {"source": "t.py", "id": "t", "stage": "stochastic", "keep": True, "reason": None}


@pytest.mark.parametrize("snippet, expected", [
    ("import os", "import of os"),
    ("from pathlib import Path", "import of pathlib"),
    ("import torch.utils.cpp_extension", "import of torch.utils.cpp_extension"),
    ("y = eval('1')", "use of eval"),
    ("y = __import__('os')", "use of __import__"),
    ("y = torch.load('w.pt')", "use of torch.load"),
    ("y = getattr(torch, 'save')", "getattr of 'save'"),
    ("y = ().__class__.__subclasses__()", "use of .__subclasses__"),
    ("y = torch.hub.load('a', 'b')", "use of torch.hub.load"),
])
def test_unsafe_constructs_are_named(snippet, expected):
    assert unsafe_reason(parse("import torch\n" + snippet + "\n")) == expected


def test_allowed_imports_are_not_unsafe():
    code = "import torch\nimport torch.nn.functional as F\nimport math\nfrom transformers import LlamaConfig\n"
    assert unsafe_reason(parse(code)) is None


@pytest.mark.parametrize("forward, expected", [
    ("return torch.rand(3) + x", "torch.rand"),
    ("return x.bernoulli()", "x.bernoulli"),
    ("return torch.nn.functional.dropout(x, 0.1)", "dropout"),
    ("return torch.nn.functional.rrelu(x)", "rrelu"),
    ("g = torch.Generator()\n        return x", "Generator"),
    ("return torch.normal(x, 1.0)", "torch.normal"),
    ("nn.init.kaiming_uniform_(self.w)\n        return x", "kaiming_uniform_"),
])
def test_random_draws_in_forward_are_stochastic(forward, expected):
    code = f"import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n        {forward}\n"
    reason = stochastic_reason(parse(code))
    assert reason is not None and expected in reason


def test_random_draws_outside_forward_are_legitimate():
    code = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.w = nn.Parameter(torch.randn(3))\n        nn.init.uniform_(self.w)\n"
            "    def forward(self, x):\n        return x * self.w\n\ndef get_inputs():\n    return [torch.rand(3)]\n")
    assert stochastic_reason(parse(code)) is None


@pytest.mark.parametrize("construct, stochastic", [
    ("nn.Dropout()", True), ("nn.Dropout(0.2)", True), ("nn.Dropout(p=P)", True), ("nn.Dropout(0.0)", False),
    ("nn.Dropout(p=Z)", False), ("nn.RReLU()", True), ("nn.FractionalMaxPool2d(2, output_ratio=0.5)", True),
    ("nn.AlphaDropout(0.1)", True), ("nn.ReLU()", False),
])
def test_stochastic_modules_count_anywhere(construct, stochastic):
    code = f"import torch.nn as nn\nP = 0.3\nZ = 0\nlayer = {construct}\n"
    assert (stochastic_reason(parse(code)) is not None) is stochastic


@pytest.mark.parametrize("code, reason", [
    ("def f(:\n", "parse_error"),
    ("import torch\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n", "invalid_task"),
    (GOOD.replace("import math", "import math\nimport shutil"), "unsafe_code"),
    (GOOD.replace("p=0.0)", "p=0.5)"), "stochastic_op"),
])
def test_chain_gives_the_first_failing_reason(code, reason):
    assert _verdict(code)["reason"] == reason


def test_unsafe_is_checked_before_stochastic_and_chain_stops_there():
    funnel = Funnel()
    code = GOOD.replace("import math", "import math\nimport os").replace("p=0.0)", "p=0.5)")
    [line] = static_verdicts([{"source": "t", "id": "t", "code": code}], funnel)
    assert line["reason"] == "unsafe_code"
    assert funnel.stages["unsafe"].rejected["unsafe_code"] == 1
    assert "stochastic" not in funnel.stages


def test_funnel_counts_merge_and_round_trip():
    records = [{"source": str(i), "id": str(i), "code": code} for i, code in
               enumerate([GOOD, "def (", GOOD.replace("import math", "import socket"), GOOD])]
    first, second = Funnel(), Funnel()
    lines = static_verdicts(records[:2], first) + static_verdicts(records[2:], second)
    assert [line["keep"] for line in lines] == [True, False, False, True]
    merged = first + second
    assert merged.inputs == 4 and merged.kept == 2
    assert merged.rejected == {"parse_error": 1, "unsafe_code": 1}
    assert merged.stages["parse"].seen == 4 and merged.stages["unsafe"].seen == 3
    assert Funnel.from_dict(json.loads(json.dumps(merged.to_dict()))) == merged
    table = merged.table()
    assert "parse_error" in table and "unsafe_code" in table and table.splitlines()[0].startswith("stage")


def test_verdicts_keep_input_order():
    records = [{"source": f"s{i}", "id": f"i{i}", "code": GOOD if i % 2 else "x ="} for i in range(6)]
    lines = static_verdicts(records)
    assert [line["source"] for line in lines] == [f"s{i}" for i in range(6)]
    assert [line["keep"] for line in lines] == [False, True] * 3


def test_shrinker_keeps_kernel_constants_and_divisibility():
    code = ("batch_size = 128\nin_channels = 3\nout_channels = 24\nheight = width = 256\nkernel_size = 3\n"
            "num_groups = 8\nN = 2048 * 2\nshape = (4095, 33)\nscale = 2.0\ndepth, length = 64, 100\nheads = 512\n")
    namespace: dict = {}
    exec(shrink_sizes(code), namespace)
    assert namespace["batch_size"] == 16 and namespace["in_channels"] == 3 and namespace["out_channels"] == 8
    assert namespace["height"] == namespace["width"] == 32 and namespace["kernel_size"] == 3
    assert namespace["num_groups"] == 8 and namespace["N"] == 16 and namespace["shape"] == (15, 16)
    assert namespace["out_channels"] % namespace["num_groups"] == 0 and namespace["scale"] == 2.0
    assert namespace["depth"] == 16 and namespace["length"] == 25 and namespace["heads"] == 16
