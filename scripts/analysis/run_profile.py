"""`opgen profile` at the path docs/benchmarks.md records: where a build's time went (opgen/analysis/run_profile.py).

    python scripts/analysis/run_profile.py RUN_DIR|STATE [--compare OTHER] [--since EARLIER] [--json OUT.json]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["profile", *sys.argv[1:]]))
