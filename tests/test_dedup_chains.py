"""Near duplicates by family chain: synonyms in one regime collapse to one task, genuinely different regimes stay."""

from __future__ import annotations

import random

import networkx as nx
import pytest

from filters.dedup.chains import SIZE_RATIO, chain_duplicates, same_regime, task_shape
from filters.dedup.near import dedup_verdicts
from kernels_ref import reference_index
from opgen.sample.sampler import place_op, record_from_graph
from opgen.vocab import cached_vocabulary
from opgen.vocab.builders import LAYOUTS
from opgen.vocab.profiles import SMOKE
from tests.conftest import run_main
from tests.test_kernels_ref import KB_JSONL, needs_kb


def chain_record(ops: list[tuple[str, dict]], shape: tuple[int, ...], index: int = 0) -> dict:
    """A real candidate record (rendered code, analysed shapes, graph) for a chain with fixed parameters."""
    vocab = cached_vocabulary()
    graph = nx.DiGraph(batch_size=shape[0])
    graph.add_node("x", kind="input", shape=list(shape), layout=list(LAYOUTS[len(shape)]), dtype="float")
    first = vocab[ops[0][0]]
    if first.input_dtype == "long":   # token ids, as the sampler draws them for a lookup
        graph.nodes["x"].update(dtype="long", high=ops[0][1]["num_embeddings"])
    previous, current = "x", tuple(shape)
    for position, (name, params) in enumerate(ops):
        out, extras = place_op(vocab[name], current, params, SMOKE)
        graph.add_node(f"op{position}", kind="op", op=name, params=params, in_shape=list(current),
                       out_shape=list(out), extras=extras)
        graph.add_edge(previous, f"op{position}")
        previous, current = f"op{position}", out
    graph.graph.update(seed=0, index=index, profile="smoke", source=f"torch#{len(ops)}", fit_seed=0.5)
    return record_from_graph(graph, vocab)


def mm_lstm(name: str, features: int, hidden: int, batch: int = 4) -> dict:
    gemm = {"in_features": 32, "out_features": features, "scale": 0.18}
    return chain_record([(name, gemm), ("nn.LSTMCell", {"input_size": features, "hidden_size": hidden})], (batch, 32))


