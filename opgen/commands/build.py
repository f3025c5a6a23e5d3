"""`opgen build`: the whole pipeline in one resumable command, from sampling to the dataset in RUN_DIR."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from filters.dedup.chains import DEFAULT_MAX_PER_CHAIN
from opgen.commands.composition_options import add_composition_options, add_dtype_option, add_focus_option
from opgen.commands.device_option import add_device_option
from opgen.commands.limits import megabytes, seconds
from opgen.commands.paths import REFERENCE_HELP, require_existing
from opgen.commands.timing_options import add_timing_options, timing_options
from opgen.errors import UsageError
from opgen.jsonl import require_writable
from opgen.outcome import outcome_line, word
from opgen.pipeline.build import BuildConfig, run_build
from opgen.pipeline.config import CHAIN_SHARE
from opgen.pipeline.executors import make_executor
from opgen.sandbox.gpus import resolve_device
from opgen.sandbox.machine_sizing import size_for_machine


def register(sub) -> None:
    parser = sub.add_parser("build", help="sample, filter, dedup, execute, time: N tasks in RUN_DIR (resumable)",
                            description="Build N tasks into RUN_DIR; rerunning the same command resumes it.")
    parser.add_argument("--n", type=int, required=True, help="number of tasks in the dataset")
    parser.add_argument("--seed", type=int, default=0, help="sampler seed (default 0)")
    parser.add_argument("--out", required=True, help="run folder (resumed when it holds the same build)")
    add_device_option(parser, "where candidates run; cuda also times them and applies the 1-100 ms window")
    parser.add_argument("--profile", choices=("smoke", "gpu"), default=None,
                        help="task sizes (default: gpu when the build runs on cuda, where the window needs them, "
                             "else smoke)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local", help="local process pool or Ray")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes (local) or CPUs (new Ray cluster) (default: 2 on cpu; with "
                             "--device cuda the cores left after the timing workers)")
    parser.add_argument("--vocab-plugin", action="append", default=[], metavar="FILE",
                        help="extra operator specs (repeatable)")
    parser.add_argument("--reference", default=None, help=REFERENCE_HELP)
    parser.add_argument("--shard-size", type=int, default=16, help="candidates per shard (default 16)")
    parser.add_argument("--max-per-chain", type=int, default=None,
                        help="tasks kept at most per chain of operator families, one per size regime (default: "
                             f"{100 * CHAIN_SHARE:.1f}%% of --n, at least {DEFAULT_MAX_PER_CHAIN}; 0: no cap)")
    parser.add_argument("--timeout", type=seconds, default=120.0, help="seconds per candidate in the sandbox")
    parser.add_argument("--memory-mb", type=megabytes, default=None,
                        help="resident memory limit per sandbox worker, 0 for none (default: 4096 on cpu; with "
                             "--device cuda a ninth of the host's memory, 4096 to 14000)")
    parser.add_argument("--planning", choices=("survival", "rounds"), default="survival",
                        help="survival: round 0 draws each data source by its expected survival (shipped prior), so "
                             "most builds need no top-up round; rounds: n x 1.25 from the mix, then top-ups")
    parser.add_argument("--no-stream", action="store_true",
                        help="the old mode: each round's stages one after another, and each top-up round after the "
                             "previous one is timed (same dataset, slower)")
    parser.add_argument("--timing-workers", type=int, default=None,
                        help="timing sandbox workers per GPU (default: a quarter of the cores per GPU, 1 to 8)")
    add_composition_options(parser)
    add_focus_option(parser)
    add_dtype_option(parser)
    add_timing_options(parser, compile_option=False)
    parser.add_argument("--save-state", default=None, metavar="FILE",
                        help="keep the build's state in FILE (and FILE.*.N parts past 16 MiB), saved as it goes and "
                             "when the call ends, to continue it elsewhere with --resume-from")
    parser.add_argument("--resume-from", default=None, metavar="FILE",
                        help="first restore the state saved by --save-state into --out (an empty folder or the same "
                             "build's): nothing finished is redone")
    parser.add_argument("--held-out", action=argparse.BooleanOptionalAction, default=None,
                        help="once the build is complete, derive and validate held-out input sizes for every task "
                             "(`opgen heldout`; default: on for --device cuda, off for cpu)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def _stop_on_sigterm(signum, frame) -> None:
    raise SystemExit(143)   # a time limit's SIGTERM ends the call as Ctrl-C does: the state is saved on the way out


def _add_held_out(run_dir, device: str, sizing, gpus: int, progress: bool) -> None:
    """The held-out stage over the finished build's tasks, with every worker the machine was sized for."""
    from opgen.heldout.apply import add_held_out, held_text

    summary = add_held_out(run_dir, device=device, workers=sizing.every_worker(gpus),
                           memory_mb=sizing.memory_mb or None, progress=progress)
    print(f"held-out sizes: {held_text(summary)}", file=sys.stderr)


def require_inputs(args) -> None:
    """The files the build reads, each named when missing, before the device is looked at."""
    from kernels_ref.load import looks_like_path

    for plugin in args.vocab_plugin:
        require_existing(plugin, "--vocab-plugin")
    require_existing(args.composition_prior, "--composition-prior")
    if args.reference is not None and looks_like_path(args.reference):
        require_existing(args.reference, "--reference")
    if args.resume_from:
        # a missing state is the first of repeated calls when it is the --save-state file too (the build's own rule)
        first_call = args.save_state and Path(args.save_state).resolve() == Path(args.resume_from).resolve()
        if not first_call:
            require_existing(args.resume_from, "--resume-from")


