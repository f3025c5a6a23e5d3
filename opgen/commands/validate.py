"""`opgen validate`: static and sandboxed execute filters over a JSONL of records or a folder of .py tasks."""

from __future__ import annotations

import json
import sys

from opgen.checkpoint import ChunkLog, inputs_identity, run_in_chunks
from opgen.commands.device_option import add_device_option, chosen_device
from opgen.commands.limits import megabytes, seconds
from opgen.errors import UsageError
from opgen.jsonl import read_inputs, require_writable, write_jsonl


def register(sub) -> None:
    parser = sub.add_parser("validate", help="run the static and sandboxed execute filters; one verdict per input")
    parser.add_argument("--input", required=True, help="JSONL of records (with `code`) or a folder of .py tasks")
    parser.add_argument("--out", required=True, help="verdicts JSONL, one line per input, in input order")
    add_device_option(parser, "where the tasks run; cuda also applies the 1-100 ms window")
    parser.add_argument("--workers", type=int, default=2, help="sandbox worker processes (default 2)")
    parser.add_argument("--timeout", type=seconds, default=120.0, help="wall-clock seconds per task (default 120)")
    parser.add_argument("--memory-mb", type=megabytes, default=4096,
                        help="resident memory limit per worker in MB; 0 for none (default 4096)")
    parser.add_argument("--runtime-window", default=None, metavar="LO,HI",
                        help="eager median window in ms (default 1,100 on cuda, off on cpu)")
    parser.add_argument("--funnel", default=None, help="also write the funnel counts as JSON here")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model build and input draws")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="inputs per checkpointed chunk (default 8 x workers, at least 16); a rerun resumes")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def parse_window(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"--runtime-window must be LO,HI in ms, got {text!r}") from None
    if not 0 <= low < high:
        raise UsageError(f"--runtime-window needs 0 <= LO < HI, got {text!r}")
    return low, high


def run(args) -> int:
    from filters.base import Funnel
    from filters.validate import VALIDATION_STAGES, validate_records
    from opgen.sandbox.confine import confined_on
    from opgen.sandbox.faults import ErrorRun

    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    window = parse_window(args.runtime_window)
    records = read_inputs(args.input)
    require_writable(args.out, inputs=args.input)
    if args.funnel:
        require_writable(args.funnel, "--funnel")
    device, _ = chosen_device(args.device)   # the machine once the input and outputs are known good
    chunk_size = max(16, 8 * args.workers) if args.chunk_size is None else args.chunk_size
    if chunk_size < 1:
        raise UsageError("--chunk-size must be at least 1")
    identity = inputs_identity(records, command="validate", device=device, timeout=args.timeout,
                               memory_mb=args.memory_mb, window=window, seed=args.seed, chunk_size=chunk_size)

    faults = ErrorRun()   # a run of identical machine errors is counted across chunks

    def validate_chunk(chunk: list[dict]) -> tuple[list[dict], dict]:
        chunk_funnel = Funnel()
        lines = validate_records(chunk, device=device, workers=args.workers, timeout_s=args.timeout,
                                 memory_mb=args.memory_mb or None, runtime_window_ms=window, funnel=chunk_funnel,
                                 seed=args.seed, reuse_pool=True, faults=faults,
                                 confined=confined_on(device))   # tasks from elsewhere: confined workers
        return lines, chunk_funnel.to_dict()

    chunk_log = ChunkLog(args.out, identity)
    lines, funnels, reused = run_in_chunks(records, chunk_size, validate_chunk, chunk_log, "validate",
                                           progress=not args.no_progress)
    if reused:
        print(f"validate: resumed {reused} of {len(records)} verdicts from {chunk_log.path}", file=sys.stderr)
    funnel = Funnel()
    funnel.declare(VALIDATION_STAGES)  # chain order in the table
    for chunk_funnel in funnels:
        funnel += Funnel.from_dict(chunk_funnel)
    write_jsonl(args.out, lines)
    chunk_log.finish()
    if args.funnel:
        with open(args.funnel, "w", encoding="utf-8") as handle:
            json.dump(funnel.to_dict(), handle, indent=2)
    print(funnel.table(), file=sys.stderr)
    kept = sum(line["keep"] for line in lines)
    print(f"validate: {kept} of {len(lines)} kept -> {args.out}", file=sys.stderr)
    return 0
