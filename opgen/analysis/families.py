"""Family figures of a task set: distinct families and chains, near-duplicate pairs, KernelBench family matches,
the share of adjacent pairs that real models have (the composition prior), batch sizes of convolution and
row-wise tasks, and the top families and adjacent pairs beside KernelBench level 2's and the prior's
(docs/benchmarks.md, "Composition"); `opgen audit DATASET --families` prints them."""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

from filters.dedup.chains import SIZE_RATIO, TaskShape, same_regime, task_shape
from kernels_ref import load_reference
from kernels_ref.index import SIGNATURE_LEVELS, problem_name
from opgen.publish.family_mix import family_counts, pair_counts, prior_pair_share, share, task_families
from opgen.taskcode.ops import ops_from_code
from opgen.vocab import cached_vocabulary
from opgen.vocab.families import families_of, family_signature
from opgen.vocab.prior import CompositionPrior, load_prior

CONV_BATCH_LIMIT = 512      # real networks: no convolution or pooling task above this batch
ROWS_LIMIT = 65536          # real networks: at most 10% of row-wise tasks above this many rows


def inputs_within(first: dict, second: dict, ratio: float = SIZE_RATIO) -> bool:
    """Every input dimension within `ratio` (same number of inputs, same ranks)."""
    a, b = first.get("input_shapes") or [], second.get("input_shapes") or []
    if [len(s) for s in a] != [len(s) for s in b]:
        return False
    return all(max(x, y) <= ratio * max(1, min(x, y)) for s, t in zip(a, b) for x, y in zip(s, t))


def regime_difference(first: TaskShape, second: TaskShape) -> str:
    """What keeps two same-chain tasks apart under the dedup rule: the salient parameters that differ, per
    operator (`op1 kernel_size 1/7`), else the main sizes that are more than 2x apart."""
    (nodes_a, layout_a), (nodes_b, layout_b) = first.salient, second.salient
    if layout_a != layout_b:
        return "shape layout"
    parts = []
    for position, (a, b) in enumerate(zip(nodes_a, nodes_b)):
        a, b = dict(a), dict(b)
        parts += [f"op{position} {name} {a.get(name)}/{b.get(name)}" for name in sorted(set(a) | set(b))
                  if a.get(name) != b.get(name)]
    if not parts:
        parts = [f"size {x}/{y}" for x, y in zip(first.sizes, second.sizes)
                 if max(x, y) > SIZE_RATIO * max(1, min(x, y))][:3]
    return ", ".join(parts)


def near_duplicate_pairs(rows: list[dict]) -> tuple[int, int, list[str]]:
    """Pairs with the same family chain and every input dimension within 2x, of those the pairs that are also one
    regime under the dedup rule (same salient parameters, every main size within 2x), and for the others what
    tells them apart."""
    by_chain: dict[tuple[str, ...], list[dict]] = defaultdict(list)
    for row in rows:
        by_chain[family_signature(task_families(row))].append(row)
    loose = strict = 0
    apart: list[str] = []
    for chain, group in by_chain.items():
        for first, second in combinations(group, 2):
            if inputs_within(first, second):
                loose += 1
                shapes = task_shape(first, chain), task_shape(second, chain)
                if same_regime(*shapes):
                    strict += 1
                else:
                    apart.append(f"{_name(chain)} {first['input_shapes']}: {regime_difference(*shapes)}")
    return loose, strict, apart


def kernelbench_chains(reference: str | None) -> dict[str, tuple[str, ...]]:
    """Family signature of every KernelBench level 1-3 problem, by problem name."""
    return {problem_name(row): family_signature(families_of(ops_from_code(row["code"])))
            for row in load_reference(reference) if row["level"] in SIGNATURE_LEVELS}


def _name(key) -> str:
    return " → ".join(f"`{f}`" for f in (key if isinstance(key, tuple) else (key,))) if key else ""


def side_by_side(title: str, ours: list, theirs: list, total: int, kb_total: int,
                 real: list[tuple[str, float]] | None = None) -> list[str]:
    """Top entries of these tasks beside KernelBench level 2's and (if given) the prior's real-model shares."""
    head = f"| # | {title} (these tasks) | tasks | share | {title} (KernelBench level 2) | problems | share |"
    rule = "|---:|---|---:|---:|---|---:|---:|"
    if real is not None:
        head, rule = head + f" {title} (real models) | share |", rule + "---|---:|"
    lines = [head, rule]
    for rank in range(max(len(ours), len(theirs), len(real or []))):
        left = ours[rank] if rank < len(ours) else ("", 0)
        right = theirs[rank] if rank < len(theirs) else ("", 0)
        line = (f"| {rank + 1} | {_name(left[0])} | {left[1]} | {share(left[1], total)} | {_name(right[0])} | "
                f"{right[1]} | {share(right[1], kb_total)} |")
        if real is not None:
            key, value = real[rank] if rank < len(real) else ("", 0.0)
            line += f" {_name(key)} | {100 * value:.1f}% |" if key else " | |"
        lines.append(line)
    return lines


