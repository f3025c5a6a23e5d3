"""Whether a published dataset holds the claims its card makes, from its rows alone (no GPU, nothing run): the size
and the data_source quotas of CUDA-Agent-Ops-6K, one seed, no exact or near duplicate, no KernelBench look-alike,
no task that accepts a cheap wrong answer on 99% of its values, no same-shape twins, every eager time in the window;
and its distinct families and chains (`opgen audit`; `opgen check` runs the tasks)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from filters.dedup.chains import same_regime, task_shape
from filters.window import Window
from opgen.analysis.families import kernelbench_chains, near_duplicate_pairs
from opgen.analysis.grader_proof import audit
from opgen.pipeline.check import timed_on_gpu
from opgen.pipeline.rounds import quotas
from opgen.publish.family_mix import task_families
from opgen.records import task_id
from opgen.sample.sampler import DEFAULT_MIX
from opgen.vocab.families import family_signature

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
    counts = Counter(row.get("held_out_count") for row in rows)
    if any(count is not None for count in counts):
        held = sum(c for count, c in counts.items() if count is not None and count >= 2)
        found.append(Claim("held-out input configurations: tasks with 2 or more",
                           f"{held} of {len(rows)} ({held / len(rows):.1%}); "
                           + ", ".join(f"{c} with {count}" for count, c in sorted(counts.items(), key=lambda kv: -(kv[0] or -1))
                                       if count is not None)
                           + (f"; {counts[None]} not derived" if counts.get(None) else ""), None))
    chains = [family_signature(task_families(row)) for row in rows]
    found.append(Claim("distinct families, family chains",
                       f"{len({f for chain in chains for f in chain})}, {len(set(chains))}", None))
    return found


def claims_table(found: list[Claim]) -> str:
    """The claims as a markdown table."""
    lines = ["| claim | found | holds |", "|---|---|---|"]
    lines += [f"| {c.claim} | {c.found} | {'—' if c.holds is None else 'yes' if c.holds else '**no**'} |"
              for c in found]
    return "\n".join(lines)
