"""Benchmark: dedup + decontamination of 50,000 sampled candidates (within the set and against KernelBench).

    python scripts/bench/dedup.py [--n 50000] [--reference ../shared/kernelbench/problems.jsonl]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filters.dedup.near import format_report, run_dedup  # noqa: E402
from kernels_ref import reference_index, resolve_reference  # noqa: E402
from opgen.records import task_id  # noqa: E402

DEFAULT_REFERENCE = resolve_reference()   # the README's rule, as every command


def sampled_candidates(count: int, seed: int = 0) -> list[dict]:
    """Smoke-profile candidates: the sampler's graphs rendered (the code sample_records gives, without its
    FLOP analysis, which dedup does not read)."""
    from opgen.sample.render import render
    from opgen.sample.sampler import sample_graph
    from opgen.vocab import cached_vocabulary

    vocab = cached_vocabulary()
    records = []
    for index in range(count):
        code = render(sample_graph(seed, index, "smoke", vocab), vocab)
        records.append({"id": task_id(code), "code": code})
    return records


def bench_dedup(count: int = 50_000, reference: str = DEFAULT_REFERENCE, num_perm: int = 128) -> dict:
    """Print and return the figures of one dedup run over `count` sampled candidates."""
    started = time.perf_counter()
    records = sampled_candidates(count)
    load_before = os.getloadavg()[0]
    made = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as cache:
        cold = time.perf_counter()
        reference_index(reference, cache_dir=cache)
        cold = time.perf_counter() - cold
        started, cpu_before = time.perf_counter(), os.times()
        result = run_dedup(records, reference=reference, cache_dir=cache, num_perm=num_perm)
        elapsed, cpu_after = time.perf_counter() - started, os.times()
    # CPU seconds of this process and its (joined) fingerprint workers: what the run costs without other load.
    cpu = sum(getattr(cpu_after, f) - getattr(cpu_before, f) for f in ("user", "system", "children_user",
                                                                          "children_system"))
    summary = result.summary
    print(f"bench_dedup: {count} candidates sampled in {made:.1f} s ({len({r['code'] for r in records})} distinct "
          f"codes); {os.cpu_count()} cores, load average before/after "
          f"{load_before:.1f}/{os.getloadavg()[0]:.1f} (other processes share the cores); num_perm {num_perm}")
    print(f"  reference fingerprints, cold (no cache): {cold:.2f} s")
    print(f"  dedup + decontamination, warm cache: {elapsed:.1f} s wall ({count / elapsed:,.0f} candidates/s), "
          f"{cpu:.1f} CPU s (this process + fingerprint workers); "
          f"stages: " + ", ".join(f"{stage} {seconds:.1f} s" for stage, seconds in summary["seconds"].items()))
    print("  " + format_report(summary).replace("\n", "\n  "))
    return {"candidates": count, "seconds": elapsed, "cpu_seconds": cpu, **summary}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--reference", default=DEFAULT_REFERENCE)
    parser.add_argument("--num-perm", type=int, default=128)
    args = parser.parse_args()
    bench_dedup(args.n, args.reference, args.num_perm)
