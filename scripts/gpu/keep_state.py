"""Keep the build state a GPU call brought back: copy FOLDER/NAME.state (and its parts) over builds/NAME/NAME.state
only when it is whole and holds at least as many finished stages, so that a call which resumed an older state (a
machine the lender did not keep, started from a state not yet copied) never overwrites a newer one.

    python scripts/gpu/keep_state.py FILES_AT [--name opgen-ops-6k] [--into builds/opgen-ops-6k]

Exit 0: kept (or the same); 1: refused, the state there is newer (nothing changed); 2: no whole state in FOLDER.
Then commit builds/NAME, before the next call: a fresh machine resumes what the working tree carries.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from opgen.errors import UsageError  # noqa: E402
from opgen.pipeline.state import part_path, read_state  # noqa: E402


def state_files(file: Path) -> list[Path]:
    """The state `file` and its parts (FILE.<sha12>.<n>) beside it."""
    pattern = re.compile(re.escape(file.name) + r"\.[0-9a-f]{12}\.\d+")
    return [file, *sorted(p for p in file.parent.glob(f"{file.name}.*.*") if pattern.fullmatch(p.name))]


def finished_stages(file: Path) -> int | None:
    """The finished stages (markers) the whole state at `file` holds; None when there is none, or it is not whole."""
    if not file.is_file():
        return None
    try:
        return int(read_state(file)[0]["markers"])
    except UsageError:
        return None


def keep(brought: Path, kept: Path) -> tuple[int, str]:
    """Copy the state `brought` over `kept` when it is whole and no older: (exit status, the line that says so)."""
    try:
        header = read_state(brought)[0]
    except UsageError as error:
        return 2, f"keep_state: {error}"
    new = int(header["markers"])
    old = finished_stages(kept)
    if old is not None and new < old:
        return 1, (f"keep_state: refused: {brought} holds {new} finished stages, {kept} holds {old}; "
                   f"{kept} is left as it is")
    kept.parent.mkdir(parents=True, exist_ok=True)
    old_parts = state_files(kept)[1:]
    # the parts its header names (a folder may hold an older save's too)
    numbers = range(1, int(header["parts"]))
    parts = [part_path(brought, header["payload_sha256"], number) for number in numbers]
    new_parts = [part_path(kept, header["payload_sha256"], number) for number in numbers]
    for source, target in [*zip(parts, new_parts), (brought, kept)]:   # the file that names the parts last
        partial = target.with_name(target.name + ".tmp")
        shutil.copyfile(source, partial)
        partial.chmod(0o644)
        os.replace(partial, target)
    for stale in set(old_parts) - set(new_parts):
        stale.unlink(missing_ok=True)
    if finished_stages(kept) != new:
        return 2, f"keep_state: the copy at {kept} does not read back whole: copy it again"
    was = "none" if old is None else str(old)
    return 0, f"keep_state: kept {brought}: {new} finished stages (was {was}) in {kept}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="where the call's files were brought back (the device reply's files_at)")
    parser.add_argument("--name", default="opgen-ops-6k", help="the build's name (its state is NAME.state)")
    parser.add_argument("--into", help="the folder of the committed state (default builds/NAME)")
    args = parser.parse_args(argv)
    into = Path(args.into or f"builds/{args.name}")
    status, line = keep(Path(args.folder) / f"{args.name}.state", into / f"{args.name}.state")
    print(line, file=sys.stdout if status == 0 else sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
