"""`opgen prior`: mine the composition prior (families, data-flow pairs, sizes) from real models' configs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from opgen.errors import UsageError
from opgen.vocab.prior import PRIOR_PATH


def register(sub) -> None:
    parser = sub.add_parser("prior", help="mine the sampler's composition prior from torchvision/transformers models",
                            description="Build torchvision and transformers models from their configs on the meta "
                                        "device (no weights, no network), record their operator families, "
                                        "data-flow pairs and sizes, and write the prior the sampler draws from.")
    parser.add_argument("--out", default=str(PRIOR_PATH),
                        help=f"prior file to write (default: the one shipped in the package, {PRIOR_PATH.name})")
    parser.add_argument("--models", nargs="+", default=None, metavar="NAME",
                        help="only these zoo models (resnet50, transformers.llama, ...; default: all)")
    parser.add_argument("--library", action="append", choices=("torchvision", "transformers"), default=None,
                        help="only models of this library (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the zoo and exit")
    parser.add_argument("--vocab-plugin", action="append", default=[], metavar="FILE",
                        help="extra operator specs, so their families are recognised (repeatable)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from opgen.commands.vocab import load_or_fail
    from opgen.mining.prior import mine
    from opgen.mining.zoo import library_versions, select

    models = select(args.models, args.library)
    if args.list:
        for model in models:
            print(f"{model.name:45s} {model.library:13s} {model.domain}")
        return 0
    versions = library_versions()
    missing = sorted({m.library for m in models if versions.get(m.library) is None})
    if missing:
        raise UsageError(f"{', '.join(missing)} cannot be imported here; install it (pip install 'opgen[prior]') "
                         f"or leave its models out (--library {'transformers' if 'torchvision' in missing else 'torchvision'})")
    vocab = load_or_fail(args.vocab_plugin)
    out = Path(args.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"cannot write {out}: {error.strerror or error}") from None

    def report(name: str, summary: dict | None, error: str | None) -> None:
        if error:
            print(f"  {name}: skipped ({error})", file=sys.stderr)
        else:
            top = ", ".join(list(summary["pairs"])[:3])
            print(f"  {name}: {summary['ops']} ops; {top}", file=sys.stderr)

    prior = mine(models, vocab, report)
    if not prior["models"]:
        raise UsageError("no model could be traced; nothing written")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(prior, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    pairs = ", ".join(f"{pair} {share:.1%}" for pair, share in list(prior["pairs"].items())[:5])
    print(f"wrote {out}: {len(prior['models'])} models ({len(prior['failed'])} skipped), "
          f"{len(prior['families'])} families, {len(prior['pairs'])} pairs; top pairs {pairs}", file=sys.stderr)
    return 0
