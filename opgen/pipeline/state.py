"""A build's state as a small, self-checking archive that moves it between machines (`opgen build --save-state FILE`,
`--resume-from FILE`).

What a build needs to continue is its run folder's finished work: config.json, each round's plan.json and marked
outputs (dedup, survivors), each shard's marked stage outputs (candidates and static verdicts, execute verdicts,
timed records and window verdicts), and the wall clock (logs/clock.json). The survival prior's updates and the
stats are computed from those again. Files of a stage with no marker (in flight when the run was killed), the logs
and the final outputs (rewritten from the markers at the end) stay behind.

FILE is one header line (JSON: format, opgen version, the build's config, the payload's size and sha256, its parts)
and then the payload, an xz-compressed tar of those files. A payload larger than PART_BYTES goes on in
FILE.<sha12>.1, FILE.<sha12>.2, ... (every file at most 16 MiB). A save writes the parts, then replaces FILE
atomically, then removes the parts of earlier saves: a kill during a save leaves the previous state whole.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from opgen.errors import UsageError
from opgen.pipeline.rundir import RunDir, write_json
from opgen.version import __version__

FORMAT = "opgen-build-state/1"
MAX_FILE_BYTES = 16 * 2**20
CLOCK_MEMBER = "logs/clock.json"   # the one member rewritten as the build goes
HEADER_MAX_BYTES = 64 * 2**10
PART_BYTES = MAX_FILE_BYTES - HEADER_MAX_BYTES   # payload bytes in FILE and in each further part
# xz preset 1: on 2,000 candidates' JSONL (4.2 MiB) 0.37 MiB in 0.18 s, against preset 6's 0.24 MiB in 1.9 s; a save
# holds up the build's driver, so the fast one
XZ_PRESET = 1
# a stage marker -> the data files it vouches for, beside it
STAGE_FILES = {"static": ("candidates.jsonl", "static.jsonl"), "execute": ("execute.jsonl",),
               "timing": ("timed.jsonl", "timing.jsonl"), "dedup": ("dedup.jsonl",), "round": ("survivors.jsonl",)}
MEMBER = re.compile(r"^(config\.json|logs/clock\.json|rounds/\d{3}/plan\.json|"
                    r"(rounds/\d{3}|shards/\d{5})/(" + "|".join(STAGE_FILES) + r")\.done|"
                    r"(rounds/\d{3}|shards/\d{5})/[a-z]+\.jsonl)$")


def part_path(file: Path, sha: str, number: int) -> Path:
    """Part `number` (from 1) of the state `file` whose payload has digest `sha`."""
    return file.with_name(f"{file.name}.{sha[:12]}.{number}")


def state_members(root: Path) -> list[str]:
    """The run folder's files a resume needs (relative paths, sorted; each stage's data before its marker)."""
    members = ["config.json"]
    if (root / CLOCK_MEMBER).is_file():
        members.append(CLOCK_MEMBER)
    members += sorted(p.relative_to(root).as_posix() for p in root.glob("rounds/*/plan.json"))
    for marker in sorted([*root.glob("rounds/*/*.done"), *root.glob("shards/*/*.done")]):
        stage = marker.name.removesuffix(".done")
        if stage not in STAGE_FILES:
            continue
        data = [marker.with_name(name) for name in STAGE_FILES[stage]]
        members += [p.relative_to(root).as_posix() for p in data if p.is_file()]
        members.append(marker.relative_to(root).as_posix())
    return members


def save_state(run_dir: str | Path, file: str | Path) -> dict:
    """Write the state of the build in `run_dir` to `file` (and parts); returns its summary: bytes, parts, markers."""
    return write_state(snapshot_state(run_dir), file)


@dataclass(frozen=True)
class Snapshot:
    """The run folder's files a state holds, read at one moment: (name, bytes, mtime) each, and the config."""

    files: list[tuple[str, bytes, int]]
    config: dict


def snapshot_state(run_dir: str | Path, kept: dict[str, tuple[bytes, int, tuple]] | None = None) -> Snapshot:
    """Read what a save needs from the run folder: the driver does this, and the slow part, `write_state`'s
    compression, can then run beside the build. `kept` (name -> bytes, mtime, the file's identity), filled as it
    goes, spares reading a file again at the next save while its identity (inode, size, mtime in ns) is unchanged:
    most members never change once their marker is written (2.2 s in the driver a save for 1,780 markers on an
    H200's host when read afresh each time), but a repair rewrites a timed shard's rows and marker, and the round
    that holds it closes again; those are read afresh."""
    root = Path(run_dir)
    kept = {} if kept is None else kept
    files = []
    for name in state_members(root):
        stat = (root / name).stat()
        identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        if name not in kept or kept[name][2] != identity or name == CLOCK_MEMBER:
            kept[name] = ((root / name).read_bytes(), int(stat.st_mtime), identity)
        data, mtime, _ = kept[name]
        files.append((name, data, mtime))
    return Snapshot(files, json.loads(kept["config.json"][0]))


