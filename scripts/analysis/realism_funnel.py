"""`opgen profile --realism` at the path docs/benchmarks.md records: the share of real-model family pairs among
a build's candidates, by fate (opgen/analysis/realism.py).

    python scripts/analysis/realism_funnel.py RUN_DIR|STATE [--composition-prior PRIOR.json] [--json OUT.json]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["profile", "--realism", *sys.argv[1:]]))
