"""Audit a published folder or a run's tasks for the grader-proof rules: tasks whose output accepts all zeros, a
constant or another draw's output on at least a share of its values, and same-shape twins (the same family chain
on the same input shapes), with the parameters that tell each pair apart (opgen/analysis/grader_proof.py).

    python scripts/analysis/grader_proof_audit.py RUN/tasks.parquet [--share 0.99]
    python scripts/analysis/grader_proof_audit.py data/opgen-ops-6k         # a published folder
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.analysis.grader_proof import audit  # noqa: E402
from opgen.analysis.rows import read_task_rows  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="a run folder, a tasks.parquet, or a published folder (its default config)")
    parser.add_argument("--share", type=float, default=0.99)
    args = parser.parse_args()
    report = audit(read_task_rows(args.path), args.share)
    print(f"{report['tasks']} tasks; highest accepted share {report['max_share']:.3f}; "
          f"{len(report['over_share'])} at or above {args.share}: {report['over_share']}")
    print(f"{len(report['twins'])} pairs with the same family chain and the same input shapes")
    for a, b, diff in report["twins"]:
        print(f"  {a} {b}: {diff or 'no parameter differs'}")
    print(f"{len(report['near'])} further pairs with the same family chain and every input dimension within 2x")
    for a, b, diff in report["near"]:
        print(f"  {a} {b}: {diff}")


if __name__ == "__main__":
    main()
