"""Whether a published dataset holds the claims its card makes, from its rows alone (no GPU, nothing run): the size
and the data_source quotas of CUDA-Agent-Ops-6K, one seed, no exact or near duplicate, no KernelBench look-alike,
no task that accepts a cheap wrong answer on 99% of its values, no same-shape twins, every eager time in the window;
and its distinct families and chains. Exit 1 when a claim fails, 2 on bad input. `opgen check` runs the tasks.

    python scripts/analysis/card_claims.py data/opgen-ops-6k --n 6000 [--seed 0] [--json OUT.json]
    python scripts/analysis/card_claims.py DATASET_FOLDER             # the claims that need no size
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filters.dedup.chains import same_regime, task_shape  # noqa: E402
from filters.window import Window  # noqa: E402
from opgen.errors import UsageError  # noqa: E402
from opgen.jsonl import require_writable  # noqa: E402
from opgen.pipeline.check import timed_on_gpu  # noqa: E402
from opgen.pipeline.rounds import quotas  # noqa: E402
from opgen.publish.family_mix import task_families  # noqa: E402
from opgen.records import task_id  # noqa: E402
from opgen.sample.sampler import DEFAULT_MIX  # noqa: E402
from opgen.vocab.families import family_signature  # noqa: E402
from scripts.analysis.family_mix import kernelbench_chains, near_duplicate_pairs  # noqa: E402
from scripts.analysis.grader_proof_audit import audit  # noqa: E402
from scripts.analysis.task_rows import read_task_rows  # noqa: E402

ACCEPT_SHARE = 0.99   # the grader-proof claim: no task accepts a cheap wrong answer on this share of its values


@dataclass
class Claim:
    """One claim of the card: what it says, what the rows show, whether it holds (None: a figure, not a claim)."""

    claim: str
    found: str
    holds: bool | None


def one_regime(first: dict, second: dict) -> bool:
    """Two tasks of one family chain are one regime under the dedup chain rule (filters/dedup/chains.py)."""
    chain = family_signature(task_families(first))
    return same_regime(task_shape(first, chain), task_shape(second, chain))


def claims(rows: list[dict], reference: str | None, n: int | None = None, seed: int | None = None,
           share: float = ACCEPT_SHARE) -> list[Claim]:
    """Every claim checked over `rows` (a published config's rows); `n` adds the size and quota claims."""
    found: list[Claim] = []
    if n is not None:
        found.append(Claim(f"{n:,} rows", f"{len(rows):,}", len(rows) == n))
        wanted, have = quotas(n, DEFAULT_MIX), Counter(row.get("data_source") for row in rows)
        off = {source: (have.get(source, 0), count) for source, count in wanted.items() if have.get(source, 0) != count}
        extra = sorted(str(source) for source in set(have) - set(wanted))
        found.append(Claim("data_source quotas of CUDA-Agent-Ops-6K (largest remainder)",
                           "all met" if not off and not extra else "; ".join(
                               [f"{s} {h} of {w}" for s, (h, w) in off.items()] + [f"{s} not a source" for s in extra]),
                           not off and not extra))
    seeds = Counter(row.get("seed") for row in rows)
    found.append(Claim("one seed" + (f" ({seed})" if seed is not None else ""),
                       ", ".join(f"{s}: {c}" for s, c in sorted(seeds.items(), key=lambda kv: str(kv[0]))),
                       len(seeds) == 1 and (seed is None or seed in seeds)))
    ids = Counter(row["id"] for row in rows)
    codes = Counter(task_id(row["code"]) for row in rows)   # an id is the hash of its code
    found.append(Claim("0 exact duplicates (id, code)", f"{sum(c - 1 for c in ids.values())} repeated ids, "
                       f"{sum(c - 1 for c in codes.values())} repeated codes",
                       max(ids.values(), default=1) == 1 and max(codes.values(), default=1) == 1))
    loose, strict, _ = near_duplicate_pairs(rows)
    found.append(Claim("0 near duplicates under the dedup rule", f"{strict} of {loose} pairs with the same family "
                       "chain and every input dimension within 2x", strict == 0))
    kb = {chain: name for name, chain in kernelbench_chains(reference).items() if chain}
    matches = [row["id"] for row in rows if family_signature(task_families(row)) in kb]
    found.append(Claim("0 KernelBench level 1-3 family-signature matches", f"{len(matches)}"
                       + (f": {', '.join(matches[:5])}" if matches else ""), not matches))
    graded = audit(rows, share)
    found.append(Claim(f"0 tasks accepting zeros, a constant or another draw on {share:.0%} of their values",
                       f"{len(graded['over_share'])}; highest share {graded['max_share']:.3f}",
                       not graded["over_share"]))
    by_id = {row["id"]: row for row in rows}
    twins = [(a, b) for a, b, _ in graded["twins"] if one_regime(by_id[a], by_id[b])]
    found.append(Claim("0 same-shape twins (same family chain and input shapes, one regime under the chain rule)",
                       f"{len(twins)} of {len(graded['twins'])} same-shape pairs"
                       + (f": {', '.join(f'{a}={b}' for a, b in twins[:5])}" if twins else
                          " (the others differ in a salient parameter or a size beyond 2x)" if graded["twins"] else ""),
                       not twins))
    window = Window()
    gpu_rows = [row for row in rows if timed_on_gpu(row)]
    outside = [row["id"] for row in gpu_rows if not window.contains(row["eager_ms"])]
    times = [row["eager_ms"] for row in gpu_rows]
    untimed = len(rows) - len(gpu_rows)   # a CPU build's rows (or rows never timed): the window does not apply
    found.append(Claim(f"every eager time in {window.lo_ms:g}-{window.hi_ms:g} ms (timed on a GPU)",
                       (f"{min(times):.2f}-{max(times):.2f} ms; " if times else "")
                       + f"{len(outside)} outside" + (f"; {untimed} rows not timed on a GPU" if untimed else ""),
                       not outside))
    chains = [family_signature(task_families(row)) for row in rows]
    found.append(Claim("distinct families, family chains",
                       f"{len({f for chain in chains for f in chain})}, {len(set(chains))}", None))
    return found


def markdown(found: list[Claim]) -> str:
    lines = ["| claim | found | holds |", "|---|---|---|"]
    lines += [f"| {c.claim} | {c.found} | {'—' if c.holds is None else 'yes' if c.holds else '**no**'} |"
              for c in found]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="a published dataset folder (opgen publish), or a run folder")
    parser.add_argument("--n", type=int, default=None, help="the size the card claims: adds the size and quotas")
    parser.add_argument("--seed", type=int, default=None, help="the seed the card claims")
    parser.add_argument("--config", default="default", help="the config to read (a precision: bf16, fp16)")
    parser.add_argument("--reference", default=None,
                        help="KernelBench: a JSONL, a checkout or a Hub id (default: $OPGEN_KERNELBENCH, else the Hub)")
    parser.add_argument("--json", type=Path, help="also write the claims here")
    args = parser.parse_args(argv)
    if not args.dataset.exists():
        print(f"error: no dataset at {args.dataset}", file=sys.stderr)
        return 2
    try:
        if args.json is not None:
            require_writable(args.json, "--json")
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    try:
        rows = read_task_rows(args.dataset, args.config)
    except Exception as error:  # datasets' own errors: a folder that is not a dataset, a config it lacks
        print(f"error: cannot read {args.dataset} ({args.config}): {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    try:
        found = claims(rows, args.reference, args.n, args.seed)
    except UsageError as error:   # the KernelBench reference cannot be loaded
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.dataset} ({args.config}): {len(rows):,} rows")
    print(markdown(found))
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(c) for c in found], indent=1))
    return 1 if any(c.holds is False for c in found) else 0


if __name__ == "__main__":
    sys.exit(main())