def print_outcome(funnel, stats: dict) -> None:
    """The funnel by stage, then what became of every candidate (the words of opgen/outcome.py, adding up)."""
    counts = stats["outcome"]
    print(funnel.table(totals=False))
    print("\n" + outcome_line(counts))
    if counts["rejected"]:
        print("rejected: " + ", ".join(f"{reason} {n}" for reason, n in
                                       sorted(stats["rejected"].items(), key=lambda item: (-item[1], item[0]))))
    if counts["unjudged"]:
        print(f"{word('unjudged')}: {counts['unjudged']}, in {stats['skipped_shards']} shard(s) skipped once their "
              "source's quota was met")
    by_source = ", ".join(f"{s} {v['tasks']}/{v['quota']}" for s, v in stats["by_source"].items() if v["quota"])
    print(f"{stats['tasks']} of {stats['wanted']} tasks ({by_source}) in {stats['rounds']} round(s)")


def run(args) -> int:
    timing = timing_options(args, "cuda")
    if args.timing_workers is not None and args.timing_workers < 1:
        raise UsageError("--timing-workers must be at least 1")
    require_inputs(args)
    if args.save_state:
        require_writable(args.save_state, "--save-state")
    if args.device == "cuda" and args.executor == "ray":   # the cluster's GPUs, checked once it is up
        device, gpus, chosen = "cuda", [], ""
    else:   # before any work, the executor's processes too
        device, gpus, chosen = resolve_device(args.device)
    sizing = size_for_machine(device, len(gpus), args.workers, args.timing_workers, args.memory_mb)
    # what auto chose goes to the build log's first lines, and to stderr with the sizing a CUDA build prints there
    note = "; ".join(part for part in (chosen, sizing.note) if part)
    if sizing.note:
        print(note, file=sys.stderr)
    profile = args.profile or ("gpu" if device == "cuda" else "smoke")
    config = BuildConfig(n=args.n, seed=args.seed, profile=profile, device=device,
                         reference=args.reference, vocab_plugins=tuple(args.vocab_plugin),
                         shard_size=args.shard_size, timeout_s=args.timeout,
                         memory_mb=sizing.memory_mb or None, trials=timing.trials, warmups=timing.warmups,
                         trial_mode=timing.trial_mode, min_trials=timing.min_trials, precision=timing.precision,
                         planning=args.planning, max_per_chain=args.max_per_chain, composition=args.composition,
                         prior_weight=args.prior_weight, composition_prior=args.composition_prior,
                         focus=tuple(args.focus), dtype=args.dtype)
    executor = make_executor(args.executor, sizing.workers)
    previous = signal.signal(signal.SIGTERM, _stop_on_sigterm)
    try:
        try:
            if device == "cuda" and args.executor == "ray" and not executor.ray.cluster_resources().get("GPU", 0):
                raise UsageError("--device cuda: the Ray cluster has no GPU")
            result = run_build(config, args.out, executor, progress=not args.no_progress, stream=not args.no_stream,
                               timing_workers=sizing.timing_workers, save_state=args.save_state,
                               resume_from=args.resume_from, sizing_note=note)
        finally:
            executor.close()   # its workers give the machine back to the held-out stage's
        if result.tasks and (device == "cuda" if args.held_out is None else args.held_out):
            _add_held_out(result.run_dir, device, sizing, len(gpus), not args.no_progress)
    except KeyboardInterrupt:   # the CLI says it in one line, with where the work is kept
        kept = f"--save-state {args.save_state}" if args.save_state else args.out
        raise KeyboardInterrupt(f"{kept} keeps every finished stage; the same command goes on from it") from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    print_outcome(result.funnel, result.stats)
    focus = result.stats.get("focus")
    if focus:
        print(f"focus ({' '.join(focus['requested'])}): tasks holding each focused operator: "
              + ", ".join(f"{name} {count}" for name, count in focus["tasks"].items()))
        for name, count in focus["tasks"].items():
            if not count:
                print(f"warning: focused operator {name} is in none of the tasks ({focus['candidates'][name]} "
                      f"candidates, {focus['survivors'][name]} survivors)", file=sys.stderr)
    rates = result.stats["throughput"]
    steady = (f" ({rates['steady_tasks_per_min']} after this call's first task at {rates['first_task_s']} s)"
              if rates["steady_tasks_per_min"] is not None else "")
    print(f"{rates['tasks_per_min']} tasks/min{steady}, {rates['candidates_per_min']} candidates/min over "
          f"{rates['wall_s']} s" + (f"; GPU busy {rates['gpu_busy_share']:.0%}" if rates["gpu_busy_share"] is not None else ""))
    print(f"run folder: {result.run_dir}  (tasks.parquet, stats.json, rejected.jsonl, logs/build.log)")
    print(f"next: opgen publish {result.run_dir} --repo-id ORG/NAME --dry-run")
    if result.tasks < result.wanted:
        print(f"warning: only {result.tasks} of {result.wanted} tasks survived", file=sys.stderr)
    return 0
