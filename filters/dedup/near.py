"""Dedup and decontamination of a candidate set: exact, MinHash-LSH and family-chain near duplicates, KernelBench
look-alikes."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import networkx as nx
from datasketch import MinHash, MinHashLSH

from filters.base import Funnel, Verdict
from filters.dedup.chains import DEFAULT_MAX_PER_CHAIN, chain_duplicates
from filters.dedup.decontam import CONTAMINATION_THRESHOLD, check_contamination
from kernels_ref import ReferenceIndex, reference_index
from kernels_ref.fingerprint import FINGERPRINT_ERRORS, SHINGLE_SIZE, Fingerprint, fingerprint, jaccard
from opgen.interrupts import spared_children
from opgen.vocab.families import family_signature

DEDUP_STAGE = "dedup"
DUPLICATE_THRESHOLD = 0.9   # whole-file shingle Jaccard at or above which two tasks are near duplicates
NUM_PERM = 128
MINHASH_SEED = 1
_PARALLEL_FROM = 4000       # below this many distinct codes, worker start-up costs more than it saves


@dataclass
class DedupResult:
    """Verdict lines in input order and the counts for the report."""

    verdicts: list[dict]
    summary: dict = field(default_factory=dict)


def _fingerprint_or_none(args: tuple[str, int]) -> Fingerprint | None:
    code, shingle_size = args
    try:
        return fingerprint(code, shingle_size)
    except FINGERPRINT_ERRORS:
        return None


def fingerprint_codes(codes: list[str], shingle_size: int = SHINGLE_SIZE,
                      workers: int | None = None) -> list[Fingerprint | None]:
    """Fingerprint of each code (None where it does not parse); equal codes are fingerprinted once."""
    unique = list(dict.fromkeys(codes))
    workers = workers or min(2, os.cpu_count() or 1)
    jobs = [(code, shingle_size) for code in unique]
    if workers > 1 and len(unique) >= _PARALLEL_FROM and "fork" in multiprocessing.get_all_start_methods():
        # fork: the workers inherit the imported modules (torch included) instead of importing them again.
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            with spared_children():   # the workers start as the jobs go in; the terminal's Ctrl-C is the command's
                results = pool.map(_fingerprint_or_none, jobs, chunksize=max(64, len(jobs) // (workers * 8)))
            prints = list(results)
    else:
        prints = [_fingerprint_or_none(job) for job in jobs]
    by_code = dict(zip(unique, prints))
    return [by_code[code] for code in codes]


# The detail of a duplicate verdict, by kind: the rule that found it and the task it duplicates.
DUPLICATE_RULES = {
    "exact": "exact rule: the same code after normalisation as {twin}",
    "near": f"near-duplicate rule: token Jaccard similarity of at least {DUPLICATE_THRESHOLD} with {{twin}}",
    "chain": "chain rule: the same family chain, salient parameters and size regime as {twin}",
    "chain_cap": "chain rule: over the cap of tasks per family chain (the first kept is {twin})",
}


def near_duplicate_pairs(shingle_sets: list[frozenset[int]], threshold: float = DUPLICATE_THRESHOLD,
                         num_perm: int = NUM_PERM, seed: int = MINHASH_SEED) -> list[tuple[int, int, float]]:
    """Pairs (i, j, jaccard), i < j, with exact Jaccard >= threshold: MinHashLSH candidates, then confirmed."""
    if len(shingle_sets) < 2:
        return []
    # Shingles are already 32-bit hashes, so the MinHash hash function is the identity.
    minhashes = MinHash.bulk(([*s] for s in shingle_sets), num_perm=num_perm, seed=seed, hashfunc=int)
    lsh = MinHashLSH(threshold=max(0.5, threshold - 0.05), num_perm=num_perm)
    with lsh.insertion_session() as session:
        for key, minhash in enumerate(minhashes):
            session.insert(key, minhash, check_duplication=False)
    pairs = []
    for i, minhash in enumerate(minhashes):
        for j in lsh.query(minhash):
            if j > i:
                similarity = jaccard(shingle_sets[i], shingle_sets[j])
                if similarity >= threshold:
                    pairs.append((i, j, similarity))
    return sorted(pairs)


def _resolve_index(reference: str | ReferenceIndex | None, cache_dir, shingle_size: int) -> ReferenceIndex:
    if isinstance(reference, ReferenceIndex):
        return reference
    return reference_index(reference, cache_dir=cache_dir, shingle_size=shingle_size)   # None: the one rule


def _family_chain(record: dict, print_: Fingerprint) -> tuple[str, ...]:
    """A record's family signature: from its `families` column when it has one, else from its code."""
    families = record.get("families")
    return family_signature(families) if isinstance(families, list) else print_.families


