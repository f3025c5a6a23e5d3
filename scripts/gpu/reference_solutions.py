"""Write the reference solution (the task's own code, `Model` renamed `ModelNew`) of N tasks of a dataset, one
`<id>.py` per task, for `opgen grade --solutions`: graded against itself, its median speed-up says whether the grader
times solution and baseline alike (scripts/gpu/grade.sh).

    python scripts/gpu/reference_solutions.py DATASET OUT_DIR [--n 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.grading.tasks import dataset_rows, reference_solution  # noqa: E402
from opgen.pipeline.check import draw_rows  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", help="a published folder, a Hub id or a JSONL file of records")
    parser.add_argument("out", help="the folder the solutions are written to")
    parser.add_argument("--n", type=int, default=100, help="tasks drawn at random (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = draw_rows(dataset_rows(args.dataset), args.n or None, args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for row in rows:
        (out / f"{row['id']}.py").write_text(reference_solution(row["code"]), encoding="utf-8")
    print(f"{len(rows)} reference solutions in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