def batch_figures(rows: list[dict]) -> tuple[tuple[int, int], tuple[int, int]]:
    """((convolution/pooling tasks with batch > 512, such tasks), (row-wise tasks with > 65,536 rows, such tasks)).
    A row-wise task's first input is (rows, features)."""
    vocab = cached_vocabulary()
    category = {spec.family: spec.category for spec in vocab}
    conv = [row for row in rows if any(category.get(f) in ("conv", "pooling") for f in task_families(row))]
    conv_big = sum(1 for row in conv if row["input_shapes"] and row["input_shapes"][0][0] > CONV_BATCH_LIMIT)
    row_wise = [row for row in rows if row["input_shapes"] and len(row["input_shapes"][0]) == 2]
    rows_big = sum(1 for row in row_wise if row["input_shapes"][0][0] > ROWS_LIMIT)
    return (conv_big, len(conv)), (rows_big, len(row_wise))


def prior_tables(prior: CompositionPrior, top: int) -> tuple[list, list]:
    families = list(prior.families.items())[:top]
    pairs = [(tuple(pair.split(" -> ")), value) for pair, value in list(prior.pairs.items())[:top]]
    return families, pairs


def family_report(rows: list[dict], reference: str | None, title: str, top: int = 15,
                  prior_path: str | None = None) -> str:
    """The family figures of `rows` (headed by `title`) and the `top` families and adjacent pairs beside KernelBench
    level 2's and the real models' (`reference`: KernelBench, see kernels_ref.load_reference)."""
    chains = [task_families(row) for row in rows]
    kb = kernelbench_chains(reference)
    kb_l2 = [list(chain) for name, chain in kb.items() if name.startswith("level2/")]
    families = family_counts(chains)
    signatures = [family_signature(chain) for chain in chains]
    kb_by_chain = {chain: name for name, chain in kb.items() if chain}
    matches = [(row.get("id"), kb_by_chain[s]) for row, s in zip(rows, signatures) if s in kb_by_chain]
    loose, strict, apart = near_duplicate_pairs(rows)
    repeats = len(signatures) - len(set(signatures))
    prior = load_prior(prior_path)
    real, adjacent = prior_pair_share(chains, prior)
    (conv_big, conv), (rows_big, row_wise) = batch_figures(rows)
    prior_families, prior_pairs = prior_tables(prior, top)
    lines = [
        f"{title}: {len(rows)} tasks",
        f"distinct families: {len(families)}; distinct family chains: {len(set(signatures))} "
        f"({repeats} tasks repeat a chain already present)",
        f"near-duplicate pairs (same family chain, every input dimension within {SIZE_RATIO:g}x): {loose}; "
        f"of which one regime under the dedup rule: {strict}"
        + (f"; the other {len(apart)}, with what tells them apart:" if apart else "")
        + "".join(f"\n  {line}" for line in apart[:20]),
        f"family-signature matches with KernelBench levels 1-3 ({len(kb)} problems): {len(matches)}"
        + "".join(f"\n  {task} = {problem}" for task, problem in matches[:10]),
        f"adjacent family pairs that real models have (composition prior, {len(prior.models)} models): {real} of "
        f"{adjacent} ({share(real, adjacent)})",
        f"convolution/pooling tasks with batch > {CONV_BATCH_LIMIT}: {conv_big} of {conv} ({share(conv_big, conv)}); "
        f"row-wise tasks (first input rows x features) with > {ROWS_LIMIT:,} rows: {rows_big} of {row_wise} "
        f"({share(rows_big, row_wise)})",
        "", *side_by_side("family", families.most_common(top), family_counts(kb_l2).most_common(top), len(rows),
                          len(kb_l2), prior_families),
        "", *side_by_side("adjacent pair", pair_counts(chains).most_common(top),
                          pair_counts(kb_l2).most_common(top), len(rows), len(kb_l2), prior_pairs),
    ]
    return "\n".join(lines)
