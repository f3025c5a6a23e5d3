"""`opgen dedup`: drop duplicates within a candidate set and KernelBench look-alikes; one verdict per input."""

from __future__ import annotations

import sys

from opgen.commands.paths import REFERENCE_HELP
from opgen.errors import UsageError
from opgen.jsonl import read_inputs, require_writable, write_jsonl


def register(sub) -> None:
    from filters.dedup.chains import DEFAULT_MAX_PER_CHAIN
    from filters.dedup.decontam import CONTAMINATION_THRESHOLD
    from filters.dedup.near import DUPLICATE_THRESHOLD, NUM_PERM, SHINGLE_SIZE
    parser = sub.add_parser("dedup", help="dedup and decontaminate against KernelBench; one verdict per input")
    parser.add_argument("--input", required=True, help="JSONL of records (with `code`) or a folder of .py tasks")
    parser.add_argument("--out", required=True, help="verdicts JSONL, one line per input, in input order")
    parser.add_argument("--reference", default=None, help=REFERENCE_HELP)
    parser.add_argument("--existing", default=None,
                        help="JSONL of already accepted records: they always survive, new copies of them are duplicates")
    parser.add_argument("--threshold", type=float, default=CONTAMINATION_THRESHOLD,
                        help=f"Model-class shingle Jaccard with a KernelBench task that flags contamination "
                             f"(default {CONTAMINATION_THRESHOLD})")
    parser.add_argument("--duplicate-threshold", type=float, default=DUPLICATE_THRESHOLD,
                        help=f"whole-file shingle Jaccard for near duplicates (default {DUPLICATE_THRESHOLD})")
    parser.add_argument("--max-per-chain", type=int, default=DEFAULT_MAX_PER_CHAIN,
                        help="tasks kept at most per chain of operator families, one per size regime "
                             f"(default {DEFAULT_MAX_PER_CHAIN}; 0: no cap)")
    parser.add_argument("--num-perm", type=int, default=NUM_PERM, help=f"MinHash permutations (default {NUM_PERM})")
    parser.add_argument("--shingle-size", type=int, default=SHINGLE_SIZE,
                        help=f"tokens per shingle (default {SHINGLE_SIZE})")
    parser.add_argument("--cache-dir", default=None, help="where reference fingerprints are cached (~/.cache/opgen)")
    parser.add_argument("--workers", type=int, default=None, help="fingerprinting processes (default min(2, cores))")
    parser.set_defaults(func=run)


def run(args) -> int:
    from filters.dedup.near import format_report, run_dedup

    for name in ("threshold", "duplicate_threshold"):
        if not 0 < getattr(args, name) <= 1:
            raise UsageError(f"--{name.replace('_', '-')} must be in (0, 1], got {getattr(args, name)}")
    if args.num_perm < 16 or args.shingle_size < 1:
        raise UsageError("--num-perm must be at least 16 and --shingle-size at least 1")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.max_per_chain < 0:
        raise UsageError(f"--max-per-chain must be 0 (no cap) or more, got {args.max_per_chain}")
    records = read_inputs(args.input)
    require_writable(args.out, inputs=args.input)
    existing = list(read_inputs(args.existing)) if args.existing else None
    result = run_dedup(records, reference=args.reference, existing=existing, threshold=args.threshold,
                       duplicate_threshold=args.duplicate_threshold, num_perm=args.num_perm,
                       shingle_size=args.shingle_size, cache_dir=args.cache_dir, workers=args.workers,
                       max_per_chain=args.max_per_chain)
    write_jsonl(args.out, result.verdicts)
    print(format_report(result.summary), file=sys.stderr)
    return 0
