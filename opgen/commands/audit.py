"""`opgen audit`: whether a dataset holds its card's claims, from its rows alone; exit 1 when one fails."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from opgen.commands.paths import REFERENCE_HELP, require_existing
from opgen.errors import UsageError
from opgen.jsonl import require_writable


def register(sub) -> None:
    parser = sub.add_parser("audit", help="check a dataset's card claims from its rows (no GPU); --families",
                            description="Check, from the rows alone (nothing is run), the claims a dataset's card "
                                        "makes: the size and the CUDA-Agent data_source quotas (--n), one seed, no "
                                        "exact or near duplicate, no KernelBench family-signature match, no task "
                                        "that accepts zeros, a constant or another draw on 99% of its values, no "
                                        "same-shape twin, every GPU-timed eager time in 1-100 ms. Exit 1 when a "
                                        "claim fails. `opgen check` runs the rows again.")
    parser.add_argument("dataset", metavar="DATASET",
                        help="a published dataset folder (opgen publish), a run folder, a tasks parquet or a JSONL")
    parser.add_argument("--n", type=int, default=None, help="the size the card claims: adds the size and quotas")
    parser.add_argument("--seed", type=int, default=None,
                        help="the seed the card claims (default: any one seed for every row)")
    parser.add_argument("--config", default="default", help="the config to read (a precision: bf16, fp16)")
    parser.add_argument("--reference", default=None, help=REFERENCE_HELP)
    parser.add_argument("--json", default=None, metavar="OUT", help="also write the claims here")
    parser.add_argument("--families", action="store_true",
                        help="also print the family mix: distinct families and chains, near-duplicate pairs, "
                             "KernelBench matches, and the top families and adjacent pairs beside KernelBench "
                             "level 2's and real models'")
    parser.add_argument("--top", type=int, default=15, help="rows of the --families tables (default 15)")
    parser.add_argument("--composition-prior", default=None, metavar="FILE",
                        help="the real models' family pairs for --families (default: the shipped prior)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from opgen.analysis.claims import claims, claims_table
    from opgen.analysis.rows import read_task_rows

    require_existing(args.dataset, "DATASET")
    require_existing(args.composition_prior, "--composition-prior")
    if args.json is not None:
        require_writable(args.json, "--json")
    try:
        rows = read_task_rows(Path(args.dataset), args.config)
    except UsageError:
        raise
    except Exception as error:  # noqa: BLE001 - datasets' many errors: a folder that is no dataset, a config it lacks
        raise UsageError(f"cannot read {args.dataset} ({args.config}): {type(error).__name__}: {error}") from None
    found = claims(rows, args.reference, args.n, args.seed)
    print(f"{args.dataset} ({args.config}): {len(rows):,} rows")
    print(claims_table(found))
    if args.families:
        from opgen.analysis.families import family_report

        print("\n" + family_report(rows, args.reference, str(args.dataset), args.top, args.composition_prior))
    if args.json is not None:
        Path(args.json).write_text(json.dumps([asdict(claim) for claim in found], indent=1))
    return 1 if any(claim.holds is False for claim in found) else 0
