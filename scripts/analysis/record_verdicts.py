"""Record the execute checks' verdicts of a candidate set, or replay recorded verdicts and list those that changed.

    python scripts/analysis/record_verdicts.py record tests/verdicts/candidates.jsonl --device cpu
    python scripts/analysis/record_verdicts.py replay RUN_DIR | STATE_FILE [--sample N] [--workers K]
    python scripts/analysis/record_verdicts.py replay --candidates FILE --verdicts FILE [--device cpu|cuda]

`record` runs every execute check (the static chain is not run) on CANDIDATES (a JSONL of records with `code`)
and writes EXPECTED (default: expected_<device>.json beside it): the settings the checks ran with and each
candidate's verdict, its reason (null when kept) and the stage that decided it. tests/test_verdicts_unchanged.py
holds the checks to the committed one.

`replay` runs recorded candidates through the execute checks again, under the settings they were recorded with (a
build's run folder or state file: its config.json and each shard's candidates and execute verdicts; or CANDIDATES
with an EXPECTED file or a build's execute.jsonl rows, joined by `id`), and prints one summary line, then each
candidate whose (reason, stage) changed, then how fast the checks ran alone (candidates a minute, worker-seconds a
candidate and their wait for the GPU's lock, beside the build's own figures for the same rows): on a GPU, what the
checks cost without timed runs closing the lock. A row whose recorded detail says it ran out of memory is skipped,
and so is a candidate that runs out now: such a verdict depends on the machine's load, not on the task. `--sample N`
replays N of the rows, every rejection first. Exit 0 every verdict the same, 1 any changed, 2 bad input or a
machine fault (one line).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tarfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from filters.execute import STAGE_NAMES  # noqa: E402
from filters.window import DEFAULT_WINDOW_MS, Window  # noqa: E402
from opgen.errors import MachineFault, UsageError  # noqa: E402
from opgen.jsonl import read_inputs, read_jsonl, require_writable  # noqa: E402
from opgen.pipeline.stages import EXECUTE_WINDOW_SLACK  # noqa: E402
from opgen.sandbox.gpus import require_cuda, visible_gpus  # noqa: E402
from opgen.sandbox.pool import is_out_of_memory  # noqa: E402
from opgen.version import __version__  # noqa: E402

DEVICES = ("cpu", "cuda")
SHARD_FILES = ("candidates.jsonl", "execute.jsonl", "execute.done")   # what a replay reads of a build's shard
NAME = "record_verdicts"


@dataclass(frozen=True)
class Settings:
    """What the execute checks ran with, besides the code: all that a verdict may depend on."""

    device: str
    seed: int = 0
    draws: int = 3
    timeout_s: float = 120.0
    memory_mb: int | None = 4096
    runtime_window_ms: tuple[float, float] | None = None

    @classmethod
    def of_build(cls, config: dict) -> Settings:
        """A build's execute stage (opgen/pipeline/stages.py): on CUDA its window widened by the execute slack."""
        device = config.get("device")
        if device not in DEVICES:
            raise UsageError(f"the build's config names no device cpu or cuda (device: {device!r})")
        window = None
        if device == "cuda":
            window = Window(*config.get("runtime_window_ms", DEFAULT_WINDOW_MS)).widened(EXECUTE_WINDOW_SLACK)
            window = (window.lo_ms, window.hi_ms)
        return cls(device, seed=int(config.get("seed", 0)), timeout_s=float(config.get("timeout_s", 120.0)),
                   memory_mb=config.get("memory_mb", 4096) or None, runtime_window_ms=window)

    @classmethod
    def of_dict(cls, data: dict) -> Settings:
        window = data.get("runtime_window_ms")
        return cls(**{**data, "runtime_window_ms": tuple(window) if window else None})


@dataclass
class Recorded:
    """Candidates with their recorded verdict rows (`id`, `reason`, `stage`, ...) and the settings behind them."""

    candidates: dict[str, dict]
    rows: list[dict]
    settings: Settings


def verdict_of(row: dict) -> tuple[str | None, str | None]:
    """A verdict as the checks' equality holds it: the reason (None when kept) and the stage that decided it."""
    return row.get("reason"), row.get("stage")


def verdict_text(verdict: tuple[str | None, str | None]) -> str:
    reason, stage = verdict
    return f"kept after {stage}" if reason is None else f"{reason} at {stage}"


def out_of_memory(row: dict) -> bool:
    """The verdict says the task ran out of memory (GPU memory, or the pool's resident limit)."""
    return bool(row.get("memory_limit")) or is_out_of_memory(row.get("detail"))


