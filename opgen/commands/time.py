"""`opgen time`: time every task eager and under torch.compile (CUDA events + profiler) and write TIMED.jsonl."""

from __future__ import annotations

import dataclasses
import json
import sys
import time

from opgen.checkpoint import ChunkLog, inputs_identity, run_in_chunks
from opgen.commands.device_option import add_device_option, chosen_device
from opgen.commands.limits import seconds
from opgen.commands.timing_options import add_timing_options, check_trial_counts, timing_options
from opgen.errors import UsageError
from opgen.jsonl import read_inputs, require_writable, write_jsonl


def register(sub) -> None:
    parser = sub.add_parser("time", help="time tasks eager and compiled on the GPU (or the CPU, for CI)")
    parser.add_argument("--input", required=True, help="JSONL of records with `code`, or a folder of .py tasks")
    parser.add_argument("--out", required=True, help="output JSONL: the input records plus the timing columns")
    add_device_option(parser, "where the tasks are timed")
    parser.add_argument("--timeout", type=seconds, default=600.0, help="seconds per task (default 600)")
    parser.add_argument("--workers-per-gpu", type=int, default=None,
                        help="sandbox workers per GPU; one times at a time, the others build and compile")
    add_timing_options(parser)
    parser.add_argument("--cache-dir", default=None, help="inductor/FX-graph cache folder shared by the workers")
    parser.add_argument("--limit", type=int, default=None, help="time only the first N records")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="tasks per checkpointed chunk (default 16 x all workers on cuda, 8 on cpu); a rerun resumes")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def run(args) -> int:
    from opgen.sandbox.confine import confined_on
    from opgen.sandbox.gpus import default_workers_per_gpu
    from opgen.timing.driver import time_records, timing_summary

    check_trial_counts(args)
    if args.workers_per_gpu is not None and args.workers_per_gpu < 1:
        raise UsageError("--workers-per-gpu must be >= 1")
    records = read_inputs(args.input)[: args.limit]
    require_writable(args.out, inputs=args.input)
    device, visible = chosen_device(args.device)   # before any work, once the input and output are known good
    options = timing_options(args, device)
    gpus = len(visible)
    if device == "cuda":
        # large chunks: each one ends with a short tail in which a GPU waits for the last compiles
        chunk_default = 16 * gpus * (args.workers_per_gpu or default_workers_per_gpu(gpus))
    else:
        chunk_default = 8
    chunk_size = max(8, chunk_default) if args.chunk_size is None else args.chunk_size
    if chunk_size < 1:
        raise UsageError("--chunk-size must be at least 1")
    identity = inputs_identity(records, command="time", timeout=args.timeout, chunk_size=chunk_size,
                               **dataclasses.asdict(options))

    def time_chunk(chunk: list[dict]) -> tuple[list[dict], None]:
        return time_records(chunk, options, timeout_s=args.timeout, progress=False,
                            workers_per_gpu=args.workers_per_gpu, cache_dir=args.cache_dir, reuse_pools=True,
                            confined=confined_on(options.device)), None   # tasks from elsewhere: confined workers

    started = time.perf_counter()
    chunk_log = ChunkLog(args.out, identity)
    timed, _, reused = run_in_chunks(records, chunk_size, time_chunk, chunk_log, "time", progress=not args.no_progress)
    wall_s = time.perf_counter() - started
    if reused:
        print(f"time: resumed {reused} of {len(records)} timings from {chunk_log.path}", file=sys.stderr)
    write_jsonl(args.out, timed)
    chunk_log.finish()
    summary = timing_summary(timed)
    fresh = len(timed) - reused  # the rate is of the tasks timed by this invocation
    summary.update(wall_s=round(wall_s, 2), tasks_per_min=round(60 * fresh / wall_s, 2) if wall_s else None)
    print(json.dumps({"time": summary}), file=sys.stderr)
    return 0
