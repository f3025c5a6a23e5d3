"""`opgen audit` at the path docs/benchmarks.md records: a dataset's card claims checked from its rows.

    python scripts/analysis/card_claims.py data/opgen-ops-6k --n 6000 [--seed 0] [--json OUT.json]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["audit", *sys.argv[1:]]))
