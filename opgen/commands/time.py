"""`opgen time`: time every task eager and under torch.compile (CUDA events + profiler) and write TIMED.jsonl."""

from __future__ import annotations

import json
import sys
import time

from opgen.checkpoint import ChunkLog, inputs_identity, run_in_chunks
from opgen.errors import UsageError
from opgen.jsonl import read_inputs, write_jsonl


def register(sub) -> None:
    parser = sub.add_parser("time", help="time tasks eager and compiled on the GPU (or the CPU, for CI)")
    parser.add_argument("--input", required=True, help="JSONL of records with `code`, or a folder of .py tasks")
    parser.add_argument("--out", required=True, help="output JSONL: the input records plus the timing columns")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--trials", type=int, default=100, help="timed trials per method (default 100)")
    parser.add_argument("--warmups", type=int, default=10, help="warm-up calls before the trials (default 10)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per task (default 600)")
    parser.add_argument("--workers-per-gpu", type=int, default=None,
                        help="sandbox workers per GPU; one times at a time, the others build and compile")
    parser.add_argument("--seed", type=int, default=0, help="torch seed for weights and inputs (default 0)")
    parser.add_argument("--tf32", action="store_true", help="allow TF32 in matmul and cuDNN (default off)")
    parser.add_argument("--no-compile", action="store_true", help="time eager only")
    parser.add_argument("--cache-dir", default=None, help="inductor/FX-graph cache folder shared by the workers")
    parser.add_argument("--limit", type=int, default=None, help="time only the first N records")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="tasks per checkpointed chunk (default 16 x all workers on cuda, 8 on cpu); a rerun resumes")
    parser.add_argument("--no-progress", action="store_true")
    parser.set_defaults(func=run)


def run(args) -> int:
    from opgen.timing.driver import default_workers_per_gpu, time_records, timing_summary, visible_gpus

    if args.trials < 1 or args.warmups < 0 or args.timeout <= 0:
        raise UsageError("--trials must be >= 1, --warmups >= 0 and --timeout > 0")
    if args.workers_per_gpu is not None and args.workers_per_gpu < 1:
        raise UsageError("--workers-per-gpu must be >= 1")
    records = read_inputs(args.input)[: args.limit]
    if args.device == "cuda":
        gpus = len(visible_gpus())
        if not gpus:
            raise UsageError("--device cuda: no CUDA device is visible here (use --device cpu)")
        # large chunks: each one ends with a short tail in which a GPU waits for the last compiles
        chunk_default = 16 * gpus * (args.workers_per_gpu or default_workers_per_gpu(gpus))
    else:
        chunk_default = 8
    chunk_size = max(8, chunk_default) if args.chunk_size is None else args.chunk_size
    if chunk_size < 1:
        raise UsageError("--chunk-size must be at least 1")
    identity = inputs_identity(records, command="time", device=args.device, trials=args.trials,
                               warmups=args.warmups, timeout=args.timeout, seed=args.seed, tf32=args.tf32,
                               compile=not args.no_compile, chunk_size=chunk_size)

    def time_chunk(chunk: list[dict]) -> tuple[list[dict], None]:
        return time_records(chunk, device=args.device, trials=args.trials, warmups=args.warmups,
                            timeout_s=args.timeout, progress=False, workers_per_gpu=args.workers_per_gpu,
                            seed=args.seed, tf32=args.tf32, with_compile=not args.no_compile,
                            cache_dir=args.cache_dir, reuse_pools=True), None

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
