"""Whether a build that moved between machines redid any finished stage: its state files in the order they were
saved, each later one checked to hold every stage the earlier one had finished, byte for byte and with the same
time of finishing (a stage done again would be written anew).

    python scripts/analysis/state_continuity.py RUN1.state RUN2.state ... [--json OUT.json]

Prints, per state, its markers, the stages it finished that the previous one lacked, and any stage of the previous
one that it lost or holds changed; exit 1 when any finished stage was lost or redone. A stage finished after a
machine's last save and lost with that machine is done again on the next one: that is not a redo of a saved stage,
and shows as new work in the next state.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.errors import UsageError  # noqa: E402
from opgen.jsonl import require_writable  # noqa: E402
from opgen.pipeline.state import CLOCK_MEMBER, read_state  # noqa: E402

CONFIG_MEMBER = "config.json"


def finished_files(file: Path) -> dict[str, tuple[str, int]]:
    """Every member of a state but the clock: name -> (sha256 of its bytes, its modification time; 0 for the
    config)."""
    _, payload = read_state(file)
    files = {}
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:xz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name != CLOCK_MEMBER:
                data = tar.extractfile(member).read()
                # config.json is written again by each machine that claims the folder: its bytes must stay
                mtime = 0 if member.name == CONFIG_MEMBER else int(member.mtime)
                files[member.name] = (hashlib.sha256(data).hexdigest(), mtime)
    return files


def continuity(states: list[Path]) -> list[dict]:
    """Per state after the first: markers, new stages, and the previous state's files it lost or holds changed."""
    report = []
    previous: dict[str, tuple[str, int]] | None = None
    for file in states:
        files = finished_files(file)
        entry = {"state": str(file), "markers": sum(name.endswith(".done") for name in files)}
        if previous is not None:
            entry["new_stages"] = sum(name.endswith(".done") and name not in previous for name in files)
            entry["lost"] = sorted(name for name in previous if name not in files)
            entry["changed"] = sorted(name for name in previous if name in files and files[name] != previous[name])
        report.append(entry)
        previous = files
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("states", nargs="+", type=Path, help="state files of one build, oldest first")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args(argv)
    try:
        if args.json is not None:
            require_writable(args.json, "--json")
        report = continuity(args.states)
    except UsageError as error:
        print(f"state_continuity: error: {error}", file=sys.stderr)
        return 2
    broken = False
    for entry in report:
        line = f"{entry['state']}: {entry['markers']:,} finished stages"
        if "new_stages" in entry:
            line += f", {entry['new_stages']:,} new; {len(entry['lost'])} lost, {len(entry['changed'])} changed"
            broken |= bool(entry["lost"] or entry["changed"])
            for name in [*entry["lost"], *entry["changed"]][:20]:
                line += f"\n  {name}"
        print(line)
    print("no finished stage lost or redone" if not broken else "finished stages were lost or redone")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
