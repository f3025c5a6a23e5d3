"""`opgen vocab`: list the operator vocabulary (built-ins, entry points and plugin files) and its families."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from opgen.commands.device_option import add_device_option, chosen_device
from opgen.errors import UsageError
from opgen.jsonl import require_writable
from opgen.taskcode.dtypes import DEFAULT_DTYPE, DTYPES
from opgen.vocab import VocabError, load_vocabulary
from opgen.vocab.dtype_support import unsupported_ops


def add_vocab_plugin_option(parser) -> None:
    parser.add_argument("--vocab-plugin", action="append", default=[], metavar="FILE",
                        help="a Python file defining SPECS = [OpSpec(...)] (repeatable)")


def load_or_fail(plugins: list[str]):
    """The vocabulary, or a UsageError naming the operator and field that is wrong."""
    try:
        return load_vocabulary(plugins)
    except VocabError as error:
        raise UsageError(str(error)) from None


def register(sub) -> None:
    parser = sub.add_parser("vocab", help="list the operator vocabulary")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--dtype", choices=DTYPES, default=DEFAULT_DTYPE,
                        help="the vocabulary of a precision: less the operators the shipped probe found without a "
                             "kernel in it (opgen/vocab/dtype_support.json)")
    parser.add_argument("--probe-dtypes", nargs="+", choices=DTYPES[1:], default=None, metavar="DTYPE",
                        help="run the precision probe instead: each operator alone in small tasks in DTYPE on "
                             "--device, and write what has no kernel to --out")
    add_device_option(parser, "where the probe runs")
    parser.add_argument("--ops", nargs="+", default=None, metavar="NAME", help="probe only these operators")
    parser.add_argument("--workers", type=int, default=2, help="the probe's sandbox workers")
    parser.add_argument("--out", default=None, help="where the probe writes (default: the shipped file)")
    add_vocab_plugin_option(parser)
    parser.set_defaults(func=run)


def probe(args, vocab) -> int:
    from opgen.pipeline.dtype_probe import probe_dtypes
    from opgen.vocab.dtype_support import SUPPORT_PATH

    unknown = [name for name in args.ops or () if name not in vocab]
    if unknown:
        raise UsageError(f"--ops: not in the vocabulary: {', '.join(unknown)}")
    out = Path(args.out) if args.out else SUPPORT_PATH
    require_writable(out, "--out")
    device, _ = chosen_device(args.device)
    found = probe_dtypes(vocab, args.probe_dtypes, device, args.ops, workers=args.workers, progress=True)
    out.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    for dtype in args.probe_dtypes:
        entry = found[dtype]
        print(f"{dtype}: {len(entry['unsupported'])} of {entry['operators']} operators without a kernel, "
              f"{len(entry['not_judged'])} not judged: {', '.join(entry['unsupported']) or 'none'}")
    print(f"wrote {out}")
    return 0


def run(args) -> int:
    vocab = load_or_fail(args.vocab_plugin)
    if args.probe_dtypes:
        return probe(args, vocab)
    dropped = unsupported_ops(args.dtype)
    vocab = vocab.without(dropped)
    rows = [{"name": s.name, "category": s.category, "family": s.family, "ranks": list(s.ranks),
             "standalone": s.standalone, "phrase": s.phrase, "defined_in": s.defined_in} for s in vocab]
    families: dict[str, list[str]] = {}
    for row in rows:
        families.setdefault(row["family"], []).append(row["name"])
    families = dict(sorted(families.items()))
    torch_count = sum(1 for r in rows if not r["name"].startswith("transformers."))
    if args.json:
        print(json.dumps({"dtype": args.dtype, "left_out": dropped, "total": len(rows), "torch": torch_count, "transformers": len(rows) - torch_count,
                          "operators": rows, "families": families}, indent=1))
        return 0
    width = max(len(r["name"]) for r in rows)
    family_width = max(len(f) for f in families)
    print(f"{'operator':<{width}}  {'category':<13} {'family':<{family_width}}  ranks")
    for row in rows:
        print(f"{row['name']:<{width}}  {row['category']:<13} {row['family']:<{family_width}}  "
              f"{','.join(map(str, row['ranks']))}")
    categories = Counter(r["category"] for r in rows)
    print(f"\n{len(rows)} operators ({torch_count} torch, {len(rows) - torch_count} transformers): "
          + ", ".join(f"{c} {n}" for c, n in sorted(categories.items())))
    if args.dtype != DEFAULT_DTYPE:
        print(f"in {args.dtype}, left out (no kernel in the probe): "
              + (", ".join(f"{name} ({why[:80]})" for name, why in dropped.items()) or "none"))
    print(f"\n{len(families)} families (synonyms share one):")
    for family, names in families.items():
        print(f"  {family:<{family_width}}  {', '.join(names)}")
    return 0
