"""`opgen vocab`: list the operator vocabulary (built-ins, entry points and plugin files) and its families."""

from __future__ import annotations

import json
from collections import Counter

from opgen.errors import UsageError
from opgen.vocab import VocabError, load_vocabulary


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
    add_vocab_plugin_option(parser)
    parser.set_defaults(func=run)


def run(args) -> int:
    vocab = load_or_fail(args.vocab_plugin)
    rows = [{"name": s.name, "category": s.category, "family": s.family, "ranks": list(s.ranks),
             "standalone": s.standalone, "phrase": s.phrase, "defined_in": s.defined_in} for s in vocab]
    families: dict[str, list[str]] = {}
    for row in rows:
        families.setdefault(row["family"], []).append(row["name"])
    families = dict(sorted(families.items()))
    torch_count = sum(1 for r in rows if not r["name"].startswith("transformers."))
    if args.json:
        print(json.dumps({"total": len(rows), "torch": torch_count, "transformers": len(rows) - torch_count,
                          "operators": rows, "families": families}, indent=1))
        return 0
    width = max(len(r["name"]) for r in rows)
    family_width = max(len(f) for f in families)
    for row in rows:
        print(f"{row['name']:<{width}}  {row['category']:<13} {row['family']:<{family_width}}  "
              f"ranks {','.join(map(str, row['ranks']))}")
    categories = Counter(r["category"] for r in rows)
    print(f"\n{len(rows)} operators ({torch_count} torch, {len(rows) - torch_count} transformers): "
          + ", ".join(f"{c} {n}" for c, n in sorted(categories.items())))
    print(f"\n{len(families)} families (synonyms share one):")
    for family, names in families.items():
        print(f"  {family:<{family_width}}  {', '.join(names)}")
    return 0
