"""The dataset of a build under way, from its state file, without a GPU: the tasks finished so far as a run folder
and a published folder (what `opgen publish --dry-run` writes), and each data_source's progress to its quota.

    python scripts/analysis/state_preview.py .devstate/opgen-ops-6k.state --out /tmp/preview
    python scripts/analysis/grader_proof_audit.py /tmp/preview/dataset      # then audit what is there so far
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.errors import UsageError  # noqa: E402
from opgen.pipeline.build import pending_repairs  # noqa: E402
from opgen.pipeline.preview import preview_state  # noqa: E402
from opgen.pipeline.rundir import RunDir  # noqa: E402
from opgen.publish.folder import write_dataset_folder  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("state", help="a state file saved by opgen build --save-state")
    parser.add_argument("--out", required=True, help="a folder: the run goes to OUT/run, the dataset to OUT/dataset")
    parser.add_argument("--repo-id", default="opgen/preview", help="the Hub id the card names")
    args = parser.parse_args(argv)
    out = Path(args.out)
    try:
        result, progress = preview_state(args.state, out / "run")
        folder, rows = write_dataset_folder(out / "run", args.repo_id, out / "dataset")
    except UsageError as error:
        print(f"state_preview: error: {error}", file=sys.stderr)
        return 2
    print(f"{result.tasks} of {result.wanted} tasks so far; dataset folder {folder} ({rows} rows)")
    print("| data_source | shards planned | executed | finished | tasks | quota |")
    print("|---|---:|---:|---:|---:|---:|")
    for source, counts in progress.items():
        print(f"| {source} | {counts['planned']} | {counts['executed']} | {counts['finished']} | {counts['tasks']} | "
              f"{counts['quota']} |")
    run = RunDir(out / "run")
    if json.loads(run.config_path.read_text(encoding="utf-8")).get("device") == "cuda":
        rows, shards = pending_repairs(run)
        print(f"timing repairs pending: {rows} row(s) in {shards} shard(s), timed again by the next resumed call "
              "(the run log's `timing guard over earlier shards`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
