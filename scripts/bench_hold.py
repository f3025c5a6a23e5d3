"""Benchmark of holding back surplus shards: the same small CPU-timed build with and without `Build._held`.

Each build runs in its own process (fresh kept pools), alternating the two modes. Prints per build the wall
seconds, the candidates the execute checks saw (`sandbox` seen), those timed, the surplus and the shards held,
skipped and stopped. Usage: python scripts/bench_hold.py [--n 12] [--seed 0] [--shard-size 2] [--workers 4]
[--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KERNELBENCH = REPO.parent / "shared" / "kernelbench" / "problems.jsonl"

ONE_BUILD = """
import json, sys
from opgen.pipeline.build import Build, BuildConfig, run_build
from opgen.pipeline.executors import LocalExecutor
run, n, seed, shard_size, workers, mode, reference = sys.argv[1:8]
if mode == "nohold":
    Build._held = lambda self: set()
config = BuildConfig(n=int(n), seed=int(seed), shard_size=int(shard_size), cpu_timing=True, trials=3, warmups=0,
                     reference=reference)
executor = LocalExecutor(int(workers))
try:
    stats = run_build(config, run, executor, progress=False).stats
finally:
    executor.close()
stages = stats["funnel"]["stages"]
print(json.dumps({"mode": mode, "wall_s": stats["throughput"]["wall_s"], "tasks": stats["tasks"],
                  "executed": stages["sandbox"]["seen"], "timed": stages.get("runtime_window", {}).get("seen"),
                  "surplus": stats["surplus"], "held": stats["held_shards"], "skipped": stats["skipped_shards"],
                  "stopped": stats["stopped_shards"]}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--shard-size", type=int, default=2)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--reference", default=str(KERNELBENCH))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="opgen-bench-hold-") as folder:
        for round_index in range(args.repeat):
            for mode in ("hold", "nohold"):
                run = Path(folder) / f"{mode}{round_index}"
                done = subprocess.run([sys.executable, "-c", ONE_BUILD, str(run), str(args.n), str(args.seed),
                                       str(args.shard_size), str(args.workers), mode, args.reference],
                                      cwd=REPO, capture_output=True, text=True)
                if done.returncode != 0:
                    print(done.stderr[-2000:], file=sys.stderr)
                    return 1
                print(json.dumps(json.loads(done.stdout.strip().splitlines()[-1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
