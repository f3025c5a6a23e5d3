"""Decontamination: operator families, disguised KernelBench copies caught, honest sampler tasks kept."""

from __future__ import annotations

import ast
import random

import pytest

from filters.dedup.near import dedup_verdicts
from kernels_ref import load_reference, reference_index
from kernels_ref.fingerprint import canonical_op, fingerprint, op_signature
from scripts.devtools.disguise import DISGUISES, disguise
from tests.test_kernels_ref import KB_JSONL, SIGMOID, needs_kb, sampled

pytestmark = needs_kb


def _task(init: str, forward: str, imports: str = "") -> str:
    return f"""import torch
import torch.nn as nn
import torch.nn.functional as F
{imports}
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(8))
{init}
    def forward(self, x):
{forward}

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("spellings", [
    ("nn.ReLU", "torch.relu", "F.relu", "torch.relu_", "torch.nn.functional.relu"),
    ("nn.Linear", "F.linear", "addmm"),
    ("add", "torch.add"),
    ("nn.MaxPool2d", "F.max_pool2d"),
    ("nn.BatchNorm2d", "nn.BatchNorm1d", "F.batch_norm"),
    ("nn.CrossEntropyLoss", "F.cross_entropy"),
    ("nn.LeakyReLU", "F.leaky_relu"),
    ("torch.matmul", "torch.bmm", "torch.mm", "matmul"),
    ("nn.ConvTranspose3d", "F.conv_transpose3d"),
])
def test_module_functional_and_binop_spellings_share_a_family(spellings):
    assert len({canonical_op(name) for name in spellings}) == 1


def test_distinct_operators_stay_distinct():
    names = ["nn.Conv2d", "nn.Conv3d", "nn.ReLU", "nn.ReLU6", "nn.GELU", "nn.Linear", "torch.matmul", "add", "mul",
             "nn.LayerNorm", "nn.GroupNorm", "nn.MaxPool2d", "nn.AvgPool2d"]
    assert len({canonical_op(name) for name in names}) == len(names)


def test_views_and_eval_time_identities_are_not_in_the_signature():
    assert [canonical_op(n) for n in ("torch.flatten", "nn.Flatten", "torch.reshape", "nn.Dropout")] == [None] * 4


@pytest.mark.parametrize("init, forward", [
    ("        self.act = nn.ReLU()\n", "        return self.act(x) + self.bias\n"),
    ("", "        return torch.add(F.relu(x), self.bias)\n"),
    ("", "        y = x.relu()\n        return y.add(self.bias)\n"),
    ("", "        x = torch.relu(x)\n        x += self.bias\n        return x\n"),
])
def test_module_functional_method_and_operator_forms_give_one_signature(init, forward):
    assert op_signature(_task(init, forward)) == ("relu", "add")


def test_normalised_tokens_ignore_names_sizes_strings_comments_and_layout():
    original = _task("        self.act = nn.ReLU()\n", "        return self.act(x) + self.bias\n")
    renamed = original.replace("act", "nonlinearity").replace("bias", "offset").replace("(4, 8)", "(16, 32)")
    renamed = renamed.replace("class Model", "# a comment\nclass Model").replace("super().__init__()",
                                                                                   "'''doc'''\n        super().__init__()")
    assert fingerprint(original).model_shingles == fingerprint(renamed).model_shingles
    assert fingerprint(original).file_shingles != fingerprint(renamed).file_shingles  # sizes count within the set
    different = original.replace("self.act(x)", "torch.tanh(self.act(x))")
    assert fingerprint(original).model_shingles != fingerprint(different).model_shingles


@pytest.fixture(scope="module")
def kb_index(tmp_path_factory):
    return reference_index(str(KB_JSONL), cache_dir=tmp_path_factory.mktemp("kbcache"))


def test_disguised_kernelbench_copies_are_flagged(kb_index):
    rows = [row for row in load_reference(str(KB_JSONL)) if row["level"] <= 3]
    copies = []
    for row in rows:
        rng = random.Random(row["name"])
        kinds = tuple(k for k in DISGUISES if rng.random() < 0.7) or ("rename",)
        code = disguise(row["code"], rng, kinds)
        ast.parse(code)
        assert code != row["code"]
        copies.append({"id": f"copy-{row['level']}-{row['problem_id']}", "code": code})
    verdicts = dedup_verdicts(copies, reference=kb_index)
    flagged = [v for v in verdicts if v["reason"] == "contaminated"]
    assert len(flagged) >= 0.95 * len(copies), [v for v in verdicts if v["reason"] != "contaminated"][:3]
    by_id = {v["id"]: v for v in verdicts}
    # The nearest problem of a disguised copy is (almost always) its own original.
    own = sum(by_id[c["id"]]["kb_nearest"].startswith(f"level{c['id'].split('-')[1]}/{c['id'].split('-')[2]}_")
              for c in copies)
    assert own >= 0.8 * len(copies)


def test_fully_disguised_copies_with_functional_calls_are_caught_by_the_signature(kb_index):
    rows = [row for row in load_reference(str(KB_JSONL)) if row["level"] == 2]
    copies = [{"id": row["name"], "code": disguise(row["code"], random.Random(1))} for row in rows]
    verdicts = dedup_verdicts(copies, reference=kb_index)
    assert sum(v["contamination_rule"] == "signature" for v in verdicts) >= 0.95 * len(rows)


def test_one_op_sigmoid_is_a_kernelbench_lookalike(kb_index):
    task = SIGMOID.replace("torch.sigmoid(x)", "F.sigmoid(x)").replace("import torch.nn as nn",
                                                                       "import torch.nn as nn\nimport torch.nn.functional as F")
    (verdict,) = dedup_verdicts([{"id": "t", "code": task}], reference=kb_index)
    assert verdict["reason"] == "contaminated"
    assert verdict["contamination_rule"] == "signature"
    assert verdict["kb_signature_match"] == "level1/21_Sigmoid.py"


def test_bias_add_written_with_torch_add_matches_kernelbench_binop(kb_index):
    code = next(r["code"] for r in load_reference(str(KB_JSONL)) if r["name"] == "1_Conv2D_ReLU_BiasAdd.py")
    ours = code.replace("x = x + self.bias", "x = torch.add(x, self.bias)")
    assert ours != code
    (verdict,) = dedup_verdicts([{"id": "t", "code": ours}], reference=kb_index)
    assert verdict["kb_signature_match"] == "level2/1_Conv2D_ReLU_BiasAdd.py"


def test_a_synonym_chain_of_a_kernelbench_task_is_caught_by_the_family_signature(kb_index):
    ours = _task("        self.weight = nn.Parameter(torch.randn(8, 8))\n",
                 "        return F.leaky_relu(torch.mm(x, self.weight), 0.1)\n")
    (verdict,) = dedup_verdicts([{"id": "t", "code": ours}], reference=kb_index)
    twins = {kb_index.names[i] for i in kb_index.family_match(("matmul", "leaky_relu"))}
    assert "level2/12_Gemm_Multiply_LeakyReLU.py" in twins
    assert verdict["reason"] == "contaminated" and verdict["contamination_rule"] == "family_signature"
    assert verdict["kb_signature_match"] is None and verdict["kb_family_match"] in twins
    # the record's own `families` column is what is compared, when it has one
    (other,) = dedup_verdicts([{"id": "t", "code": ours, "families": ["matmul", "tanh"]}], reference=kb_index)
    assert other["contamination_rule"] != "family_signature"


def test_kernelbench_family_signatures_cover_levels_one_to_three(kb_index):
    rows = [r for r in load_reference(str(KB_JSONL)) if r["level"] <= 3]
    assert len(kb_index.families) == len(kb_index.names)
    matched = [r for r in rows if kb_index.family_match(fingerprint(r["code"]).families)]
    assert len(matched) >= 0.9 * len(rows)  # all but those whose only operators are binops or methods


@pytest.fixture(scope="module")
def honest_records():
    return sampled(7, 120)


def test_honest_sampler_chains_are_rarely_flagged(kb_index, honest_records):
    verdicts = dedup_verdicts(honest_records, reference=kb_index, duplicate_threshold=1.0)
    chains = [(r, v) for r, v in zip(honest_records, verdicts) if r["num_ops"] >= 2]
    assert len(chains) >= 100
    flagged = [v for _, v in chains if v["reason"] == "contaminated"]
    assert len(flagged) <= 0.05 * len(chains), flagged
    assert all(0 <= v["kb_similarity"] <= 1 and v["kb_nearest"].startswith("level") for v in verdicts)
