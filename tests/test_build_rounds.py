"""Round planning of `opgen build`: quotas by largest remainder, next-round sizes, deterministic selection."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from opgen.pipeline import rounds
from opgen.records import COLUMNS, DATASET_SCHEMA, dataset_table
from opgen.sample.sampler import DEFAULT_MIX


def test_quotas_follow_the_mix_by_largest_remainder():
    # 40 x mix: 1.36, 33.51, 3.05, 1.12, 0.49, 0.47 -> floors sum to 38; the two largest remainders get +1
    assert rounds.quotas(40, DEFAULT_MIX) == {"torch#1": 1, "torch#2": 34, "torch#3": 3, "torch#4": 1,
                                              "torch#5": 1, "transformers": 0}
    assert rounds.quotas(4, DEFAULT_MIX)["torch#2"] == 4
    for n in (1, 7, 100, 6000):
        assert sum(rounds.quotas(n, DEFAULT_MIX).values()) == n
    assert rounds.quotas(6000, DEFAULT_MIX)["torch#2"] == 5026
    with pytest.raises(ValueError):
        rounds.quotas(3, {"a": 0.0})


def test_next_round_draws_only_missing_sources_with_fresh_indices():
    wanted = {"torch#2": 10, "torch#5": 2, "transformers": 1}
    survivors = Counter({"torch#2": 12, "transformers": 1})
    candidates = Counter({"torch#2": 20, "transformers": 4})
    segments = rounds.next_round(100, wanted, survivors, candidates, oversample=1.25, max_count=50)
    assert [s.source for s in segments] == ["torch#5"]          # the only source short of its quota
    assert segments[0].start == 100 and segments[0].count >= 2   # never fewer than the deficit
    # a source that survives rarely gets more candidates than one that survives often
    low = rounds.next_round(0, {"a": 5}, Counter({"a": 1}), Counter({"a": 40}), 1.25, 1000)[0].count
    high = rounds.next_round(0, {"a": 5}, Counter({"a": 1}), Counter({"a": 1}), 1.25, 1000)[0].count
    assert low > high
    two = rounds.next_round(7, {"a": 3, "b": 3}, Counter(), Counter(), 1.0, 100)
    assert two[1].start == two[0].start + two[0].count          # ranges never overlap


def _chance_by_integration(draws: int, deficit: int, alpha: float, beta: float, grid: int = 20_000) -> float:
    """The same probability by brute force: the binomial tail averaged over a grid of Beta-weighted rates."""
    total = weight = 0.0
    for i in range(1, grid):
        rate = i / grid
        density = rate ** (alpha - 1) * (1 - rate) ** (beta - 1)
        below = sum(math.comb(draws, j) * rate**j * (1 - rate) ** (draws - j) for j in range(deficit))
        total += density * (1 - below)
        weight += density
    return total / weight


def test_small_deficits_get_enough_draws_to_be_met_in_one_round():
    assert rounds.enough_draws(0, 2, 2) == 0
    for draws, deficit, alpha, beta in [(7, 2, 2, 2), (12, 2, 2, 2), (30, 5, 3, 9)]:
        assert rounds.chance_met(draws, deficit, alpha, beta) == pytest.approx(
            _chance_by_integration(draws, deficit, alpha, beta), abs=1e-3)
    k = rounds.enough_draws(2, 2, 2)
    assert rounds.chance_met(k, 2, 2, 2) >= 0.9 > rounds.chance_met(k - 1, 2, 2, 2)
    # this device build's round 1: torch#1 had 1 survivor of 2 candidates and needed 2 more
    [segment] = rounds.next_round(0, {"torch#1": 3}, Counter({"torch#1": 1}), Counter({"torch#1": 2}), 1.25, 100)
    assert segment.count == k > 5   # 5: what the mean rate alone asked for
    # many candidates pin the rate down: the count approaches deficit / rate
    [big] = rounds.next_round(0, {"a": 1100}, Counter({"a": 700}), Counter({"a": 1000}), 1.0, 10_000)
    assert 400 / 0.7 <= big.count <= 1.1 * 400 / 0.7


def test_select_takes_the_first_quota_per_source_by_sample_index():
    survivors = [{"sample_index": i, "data_source": s} for i, s in
                 [(9, "a"), (1, "a"), (5, "b"), (3, "a"), (7, "b"), (2, "c")]]
    chosen, surplus = rounds.select(survivors, {"a": 2, "b": 1})
    assert [r["sample_index"] for r in chosen] == [1, 3, 5]
    assert sorted(r["sample_index"] for r in surplus) == [2, 7, 9]


def test_dataset_table_has_a_fixed_schema_even_when_timings_are_null():
    record = {"code": "x", "ops": ["torch.tanh"], "data_source": "torch#1", "id": "ops-1", "num_ops": 1, "seed": 0,
              "graph": {"nodes": []}, "input_shapes": [[2, 3]], "output_shape": [2, 3], "flops": 6,
              "bytes_moved": 48, "kb_nearest": "level1/1", "kb_similarity": 0.2, "extra": "dropped"}
    table = dataset_table([record])
    assert table.schema == DATASET_SCHEMA and tuple(table.column_names) == COLUMNS
    row = table.to_pylist()[0]
    assert row["eager_ms"] is None and row["hardware"] is None and row["graph"] == '{"nodes": []}'
    assert dataset_table([]).schema == DATASET_SCHEMA


def test_shipped_prior_covers_every_source_for_the_profiles_users_build():
    for profile, device in (("smoke", "cpu"), ("gpu", "cuda"), ("gpu", "cpu"), ("odd", "tpu")):
        prior = rounds.load_prior(profile, device)
        for source in DEFAULT_MIX:
            alpha, beta = prior.beta(source)
            assert alpha > 0 and beta > 0 and alpha + beta == pytest.approx(prior.strength)
        assert 0 < prior.window <= 1


def test_survival_round_zero_draws_each_source_by_its_expected_survival():
    prior = rounds.load_prior("gpu", "cuda")
    wanted = rounds.quotas(300, DEFAULT_MIX)
    segments = rounds.next_round(0, wanted, {}, Counter(), 1.25, max_count=10_000, prior=prior)
    by_source = {s.source: s for s in segments}
    assert set(by_source) == {s for s, q in wanted.items() if q}
    for source, segment in by_source.items():
        alpha, beta = prior.beta(source)
        assert rounds.chance_met(segment.count, wanted[source], alpha, beta) >= rounds.ROUND_CONFIDENCE
        assert segment.count >= wanted[source] / (alpha / (alpha + beta))   # at least the mean expectation
    # torch#1 survives about 1 in 4 on the GPU: it gets about 4x its quota, torch#2 much less
    assert by_source["torch#1"].count / wanted["torch#1"] > 2 * by_source["torch#2"].count / wanted["torch#2"]
    starts = [s.start for s in segments]
    assert starts == sorted(starts) and starts[0] == 0
    assert all(a.start + a.count == b.start for a, b in zip(segments, segments[1:]))   # no index twice


def test_expected_survivors_leave_a_fractional_deficit_rounded_up():
    [segment] = rounds.next_round(50, {"torch#2": 10}, {"torch#2": 8.4}, Counter({"torch#2": 12}), 1.0, 100,
                                  prior=rounds.load_prior("gpu", "cuda"))
    assert segment.start == 50 and segment.count >= 2
    assert rounds.next_round(0, {"torch#2": 10}, {"torch#2": 10.0}, Counter({"torch#2": 12}), 1.0, 100) == []


def test_unneeded_shards_are_those_after_a_source_quota_met_by_finished_shards():
    from opgen.pipeline.rounds import unneeded_shards

    shards = [(0, "torch#1"), (1, "torch#2"), (2, "torch#2"), (3, "torch#1"), (4, "torch#2"), (5, "torch#2"),
              (6, None)]
    survivors = {0: 1, 1: 2, 2: 1, 3: 0, 4: 3, 5: 3}.get
    # torch#2 needs 3: shards 1 and 2 (both finished) hold them, so 4 and 5 can only add surplus
    assert unneeded_shards(shards, {0, 1, 2}, survivors, {"torch#1": 2, "torch#2": 3}) == [4, 5]
    # an unfinished earlier shard decides nothing: its survivors might be the ones the dataset takes
    assert unneeded_shards(shards, {0, 2}, survivors, {"torch#1": 2, "torch#2": 3}) == []
    # torch#1 needs 1 and shard 0 has it; a mixed shard (source None) is never skipped
    assert unneeded_shards(shards, {0}, survivors, {"torch#1": 1, "torch#2": 99}) == [3]
    # a later-finishing shard does not count before the earlier ones finish
    assert unneeded_shards(shards, {1, 4}, survivors, {"torch#2": 3}) == []


def test_execution_order_runs_every_source_s_needed_shards_before_any_margin():
    # an n = 150 gpu build's round 0, shortened: torch#1 in 4 shards, torch#2 in 8, one shard each of two rare sources
    shards = [(0, "torch#1"), (1, "torch#1"), (2, "torch#1"), (3, "torch#1"),
              *[(4 + j, "torch#2") for j in range(8)], (12, "torch#4"), (13, "transformers")]
    order = rounds.execution_order(shards)
    assert sorted(order) == list(range(14))
    # the rare sources and each source's first shard start at once
    assert order[:4] == [0, 4, 12, 13]
    # torch#1's last shard (its likeliest margin) waits until torch#2 is as far along: behind torch#2's 7th
    assert order.index(3) > order.index(9) and order.index(3) < order.index(11)
    # within a source, sample-index order
    for source in ("torch#1", "torch#2"):
        own = [shard for shard in order if dict(shards)[shard] == source]
        assert own == sorted(own)
    # taking sources in turn would have run torch#1's last shard fourth of the big two's
    assert order.index(3) > 8