def run_checks(records: list[dict], settings: Settings, workers: int,
               checks: tuple[str, ...] = STAGE_NAMES, device_time: bool = False) -> dict[str, dict]:
    """Verdict lines of `checks` on `records` under `settings`, by candidate id (`device_time`: with each check's
    device seconds, filters/execute/device_time.py)."""
    from filters.validate import execute_verdicts

    lines = execute_verdicts(records, device=settings.device, workers=workers, timeout_s=settings.timeout_s,
                             memory_mb=settings.memory_mb, runtime_window_ms=settings.runtime_window_ms,
                             seed=settings.seed, draws=settings.draws, checks=checks, device_time=device_time)
    return {record["id"]: line for record, line in zip(records, lines)}


# recording ----------------------------------------------------------------------------------------------------

def read_candidates(path: Path) -> dict[str, dict]:
    """The records of a JSONL file by id; UsageError when two share one (a verdict is keyed by it)."""
    records = read_inputs(path)
    by_id = {record["id"]: record for record in records}
    if len(by_id) != len(records):
        raise UsageError(f"{path}: {len(records) - len(by_id)} records repeat another's id")
    return by_id


def expected_document(lines: dict[str, dict], candidates: dict[str, dict], settings: Settings) -> dict:
    """What `record` writes: the settings, what recorded them, and one verdict per candidate in input order (its
    detail's first line, for the reader only)."""
    import torch

    verdicts = []
    for task, record in candidates.items():
        line = lines[task]
        detail = (line.get("detail") or "").splitlines()[:1]
        verdicts.append({"id": task, "source": record.get("source"), "reason": line["reason"], "stage": line["stage"],
                         **({"detail": detail[0][:160]} if detail else {})})
    return {"settings": asdict(settings), "recorded_with": {"opgen": __version__, "torch": torch.__version__},
            "verdicts": verdicts}


def record(args) -> int:
    candidates = read_candidates(Path(args.candidates))
    out = Path(args.out) if args.out else Path(args.candidates).with_name(f"expected_{args.device}.json")
    require_writable(out)
    if args.device == "cuda":
        require_cuda()
    settings = Settings(args.device, timeout_s=args.timeout, runtime_window_ms=args.window_ms)
    lines = run_checks(list(candidates.values()), settings, args.workers)
    document = expected_document(lines, candidates, settings)
    out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    kept = sum(1 for v in document["verdicts"] if v["reason"] is None)
    print(f"{NAME}: {len(candidates)} verdicts on {args.device} written to {out}: {kept} kept, "
          f"{len(candidates) - kept} rejected")
    return 0


# reading what was recorded ------------------------------------------------------------------------------------

