"""`opgen sample`: draw N candidate tasks for a seed and write them as JSONL records."""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tqdm import tqdm

from opgen.commands.composition_options import (
    add_composition_options,
    add_dtype_option,
    add_focus_option,
    composition_of,
)
from opgen.commands.vocab import add_vocab_plugin_option, load_or_fail
from opgen.errors import UsageError
from opgen.interrupts import spared_children
from opgen.jsonl import require_writable
from opgen.sample.focus import check_focus, focused_mix, resolve_focus
from opgen.sample.sampler import DEFAULT_MIX
from opgen.vocab.profiles import PROFILE_NAMES

CHUNK = 64


def register(sub) -> None:
    parser = sub.add_parser("sample", help="sample candidate tasks")
    parser.add_argument("--n", type=int, required=True, help="number of candidates")
    parser.add_argument("--seed", type=int, default=0, help="sampler seed (default 0)")
    parser.add_argument("--out", required=True, help="output JSONL file")
    parser.add_argument("--profile", choices=PROFILE_NAMES, default="smoke")
    parser.add_argument("--start", type=int, default=0, help="index of the first candidate")
    parser.add_argument("--workers", type=int, default=1, help="processes (output is identical for any value)")
    add_vocab_plugin_option(parser)
    add_composition_options(parser)
    add_focus_option(parser)
    add_dtype_option(parser)
    parser.set_defaults(func=run)


def _sample_chunk(job: tuple) -> list[str]:
    from opgen.sample.sampler import sample_records
    from opgen.vocab import cached_vocabulary

    seed, start, count, profile, plugins, composition, mix, focus, dtype = job
    vocab = cached_vocabulary(plugins)
    return [json.dumps(record) for record in sample_records(seed, start, count, profile, vocab, mix=mix,
                                                            composition=composition, focus=focus, dtype=dtype)]


def run(args) -> int:
    if args.n < 1:
        raise UsageError("--n must be at least 1")
    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    vocab = load_or_fail(args.vocab_plugin)  # fail fast, in this process, on a bad plugin
    composition = composition_of(args)
    plugins = tuple(str(Path(p).resolve()) for p in args.vocab_plugin)
    mix = focus = None
    if args.focus:   # every candidate holds a focused operator; sources they cannot make are left out of the mix
        focus = resolve_focus(args.focus, vocab, args.vocab_plugin)
        mix = focused_mix(DEFAULT_MIX, vocab, focus)
        check_focus(focus, vocab, args.profile, composition, mix)
    jobs = [(args.seed, start, min(CHUNK, args.start + args.n - start), args.profile, plugins, composition, mix, focus,
             args.dtype)
            for start in range(args.start, args.start + args.n, CHUNK)]
    out = Path(args.out)
    require_writable(out)   # before any work
    tmp = out.with_name(out.name + ".tmp")
    bar = tqdm(total=args.n, desc="sample", unit="task", file=sys.stderr, disable=None)
    with open(tmp, "w", encoding="utf-8") as handle:
        if args.workers == 1:
            results = map(_sample_chunk, jobs)
            for lines in results:
                handle.write("".join(line + "\n" for line in lines))
                bar.update(len(lines))
        else:
            with ProcessPoolExecutor(max_workers=args.workers) as pool:
                with spared_children():   # the workers start as the jobs go in; the terminal's Ctrl-C is ours
                    results = pool.map(_sample_chunk, jobs)
                for lines in results:
                    handle.write("".join(line + "\n" for line in lines))
                    bar.update(len(lines))
    bar.close()
    os.replace(tmp, out)
    print(f"wrote {args.n} candidates to {out}" + (f", each holding one of {', '.join(focus)}" if focus else ""),
          file=sys.stderr)
    return 0
