"""Family figures of a task set: distinct families and chains, near-duplicate pairs, KernelBench family matches,
and the top families and adjacent pairs beside KernelBench level 2's (docs/benchmarks.md, issue 13).

    python scripts/family_mix.py data/fam60                  # a run folder (tasks.parquet) ...
    python scripts/family_mix.py data/dev/gpu6000.jsonl      # ... or a JSONL of candidates (opgen sample)
    python scripts/family_mix.py data/dev/gpu6000.jsonl --verdicts data/dev/dedup6000.jsonl   # its dedup survivors
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from filters.dedup.chains import SIZE_RATIO, same_regime, task_shape  # noqa: E402
from kernels_ref import load_reference  # noqa: E402
from kernels_ref.index import SIGNATURE_LEVELS, problem_name  # noqa: E402
from opgen.jsonl import read_inputs, read_jsonl  # noqa: E402
from opgen.publish.family_mix import family_counts, pair_counts, share, task_families  # noqa: E402
from opgen.taskcode.ops import ops_from_code  # noqa: E402
from opgen.vocab.families import families_of, family_signature  # noqa: E402

DEFAULT_REFERENCE = str(Path(__file__).resolve().parents[2] / "shared" / "kernelbench" / "problems.jsonl")


def read_tasks(path: Path) -> list[dict]:
    """Rows of a run folder's tasks.parquet, a parquet file, or a JSONL of records."""
    if path.is_dir():
        path = path / "tasks.parquet"
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    return read_inputs(path)


def inputs_within(first: dict, second: dict, ratio: float = SIZE_RATIO) -> bool:
    """Every input dimension within `ratio` (same number of inputs, same ranks)."""
    a, b = first.get("input_shapes") or [], second.get("input_shapes") or []
    if [len(s) for s in a] != [len(s) for s in b]:
        return False
    return all(max(x, y) <= ratio * max(1, min(x, y)) for s, t in zip(a, b) for x, y in zip(s, t))


def near_duplicate_pairs(rows: list[dict]) -> tuple[int, int]:
    """Pairs with the same family chain and every input dimension within 2x, and of those the pairs that are
    also one regime under the dedup rule (same salient parameters, every main size within 2x)."""
    by_chain: dict[tuple[str, ...], list[dict]] = defaultdict(list)
    for row in rows:
        by_chain[family_signature(task_families(row))].append(row)
    loose = strict = 0
    for chain, group in by_chain.items():
        for first, second in combinations(group, 2):
            if inputs_within(first, second):
                loose += 1
                strict += same_regime(task_shape(first, chain), task_shape(second, chain))
    return loose, strict


def kernelbench_chains(reference: str) -> dict[str, tuple[str, ...]]:
    """Family signature of every KernelBench level 1-3 problem, by problem name."""
    return {problem_name(row): family_signature(families_of(ops_from_code(row["code"])))
            for row in load_reference(reference) if row["level"] in SIGNATURE_LEVELS}


def side_by_side(title: str, ours: list, theirs: list, total: int, kb_total: int) -> list[str]:
    lines = [f"| # | {title} (these tasks) | tasks | share | {title} (KernelBench level 2) | problems | share |",
             "|---:|---|---:|---:|---|---:|---:|"]
    for rank in range(max(len(ours), len(theirs))):
        left = ours[rank] if rank < len(ours) else ("", 0)
        right = theirs[rank] if rank < len(theirs) else ("", 0)
        name = [" → ".join(f"`{f}`" for f in (key if isinstance(key, tuple) else (key,))) if key else ""
                for key, _ in (left, right)]
        lines.append(f"| {rank + 1} | {name[0]} | {left[1]} | {share(left[1], total)} | {name[1]} | {right[1]} | "
                     f"{share(right[1], kb_total)} |")
    return lines


def report(path: Path, reference: str, top: int = 15, verdicts: Path | None = None) -> str:
    rows = read_tasks(path)
    if verdicts is not None:
        lines = read_jsonl(verdicts)  # one per input, in input order
        rows = [row for row, line in zip(rows, lines, strict=True) if line.get("keep")]
    chains = [task_families(row) for row in rows]
    kb = kernelbench_chains(reference)
    kb_l2 = [list(chain) for name, chain in kb.items() if name.startswith("level2/")]
    families = family_counts(chains)
    signatures = [family_signature(chain) for chain in chains]
    kb_by_chain = {chain: name for name, chain in kb.items() if chain}
    matches = [(row.get("id"), kb_by_chain[s]) for row, s in zip(rows, signatures) if s in kb_by_chain]
    loose, strict = near_duplicate_pairs(rows)
    repeats = len(signatures) - len(set(signatures))
    lines = [
        f"{path}{f' (kept by {verdicts})' if verdicts else ''}: {len(rows)} tasks",
        f"distinct families: {len(families)}; distinct family chains: {len(set(signatures))} "
        f"({repeats} tasks repeat a chain already present)",
        f"near-duplicate pairs (same family chain, every input dimension within {SIZE_RATIO:g}x): {loose}; "
        f"of which one regime under the dedup rule: {strict}",
        f"family-signature matches with KernelBench levels 1-3 ({len(kb)} problems): {len(matches)}"
        + "".join(f"\n  {task} = {problem}" for task, problem in matches[:10]),
        "", *side_by_side("family", families.most_common(top), family_counts(kb_l2).most_common(top), len(rows),
                          len(kb_l2)),
        "", *side_by_side("adjacent pair", pair_counts(chains).most_common(top),
                          pair_counts(kb_l2).most_common(top), len(rows), len(kb_l2)),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", type=Path, help="run folder, tasks parquet, or candidates JSONL")
    parser.add_argument("--reference", default=DEFAULT_REFERENCE, help="KernelBench JSONL (offline copy)")
    parser.add_argument("--verdicts", type=Path, default=None, help="dedup verdicts: report the kept rows only")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()
    print(report(args.input, args.reference, args.top, args.verdicts))


if __name__ == "__main__":
    main()