def write_state(snapshot: Snapshot, file: str | Path) -> dict:
    """Compress `snapshot` into `file` (and parts); returns its summary: bytes, parts, markers, files."""
    file = Path(file)
    members = [name for name, _, _ in snapshot.files]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz", preset=XZ_PRESET) as tar:
        for name, data, mtime in snapshot.files:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), mtime, 0o644
            tar.addfile(info, io.BytesIO(data))
    payload = buffer.getvalue()
    sha = hashlib.sha256(payload).hexdigest()
    chunks = [payload[i:i + PART_BYTES] for i in range(0, len(payload), PART_BYTES)] or [b""]
    header = {"format": FORMAT, "opgen_version": __version__,
              "config": snapshot.config,
              "payload_bytes": len(payload), "payload_sha256": sha, "parts": len(chunks),
              "files": len(members), "markers": sum(1 for m in members if m.endswith(".done")),
              "saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    line = (json.dumps(header, sort_keys=True) + "\n").encode()
    if len(line) > HEADER_MAX_BYTES:
        raise UsageError(f"cannot save the build state: its header is {len(line)} bytes (config too large)")
    file.parent.mkdir(parents=True, exist_ok=True)
    for number, chunk in enumerate(chunks[1:], start=1):
        _write_atomically(part_path(file, sha, number), chunk)
    _write_atomically(file, line + chunks[0])
    keep = {part_path(file, sha, n).name for n in range(1, len(chunks))}
    for stale in file.parent.glob(f"{file.name}.*.*"):
        if stale.name not in keep and re.fullmatch(re.escape(file.name) + r"\.[0-9a-f]{12}\.\d+", stale.name):
            stale.unlink(missing_ok=True)
    return {"bytes": len(line) + len(payload), "parts": len(chunks), "markers": header["markers"],
            "files": len(members), "largest_file_bytes": len(line) + len(chunks[0])}


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def read_state(file: str | Path) -> tuple[dict, bytes]:
    """The header and the verified payload of the state at `file`; UsageError (one line) when it is not whole."""
    file = Path(file)
    try:
        raw = file.read_bytes()
    except OSError as error:
        raise UsageError(f"cannot read the build state {file}: {error.strerror or error}") from None
    newline = raw.find(b"\n")
    try:
        header = json.loads(raw[:newline]) if newline > 0 else None
    except (json.JSONDecodeError, UnicodeDecodeError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise UsageError(f"{file} is not an opgen build state (saved by opgen build --save-state)")
    sha = str(header.get("payload_sha256", ""))
    chunks = [raw[newline + 1:]]
    for number in range(1, int(header.get("parts", 1))):
        part = part_path(file, sha, number)
        if not part.is_file():
            raise UsageError(f"the build state {file} is incomplete: its part {part.name} is missing")
        chunks.append(part.read_bytes())
    payload = b"".join(chunks)
    if len(payload) != header.get("payload_bytes") or hashlib.sha256(payload).hexdigest() != sha:
        raise UsageError(f"the build state {file} is corrupt (its checksum does not match): save it again")
    return header, payload


def check_version(header: dict, file: str | Path) -> None:
    if header.get("opgen_version") != __version__:
        raise UsageError(f"the build state {file} was saved by opgen {header.get('opgen_version')}, this is opgen "
                         f"{__version__}: continue it with the same version")


def restore_state(file: str | Path, rundir: RunDir, identity: dict | None) -> int:
    """Restore the state at `file` into `rundir` (empty, or the same build's): every finished stage the folder
    lacks, data before marker; returns how many stages it restored. `identity` None: under the config the state
    was saved with (to read a build on any machine; `rundir`'s config.json then holds it). Refused in one line
    (UsageError) when the state is not whole, was saved by another opgen version or for another config, or
    disagrees with the folder."""
    header, payload = read_state(file)
    check_version(header, file)
    stored = header.get("config")
    identity = stored if identity is None else identity
    if stored != identity:
        changed = sorted(k for k in set(stored or {}) | set(identity) if (stored or {}).get(k) != identity.get(k))
        raise UsageError(f"the build state {file} is of another config (differs in: {', '.join(changed)}); "
                         "rerun with the same options")
    rundir.claim(identity)
    root = rundir.root
    restored = 0
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:xz") as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile() and MEMBER.match(m.name)}

        def data(name: str) -> bytes:
            return tar.extractfile(members[name]).read()

        for name in sorted(n for n in members if n.endswith("plan.json")):
            local = root / name
            if local.is_file() and json.loads(local.read_bytes()) != json.loads(data(name)):
                raise UsageError(f"{root} and the build state {file} disagree on {name}: continue from an empty --out")
        for name in sorted(n for n in members if n.endswith("plan.json")):
            if not (root / name).is_file():
                _restore(root / name, data(name), members[name].mtime)
        for name in sorted(n for n in members if n.endswith(".done")):
            marker = root / name
            if marker.is_file():
                continue
            folder = Path(name).parent
            for data_name in STAGE_FILES[marker.name.removesuffix(".done")]:
                member = (folder / data_name).as_posix()
                if member in members:
                    _restore(root / member, data(member), members[member].mtime)
            _restore(marker, data(name), members[name].mtime)
            restored += 1
        if "logs/clock.json" in members:
            clock = root / "logs" / "clock.json"
            spans = json.loads(clock.read_text(encoding="utf-8")) if clock.is_file() else []
            merged = sorted({tuple(span) for span in [*spans, *json.loads(data("logs/clock.json"))]})
            write_json(clock, [list(span) for span in merged])
    return restored


def _restore(path: Path, data: bytes, mtime: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomically(path, data)
    os.utime(path, (mtime, mtime))
