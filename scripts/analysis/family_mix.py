"""The family figures of a task set (`opgen audit DATASET --families`, opgen/analysis/families.py), also for a JSONL
of candidates and, with --verdicts, the candidates a dedup run kept.

    python scripts/analysis/family_mix.py data/fam60                  # a run folder (tasks.parquet) ...
    python scripts/analysis/family_mix.py data/opgen-ops-6k           # ... a published folder ...
    python scripts/analysis/family_mix.py data/dev/gpu6000.jsonl      # ... or a JSONL of candidates (opgen sample)
    python scripts/analysis/family_mix.py data/dev/gpu6000.jsonl --verdicts data/dev/dedup6000.jsonl   # its dedup survivors
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.analysis.families import family_report  # noqa: E402
from opgen.analysis.rows import read_task_rows  # noqa: E402
from opgen.jsonl import read_jsonl  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input", type=Path, help="run folder, published folder, tasks parquet, or candidates JSONL")
    parser.add_argument("--reference", default=None, help="KernelBench (default: the README's rule, as every command)")
    parser.add_argument("--verdicts", type=Path, default=None, help="dedup verdicts: report the kept rows only")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--composition-prior", default=None, help="prior file (default: the shipped one)")
    args = parser.parse_args()
    rows = read_task_rows(args.input)
    title = str(args.input)
    if args.verdicts is not None:
        lines = read_jsonl(args.verdicts)  # one per input, in input order
        rows = [row for row, line in zip(rows, lines, strict=True) if line.get("keep")]
        title += f" (kept by {args.verdicts})"
    print(family_report(rows, args.reference, title, args.top, args.composition_prior))


if __name__ == "__main__":
    main()