def conv_bn(kernel: int, channels: int, side: int = 8, batch: int = 2) -> dict:
    conv = {"in_channels": channels, "out_channels": channels, "kernel_size": kernel, "stride": 1,
            "padding": kernel // 2, "dilation": 1, "groups": channels, "bias": False}
    return chain_record([("nn.Conv2d", conv), ("nn.BatchNorm2d", {"num_features": channels, "affine": True})],
                        (batch, channels, side, side))


def survivors(records: list[dict], existing: list[dict] = (), max_per_chain: int = 0) -> tuple[set, dict]:
    duplicates = chain_duplicates([((r["id"], ""), r["id"], tuple(r["families"]), r) for r in records],
                                  [(r["id"], tuple(r["families"]), r) for r in existing], max_per_chain)
    return {r["id"] for i, r in enumerate(records) if i not in duplicates}, duplicates


def test_mm_and_matmul_into_lstm_cell_with_one_size_apart_collapse_to_one():
    first, second = mm_lstm("torch.mm", 64, 32), mm_lstm("torch.matmul", 64, 48)
    assert first["ops"] != second["ops"] and first["families"] == second["families"] == ["matmul", "lstm_cell"]
    assert same_regime(task_shape(first, first["families"]), task_shape(second, second["families"]))
    kept, duplicates = survivors([first, second])
    assert kept == {min(first["id"], second["id"])}
    assert list(duplicates.values()) == [(min(first["id"], second["id"]), "chain")]


def test_sizes_more_than_twice_apart_are_another_regime():
    small, large = mm_lstm("torch.mm", 64, 16), mm_lstm("torch.matmul", 64, 64)
    assert not same_regime(task_shape(small, small["families"]), task_shape(large, large["families"]))
    assert survivors([small, large])[0] == {small["id"], large["id"]}
    edge = mm_lstm("torch.mm", 64, 32)
    assert same_regime(task_shape(small, small["families"]), task_shape(edge, edge["families"]))  # exactly 2x
    assert SIZE_RATIO == 2.0


def test_one_by_one_and_seven_by_seven_depthwise_conv_then_batch_norm_both_survive():
    point, wide = conv_bn(1, 16), conv_bn(7, 16)
    assert point["families"] == wide["families"] == ["conv2d", "batch_norm"]
    assert point["input_shapes"] == wide["input_shapes"]
    assert survivors([point, wide])[0] == {point["id"], wide["id"]}
    assert survivors([point, conv_bn(1, 16, batch=4)])[0] == {min(point["id"], conv_bn(1, 16, batch=4)["id"])}


def test_sixty_four_and_a_thousand_channels_both_survive():
    narrow, wide = conv_bn(1, 64, side=4), conv_bn(1, 1024, side=4)
    assert survivors([narrow, wide])[0] == {narrow["id"], wide["id"]}
    # depthwise at 64 and 96 channels is one regime: groups count as "depthwise", not as a number
    assert survivors([narrow, conv_bn(1, 96, side=4)])[0] == {min(narrow["id"], conv_bn(1, 96, side=4)["id"])}


def test_the_cap_bounds_tasks_per_chain_and_zero_means_no_cap():
    regimes = [mm_lstm("torch.mm", 16, 16), mm_lstm("torch.mm", 64, 64), mm_lstm("torch.mm", 256, 256)]
    kept, duplicates = survivors(regimes, max_per_chain=2)
    assert len(kept) == 2 and [kind for _, kind in duplicates.values()] == ["chain_cap"]
    assert kept == set(sorted(r["id"] for r in regimes)[:2])  # the smallest ids fill the cap
    assert len(survivors(regimes, max_per_chain=0)[0]) == 3


def test_survivors_do_not_depend_on_input_order_and_existing_tasks_always_survive():
    records = [mm_lstm("torch.mm", 64, 32), mm_lstm("torch.matmul", 64, 48), mm_lstm("torch.mm", 16, 16),
               conv_bn(1, 16), conv_bn(3, 16), conv_bn(1, 16, batch=4)]
    kept = survivors(records)[0]
    shuffled = records[:]
    random.Random(2).shuffle(shuffled)
    assert survivors(shuffled)[0] == kept and len(kept) == 4
    newer = mm_lstm("torch.matmul", 64, 48)
    kept_now, duplicates = survivors([mm_lstm("torch.mm", 64, 32)], existing=[newer])
    assert kept_now == set() and list(duplicates.values()) == [(newer["id"], "chain")]


def test_code_without_a_graph_is_compared_by_its_module_constants():
    record = mm_lstm("torch.mm", 64, 32)
    code = record["code"]
    bare = [{"id": "a", "code": code}, {"id": "b", "code": code.replace("hidden_size = 32", "hidden_size = 48")},
            {"id": "c", "code": code.replace("hidden_size = 32", "hidden_size = 512")}]
    assert "hidden_size = 32" in code
    shapes = [task_shape(r, record["families"]) for r in bare]
    assert same_regime(shapes[0], shapes[1]) and not same_regime(shapes[0], shapes[2])


@pytest.fixture(scope="module")
def kb_index(tmp_path_factory):
    return reference_index(str(KB_JSONL), cache_dir=tmp_path_factory.mktemp("kbcache"))


@needs_kb
def test_dedup_applies_the_chain_rule_after_minhash(kb_index):
    first, second, other = mm_lstm("torch.mm", 64, 32), mm_lstm("torch.matmul", 64, 48), mm_lstm("torch.mm", 256, 256)
    verdicts = dedup_verdicts([second, first, other], reference=kb_index)
    assert not any(v["reason"] == "contaminated" for v in verdicts)
    by_id = {v["id"]: v for v in verdicts}
    loser = max(first["id"], second["id"])
    assert by_id[loser]["reason"] == "duplicate" and by_id[loser]["duplicate_kind"] == "chain"
    assert by_id[loser]["duplicate_of"] == min(first["id"], second["id"])
    assert by_id[loser]["detail"] == f"chain rule: the same family chain, salient parameters and size regime as " \
                                     f"{min(first['id'], second['id'])}"
    assert sum(v["keep"] for v in verdicts) == 2
    capped = dedup_verdicts([first, other], reference=kb_index, max_per_chain=1)
    assert [v["duplicate_kind"] for v in capped if not v["keep"]] == ["chain_cap"]
    assert [v["detail"] for v in capped if not v["keep"]] == [
        f"chain rule: over the cap of tasks per family chain (the first kept is {first['id']})"]


def test_cli_rejects_a_negative_cap(tmp_path, capsys):
    (tmp_path / "t.py").write_text("x = 1\n")
    for command in (["dedup", "--input", str(tmp_path), "--out", str(tmp_path / "o.jsonl")],
                    ["build", "--n", "1", "--seed", "0", "--out", str(tmp_path / "run")]):
        result = run_main(capsys, *command, "--max-per-chain", "-1")
        assert result.returncode == 2, result.stderr
        assert result.stderr.strip().count("\n") == 0 and "--max-per-chain" in result.stderr


@pytest.mark.parametrize("ops_a, ops_b, shape", [
    ([("nn.Embedding", {"num_embeddings": 5000, "embedding_dim": 32}), ("nn.RMSNorm", {"normalized_shape": 32, "eps": 1e-5})],
     [("nn.Embedding", {"num_embeddings": 100, "embedding_dim": 32}), ("nn.RMSNorm", {"normalized_shape": 32, "eps": 1e-5})],
     (4, 16)),
    ([("F.pairwise_distance", {"p": 2.0}), ("nn.ReLU", {})], [("nn.PairwiseDistance", {"p": 1.0}), ("nn.ReLU", {})],
     (8, 64)),
    ([("nn.BatchNorm2d", {"num_features": 4, "affine": True}), ("F.scaled_dot_product_attention", {"is_causal": True})],
     [("nn.BatchNorm2d", {"num_features": 4, "affine": False}), ("F.scaled_dot_product_attention", {"is_causal": False})],
     (2, 4, 8, 8)),
], ids=["embedding-table-size", "distance-norm-order", "affine-and-causal-mask"])
def test_parameters_that_keep_the_kernel_make_twins(ops_a, ops_b, shape):
    first, second = chain_record(ops_a, shape), chain_record(ops_b, shape, index=1)
    assert first["families"] == second["families"] and first["code"] != second["code"]
    kept, duplicates = survivors([first, second])
    assert len(kept) == 1 and [kind for _, kind in duplicates.values()] == ["chain"]


def test_a_structural_parameter_still_makes_a_second_regime():
    strided = {"in_channels": 4, "out_channels": 4, "kernel_size": 3, "stride": 2, "padding": 1, "dilation": 1,
               "groups": 1, "bias": True}
    dense = {**strided, "stride": 1}
    first = chain_record([("nn.Conv2d", strided), ("nn.ReLU", {})], (2, 4, 16, 16))
    second = chain_record([("nn.Conv2d", dense), ("nn.ReLU", {})], (2, 4, 16, 16), index=1)
    kept, _ = survivors([first, second])
    assert len(kept) == 2