def run_dedup(records: list[dict], *, reference: str | ReferenceIndex | None = None,
              existing: list[dict] | None = None, threshold: float = CONTAMINATION_THRESHOLD,
              duplicate_threshold: float = DUPLICATE_THRESHOLD, num_perm: int = NUM_PERM,
              seed: int = MINHASH_SEED, shingle_size: int = SHINGLE_SIZE, cache_dir: str | None = None,
              workers: int | None = None, max_per_chain: int = DEFAULT_MAX_PER_CHAIN,
              funnel: Funnel | None = None) -> DedupResult:
    """Verdicts for `records` (see dedup_verdicts) plus the summary counts; each verdict is counted into
    `funnel` as stage DEDUP_STAGE."""
    clock = [time.perf_counter()]
    index = _resolve_index(reference, cache_dir, shingle_size)
    existing = existing or []
    clock.append(time.perf_counter())
    prints = fingerprint_codes([r["code"] for r in records] + [r["code"] for r in existing], shingle_size, workers)
    new_prints, old_prints = prints[:len(records)], prints[len(records):]

    parsed = [i for i, p in enumerate(new_prints) if p is not None]
    chains = {i: _family_chain(records[i], new_prints[i]) for i in parsed}
    clock.append(time.perf_counter())
    contamination = dict(zip(parsed, check_contamination([new_prints[i] for i in parsed], index, threshold,
                                                         [chains[i] for i in parsed])))
    clock.append(time.perf_counter())
    clean = [i for i in parsed if contamination[i].rule is None]

    # Nodes: distinct exact keys of the clean new records and of the existing ones.
    members: dict[str, list[tuple[str, int]]] = {}
    for i in clean:
        members.setdefault(new_prints[i].exact_key, []).append(("new", i))
    for j, print_ in enumerate(old_prints):
        if print_ is not None:
            members.setdefault(print_.exact_key, []).append(("old", j))
    keys = sorted(members)
    first_print = {key: new_prints[m[1]] if m[0] == "new" else old_prints[m[1]]
                   for key, (m, *_) in members.items()}
    graph = nx.Graph()
    graph.add_nodes_from(keys)
    pairs = near_duplicate_pairs([first_print[k].file_shingles for k in keys], duplicate_threshold, num_perm, seed)
    graph.add_edges_from((keys[i], keys[j]) for i, j, _ in pairs)

    duplicate_of: dict[int, tuple[str, str]] = {}   # new index -> (survivor id, duplicate kind)
    cluster_sizes: Counter = Counter()
    for component in nx.connected_components(graph):
        group = [(kind, i, key) for key in component for kind, i in members[key]]
        new = [(i, key) for kind, i, key in group if kind == "new"]
        if not new or len(group) == 1:
            continue
        old = [i for kind, i, _ in group if kind == "old"]
        if old:
            anchor = min(old, key=lambda j: str(existing[j].get("id")))
            survivor_id, survivor_key = existing[anchor].get("id"), old_prints[anchor].exact_key
        else:
            survivor, survivor_key = min(new, key=lambda m: (str(records[m[0]].get("id")),
                                                              str(records[m[0]].get("source")), m[0]))
            survivor_id = records[survivor].get("id")
            new = [m for m in new if m[0] != survivor]
        cluster_sizes[len(group)] += 1
        for i, key in new:
            duplicate_of[i] = (survivor_id, "exact" if key == survivor_key else "near")

    clock.append(time.perf_counter())
    distinct = [i for i in clean if i not in duplicate_of]
    by_chain = chain_duplicates(
        [((str(records[i].get("id")), str(records[i].get("source"))), records[i].get("id"), chains[i], records[i])
         for i in distinct],
        [(record.get("id"), _family_chain(record, print_), record)
         for record, print_ in zip(existing, old_prints) if print_ is not None],
        max_per_chain)
    duplicate_of.update((distinct[position], twin) for position, twin in by_chain.items())
    clock.append(time.perf_counter())

    verdicts = []
    for i, record in enumerate(records):
        if new_prints[i] is None:
            verdicts.append(_counted(Verdict.reject("parse_error", "does not tokenize or parse", kb_nearest=None,
                                                    kb_similarity=None), funnel).line(record))
            continue
        metrics = contamination[i].metrics()
        if contamination[i].rule:
            verdict = Verdict.reject("contaminated", f"{contamination[i].rule}: {contamination[i].matched}", **metrics)
        elif i in duplicate_of:
            twin, kind = duplicate_of[i]
            verdict = Verdict.reject("duplicate", DUPLICATE_RULES[kind].format(twin=twin), duplicate_of=twin,
                                     duplicate_kind=kind, **metrics)
        else:
            verdict = Verdict.ok(**metrics)
        verdicts.append(_counted(verdict, funnel).line(record))

    rules = Counter(contamination[i].rule for i in parsed if contamination[i].rule)
    kinds = Counter(kind for _, kind in duplicate_of.values())
    summary = {"records": len(records), "existing": len(existing), "kept": sum(v["keep"] for v in verdicts),
               "parse_error": len(records) - len(parsed), "contaminated": dict(rules), "duplicate": dict(kinds),
               "clusters": dict(sorted(cluster_sizes.items())), "near_pairs": len(pairs),
               "reference": f"{len(index)} problems ({index.content_hash[:12]})", "threshold": threshold,
               "duplicate_threshold": duplicate_threshold, "max_per_chain": max_per_chain,
               "seconds": {stage: round(b - a, 3) for stage, a, b in zip(
                   ("reference", "fingerprint", "contamination", "near_duplicates", "chains"), clock, clock[1:])}}
    return DedupResult(verdicts, summary)


