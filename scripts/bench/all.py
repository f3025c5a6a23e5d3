"""`make bench`: runs every benchmark script in its own process and prints their figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPTS = ("sample.py", "dedup.py", "validate.py", "timing.py", "build.py")


def main() -> int:
    here = Path(__file__).parent
    failed = 0
    for name in SCRIPTS:
        script = here / name
        if not script.exists():
            continue
        print(f"\n== {name} ==", flush=True)
        result = subprocess.run([sys.executable, str(script)], cwd=here.parents[1])
        failed += result.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