def read_expected(path: Path) -> tuple[list[dict], Settings] | None:
    """The verdicts and settings of an EXPECTED file written by `record`; None when `path` is not one."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(document, dict) or "verdicts" not in document or "settings" not in document:
        return None
    try:
        return list(document["verdicts"]), Settings.of_dict(document["settings"])
    except TypeError as error:
        raise UsageError(f"{path}: unreadable settings ({error})") from None


def recorded_from_files(candidates_path: Path, verdicts_path: Path, settings: Settings) -> Recorded:
    """CANDIDATES with an EXPECTED file (its own settings) or execute.jsonl rows (`settings`)."""
    for path in (candidates_path, verdicts_path):
        if not path.is_file():
            raise UsageError(f"not a file: {path}")
    candidates = read_candidates(candidates_path)
    expected = read_expected(verdicts_path)
    if expected is not None:
        rows, settings = expected
    else:
        rows = read_jsonl(verdicts_path)
    return Recorded(candidates, rows, settings)


def recorded_from_build(path: Path) -> Recorded:
    """A build's run folder or state file: each shard's candidates and its execute rows (once marked done)."""
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UsageError(f"{path} is not an opgen run folder (no config.json)")
        files = {p.relative_to(path).as_posix(): p.read_bytes() for p in path.glob("shards/*/*")
                 if p.name in SHARD_FILES and p.is_file()}
        config = _json_object(path / "config.json")
    elif path.is_file():
        from opgen.pipeline.state import read_state

        header, payload = read_state(path)
        config = header.get("config") or {}
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:xz") as tar:
            files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()
                     if m.isfile() and m.name.startswith("shards/") and PurePosixPath(m.name).name in SHARD_FILES}
    else:
        raise UsageError(f"not a run folder or a state file: {path}")
    candidates: dict[str, dict] = {}
    rows: list[dict] = []
    for name in sorted(files):
        shard = PurePosixPath(name).parent
        if PurePosixPath(name).name == "execute.jsonl" and f"{shard}/execute.done" in files:
            candidates.update((c["id"], c) for c in _jsonl(files.get(f"{shard}/candidates.jsonl", b""), name))
            rows += [{**row, "shard": str(shard)} for row in _jsonl(files[name], name)]
    if not rows:
        raise UsageError(f"{path} holds no finished execute verdicts")
    return Recorded(candidates, rows, Settings.of_build(config))


def _json_object(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        data = None
    if not isinstance(data, dict):
        raise UsageError(f"{path} is not a JSON object")
    return data


def _jsonl(data: bytes, name: str) -> list[dict]:
    try:
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise UsageError(f"{name}: malformed JSON line") from None


# replaying ----------------------------------------------------------------------------------------------------

def spread(items: list, count: int) -> list:
    """`count` of `items`, evenly spaced, in order."""
    if count >= len(items):
        return list(items)
    return [items[index * len(items) // count] for index in range(count)]


def replay_rows(rows: list[dict], sample: int | None) -> list[dict]:
    """The rows to replay: all, or `sample` of them, the rejections first (fewer, and each a different rule)."""
    if sample is None:
        return rows
    rejected = [index for index, row in enumerate(rows) if row.get("reason") is not None]
    kept = [index for index, row in enumerate(rows) if row.get("reason") is None]
    chosen = set(spread(rejected, sample) + spread(kept, max(0, sample - len(rejected))))
    return [row for index, row in enumerate(rows) if index in chosen]


def per_candidate(lines: list[dict]) -> tuple[float, float]:
    """Verdict lines' worker-seconds a candidate, and the seconds of them spent waiting for the GPU's lock."""
    return (sum(line.get("worker_s") or 0.0 for line in lines) / len(lines),
            sum(line.get("worker_lock_wait_s") or 0.0 for line in lines) / len(lines))


def pace_line(lines: list[dict], rows: list[dict], seconds: float, workers: int) -> str:
    """How fast the checks ran alone (no timed run closing the GPU's lock, nothing else on the machine): candidates
    a minute, and worker-seconds a candidate with their lock wait, beside what the recorded rows say they took in
    their build (where they say it)."""
    now_s, now_wait = per_candidate(lines)
    text = (f"{NAME}: the checks alone: {len(lines)} candidates in {seconds:.1f} s with {workers} workers "
            f"({60 * len(lines) / max(seconds, 1e-9):.1f} a minute); worker-seconds a candidate {now_s:.2f}, "
            f"{now_wait:.2f} of them waiting for the GPU's lock")
    timed_rows = [row for row in rows if row.get("worker_s")]
    if timed_rows:
        then_s, then_wait = per_candidate(timed_rows)
        text += f" (recorded: {then_s:.2f}, {then_wait:.2f})"
    return text


def compare(recorded: Recorded, workers: int, sample: int | None = None) -> tuple[str, list[str], str | None]:
    """The summary line, one line per candidate whose verdict changed, and how fast the checks ran (`pace_line`;
    None when none ran)."""
    for row in recorded.rows:
        if not isinstance(row, dict) or "id" not in row or "stage" not in row:
            raise UsageError("a recorded verdict row lacks `id` or `stage`")
    skipped = [row for row in recorded.rows if out_of_memory(row)]
    rows = replay_rows([row for row in recorded.rows if not out_of_memory(row)], sample)
    missing = sorted({row["id"] for row in rows} - set(recorded.candidates))
    if missing:
        raise UsageError(f"{len(missing)} recorded verdicts name no candidate (e.g. {missing[0]})")
    records = list({row["id"]: recorded.candidates[row["id"]] for row in rows}.values())
    started = time.perf_counter()
    now = run_checks(records, recorded.settings, workers) if records else {}
    seconds = time.perf_counter() - started
    changed, short_now = [], 0
    for row in rows:
        line = now[row["id"]]
        if out_of_memory(line):
            short_now += 1
        elif verdict_of(line) != verdict_of(row):
            where = ", ".join(str(place) for place in (row.get("shard"), row.get("source"))
                              if place and place != row["id"])
            detail = (line.get("detail") or "").splitlines()[:1]
            changed.append(f"changed: {row['id']}{f' ({where})' if where else ''}: recorded "
                           f"{verdict_text(verdict_of(row))}, now {verdict_text(verdict_of(line))}"
                           + (f": {detail[0][:200]}" if detail else ""))
    summary = (f"{NAME}: {len(recorded.rows)} recorded verdicts, {len(skipped)} skipped (out of memory when recorded), "
               f"{len(rows)} replayed on {recorded.settings.device}: {len(rows) - len(changed) - short_now} the same, "
               f"{len(changed)} changed" + (f", {short_now} out of memory now (not compared)" if short_now else ""))
    pace = pace_line(list(now.values()), rows, seconds, workers) if now else None
    return summary, changed, pace


def replay(args) -> int:
    if args.sample is not None and args.sample < 1:
        raise UsageError("--sample must be at least 1")
    if args.run and (args.candidates or args.verdicts):
        raise UsageError("give a run folder or state file, or --candidates with --verdicts, not both")
    if args.run:
        recorded = recorded_from_build(Path(args.run))
    elif args.candidates and args.verdicts:
        recorded = recorded_from_files(Path(args.candidates), Path(args.verdicts), settings_of_options(args))
    else:
        raise UsageError("replay needs a run folder or state file, or --candidates with --verdicts")
    if args.device and args.device != recorded.settings.device:
        raise UsageError(f"the verdicts were recorded on {recorded.settings.device}: replay them there, "
                         f"not on {args.device}")
    if recorded.settings.device == "cuda" and not visible_gpus():
        raise UsageError("the verdicts were recorded on cuda and no CUDA device is visible here: replay them on a "
                         "GPU machine")
    summary, changed, pace = compare(recorded, args.workers or default_workers(recorded.settings.device), args.sample)
    print(summary)
    for line in changed:
        print(f"  {line}")
    if pace:
        print(pace)
    return 1 if changed else 0


def settings_of_options(args) -> Settings:
    """The settings execute.jsonl rows were recorded with, from the options: a build's on that device (on CUDA its
    execute window), unless --window-ms names the window."""
    device = args.device or "cpu"
    if args.window_ms is None:
        return Settings.of_build({"device": device, "seed": args.seed})
    return Settings(device, seed=args.seed, runtime_window_ms=args.window_ms)


def default_workers(device: str) -> int:
    """As a build sizes its sandbox workers (2 on the CPU; on CUDA the GPUs' share of the cores)."""
    from opgen.sandbox.machine_sizing import size_for_machine

    return size_for_machine(device, len(visible_gpus()) if device == "cuda" else 0, None, None, None).workers


def window_option(text: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"LO,HI in ms, got {text!r}") from None
    if not 0 <= low < high:
        raise argparse.ArgumentTypeError(f"needs 0 <= LO < HI, got {text!r}")
    return low, high


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=NAME, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run the execute checks on a candidate set and write its expected verdicts")
    rec.add_argument("candidates", help="a JSONL of records with `code` (and a unique `id`)")
    rec.add_argument("--device", choices=DEVICES, required=True)
    rec.add_argument("--out", help="the expected verdicts (default: expected_<device>.json beside the candidates)")
    rec.add_argument("--workers", type=int, default=2, help="sandbox workers (default 2)")
    rec.add_argument("--timeout", type=float, default=120.0, help="seconds per candidate (default 120)")
    rec.add_argument("--window-ms", type=window_option, metavar="LO,HI",
                     help="the runtime check's window (default none on the CPU, 1,100 on CUDA)")
    rec.set_defaults(func=record)
    rep = sub.add_parser("replay", help="judge recorded candidates again; list the verdicts that changed")
    rep.add_argument("run", nargs="?", help="a build's run folder or state file (--save-state)")
    rep.add_argument("--candidates", help="a JSONL of records with `code` and `id`")
    rep.add_argument("--verdicts", help="an expected file written by `record`, or execute.jsonl rows")
    rep.add_argument("--device", choices=DEVICES,
                     help="where execute.jsonl rows were recorded (default cpu); else a check of the recording's")
    rep.add_argument("--seed", type=int, default=0, help="the seed execute.jsonl rows were recorded with (default 0)")
    rep.add_argument("--window-ms", type=window_option, metavar="LO,HI",
                     help="the window execute.jsonl rows were recorded with (default a build's execute window: "
                          "none on the CPU, 0.5,200 on CUDA)")
    rep.add_argument("--sample", type=int, help="replay this many rows, every rejection first")
    rep.add_argument("--workers", type=int, help="sandbox workers (default: as a build sizes them)")
    rep.set_defaults(func=replay)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        if getattr(args, "workers", None) is not None and args.workers < 1:
            raise UsageError("--workers must be at least 1")
        return args.func(args)
    except (UsageError, MachineFault) as error:
        print(f"{NAME}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