def _counted(verdict: Verdict, funnel: Funnel | None) -> Verdict:
    verdict.stages = [(DEDUP_STAGE, 0.0)]
    if funnel is not None:
        funnel.count(verdict)
    return verdict


def dedup_verdicts(records: list[dict], *, reference: str | ReferenceIndex | None = None,
                   existing: list[dict] | None = None, threshold: float = CONTAMINATION_THRESHOLD,
                   **options) -> list[dict]:
    """Verdict lines in input order: keep, reason (None, "duplicate", "contaminated", or "parse_error" for
    code that does not tokenize), kb_nearest, kb_similarity, and for duplicates duplicate_of (the survivor's
    id) and duplicate_kind (exact, near, chain: same family chain and regime, chain_cap: over max_per_chain).
    Clusters of duplicates keep one survivor, the smallest id, whatever the input order; `existing` records
    (accepted in earlier rounds) always survive. `options`: duplicate_threshold, num_perm, seed, shingle_size,
    cache_dir, workers, max_per_chain."""
    return run_dedup(records, reference=reference, existing=existing, threshold=threshold, **options).verdicts


def format_report(summary: dict) -> str:
    """The short stderr report of `opgen dedup`."""
    contaminated = summary["contaminated"]
    duplicates = summary["duplicate"]
    sizes = ", ".join(f"{count}x{size}" for size, count in summary["clusters"].items()) or "none"
    return "\n".join([
        f"dedup: {summary['records']} records, {summary['kept']} kept; reference {summary['reference']}",
        f"  contaminated: {sum(contaminated.values())} (operator signature = a KernelBench L1-3 task: "
        f"{contaminated.get('signature', 0)}; family signature = one: {contaminated.get('family_signature', 0)}; "
        f"shingle Jaccard >= {summary['threshold']}: {contaminated.get('jaccard', 0)})",
        f"  duplicate: {sum(duplicates.values())} (exact after normalisation: {duplicates.get('exact', 0)}, "
        f"near, Jaccard >= {summary['duplicate_threshold']}: {duplicates.get('near', 0)}, same family chain and "
        f"regime: {duplicates.get('chain', 0)}, over {summary['max_per_chain'] or 'no'} per chain: "
        f"{duplicates.get('chain_cap', 0)})",
        f"  duplicate clusters (count x size): {sizes}",
        *([f"  parse_error: {summary['parse_error']}"] if summary["parse_error"] else []),
    ])
