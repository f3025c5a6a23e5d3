"""The grader-proof rules on real tasks: each rejects a task a wrong kernel could pass, and keeps a close one.

The checks run in this process on tiny CPU tasks (the sandbox's own tests cover the worker): every execute check
up to the one under test, as the worker chains them.
"""

from __future__ import annotations

import pytest

from filters.base import judge
from filters.execute import STAGES
from filters.execute.task_run import TaskRun
from filters.execute.tensors import accepted_shares
from filters.execute.visible import MAX_ACCEPTED_SHARE
from opgen.taskcode.ablate import ablations
from opgen.vocab.ops_norm import BATCH_NORM_STATISTICS

BEFORE_RUNTIME = tuple(check for check in STAGES if check.name not in ("runtime", "compile"))


def task(forward: str, inputs: str, init: str = "", args: str = "x") -> str:
    return f"""import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
{init or "        pass"}

    def forward(self, {args}):
{forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""


def verdict(code: str):
    return judge(TaskRun(code=code, name="t"), BEFORE_RUNTIME)


SOFTMAX = "        return torch.softmax(x, dim=1)"
DISTANCE = "        return F.pairwise_distance(x, y)"
SCALE_INIT = """        scale = torch.full((512,), 1e-4)
        scale[::{step}] = 1.0
        self.register_buffer("scale", scale)
        self.offset = nn.Parameter(torch.randn(512))"""
AFFINE = "        return x * self.scale + self.offset"


@pytest.mark.parametrize("code, answer", [
    (task(SOFTMAX, "torch.randn(64, 1024)"), "zero"),
    (task(DISTANCE, "torch.randn(16, 32768), torch.randn(16, 32768)", args="x, y"), "constant"),
    (task(AFFINE, "torch.randn(64, 512)", SCALE_INIT.format(step=64)), "stale"),
], ids=["softmax-long-rows", "wide-distance", "few-values-depend-on-input"])
def test_visibility_rule_rejects_what_a_cheap_answer_passes(code, answer):
    result = verdict(code)
    assert (result.reason, result.stages[-1][0]) == ("degenerate_output", "visible")
    assert result.detail.startswith("visibility rule: ")
    assert result.metrics[f"accept_{answer}_share"] >= MAX_ACCEPTED_SHARE


@pytest.mark.parametrize("code", [
    task(SOFTMAX, "torch.randn(256, 16)"),
    task(DISTANCE, "torch.randn(256, 64), torch.randn(256, 64)", args="x, y"),
    task(AFFINE, "torch.randn(64, 512)", SCALE_INIT.format(step=2)),
], ids=["softmax-short-rows", "narrow-distance", "half-the-values-depend-on-input"])
def test_visibility_rule_keeps_the_close_task_and_records_its_shares(code):
    result = verdict(code)
    assert result.keep, (result.reason, result.detail)
    shares = [result.metrics[f"accept_{a}_share"] for a in ("zero", "constant", "stale")]
    assert all(0.0 <= share < MAX_ACCEPTED_SHARE for share in shares)


def test_shares_count_values_over_every_draw():
    import torch

    first = [torch.tensor([0.0, 0.005, 1.0, 2.0])]
    later = [torch.tensor([0.0, 0.004, 1.0, 3.0])]
    shares = accepted_shares([first, later], 1e-2, 1e-2)
    assert shares["zero"] == pytest.approx(4 / 8)        # 0, 0.005, 0, 0.004
    assert shares["stale"] == pytest.approx(3 / 4)       # all but 3.0 against 2.0
    assert shares["constant"] == pytest.approx(4 / 8)    # the other draw's median (0.004, 0.005) and the 0 beside it


def test_a_one_value_output_that_follows_its_input_accepts_no_constant():
    import torch

    shares = accepted_shares([[torch.tensor(1.0)], [torch.tensor(2.0)], [torch.tensor(3.0)]], 1e-2, 1e-2)
    assert shares == {"zero": 0.0, "constant": 0.0, "stale": 0.0}


RELU_AFTER = """        x = F.{first}(x, y{args})
        x = F.relu(x)
        return x"""


def test_every_operator_rule_rejects_a_relu_after_a_distance():
    result = verdict(task(RELU_AFTER.format(first="pairwise_distance", args=""),
                          "torch.randn(256, 16), torch.randn(256, 16)", args="x, y"))
    assert (result.reason, result.stages[-1][0]) == ("trivial", "operator_work")
    assert "without `F.relu(x)`" in result.detail


def test_every_operator_rule_keeps_a_relu_after_a_cosine_similarity():
    result = verdict(task(RELU_AFTER.format(first="cosine_similarity", args=", dim=1"),
                          "torch.randn(256, 16), torch.randn(256, 16)", args="x, y"))
    assert result.keep, (result.reason, result.detail)
    assert result.metrics["identity_statements"] == 1   # the distance changes the shape: only the ReLU is tried


def test_ablations_replace_one_statement_of_forward_each():
    code = task(RELU_AFTER.format(first="cosine_similarity", args=", dim=1"), "torch.randn(4, 4), torch.randn(4, 4)", args="x, y")
    variants = ablations(code)
    assert [v.source for v in variants] == ["F.cosine_similarity(x, y, dim=1)", "F.relu(x)"]
    assert "x = _opgen_skip(x, F.relu(x))" in variants[1].code
    assert "x = F.cosine_similarity(x, y, dim=1)" in variants[1].code


def test_copies_and_moves_are_not_operators_to_test():
    code = task("        residual = x.clone().detach()\n        h = y.to(x.device)\n        x = torch.tanh(x) + h\n"
                "        return x + residual", "torch.randn(4, 4), torch.randn(4, 4)", args="x, y")
    assert [v.source for v in ablations(code)] == ["torch.tanh(x) + h", "x + residual"]


BATCH_NORM = """        self.bn = nn.BatchNorm2d(8)
{statistics}"""
SAMPLED_STATISTICS = "\n".join(f"        {line.format(self='self.bn', num_features=8)}" for line in BATCH_NORM_STATISTICS)


def test_every_operator_rule_rejects_an_eval_batch_norm_at_its_default_statistics():
    result = verdict(task("        x = self.bn(x)\n        return torch.tanh(x)", "torch.randn(4, 8, 6, 6)",
                          BATCH_NORM.format(statistics="")))
    assert (result.reason, result.stages[-1][0]) == ("trivial", "operator_work")
    assert "without `self.bn(x)`" in result.detail


def test_the_sampled_batch_norm_statistics_make_it_do_work():
    result = verdict(task("        x = self.bn(x)\n        return torch.tanh(x)", "torch.randn(4, 8, 6, 6)",
                          BATCH_NORM.format(statistics=SAMPLED_STATISTICS)))
    assert result.keep, (result.reason, result.detail)


def test_gpu_sizing_keeps_softmax_rows_and_cosine_widths_the_check_can_see():
    import json

    from opgen.sample.sampler import sample_records
    from opgen.vocab import cached_vocabulary
    from opgen.vocab.builders import place_op
    from opgen.vocab.ops_activation import SOFTMAX_MAX_ROW
    from opgen.vocab.ops_loss import COSINE_MAX_WIDTH
    from opgen.vocab.profiles import profile_sizes

    softmax = cached_vocabulary()["nn.Softmax"]
    sizes = profile_sizes("gpu")
    assert place_op(softmax, (8, 64, 128), {"dim": 2}, sizes) is not None
    assert place_op(softmax, (8, 64, 4096), {"dim": 2}, sizes) is None      # grown past the row the check sees
    seen = 0
    for record in sample_records(0, 0, 150, "gpu"):
        for node in json.loads(record["graph"])["nodes"]:
            op, shape = node.get("op", ""), node.get("in_shape")
            if op in ("nn.Softmax", "F.softmax", "torch.softmax", "nn.Softmin"):
                seen += 1
                assert shape[node["params"]["dim"]] <= SOFTMAX_MAX_ROW, record["id"]
            if "cosine" in op.lower() or "CosineSimilarity" in op:
                assert shape[node["params"]["dim"]] <= COSINE_MAX_WIDTH, record["id"]
    assert seen >= 3
