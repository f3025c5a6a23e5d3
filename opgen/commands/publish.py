"""`opgen publish`: write a build's dataset folder (parquet shards, card, plots) and upload it or copy it; several
builds' run folders are merged into one dataset first (a focused build topping up an earlier one)."""

from __future__ import annotations

import json
from pathlib import Path

from opgen.commands.paths import require_existing
from opgen.errors import UsageError
from opgen.publish.folder import publish
from opgen.taskcode.dtypes import DEFAULT_DTYPE


def register(sub) -> None:
    parser = sub.add_parser("publish", help="write RUN_DIR's dataset folder and upload it to the Hub",
                            description="Write the dataset folder of a finished build and publish it. Given several "
                                        "run folders, their rows are merged into one dataset: each build's rows are "
                                        "deduplicated against the rows kept from the builds before it; builds in "
                                        "another precision (--dtype) become configs named by it (bf16, fp16).")
    parser.add_argument("run_dir", metavar="RUN_DIR", nargs="+", help="a finished `opgen build` run folder (or several)")
    parser.add_argument("--repo-id", required=True,
                        help="ORG/NAME on the Hub, or a local folder (./x, /x, or existing) to copy to")
    parser.add_argument("--private", action="store_true", help="create the Hub repository private")
    parser.add_argument("--dry-run", action="store_true", help="write the folder only; no upload")
    parser.add_argument("--out", default=None,
                        help="dataset folder (default RUN_DIR/dataset; for several run folders, FIRST/dataset-merged)")
    parser.add_argument("--reference", default=None,
                        help="KernelBench for decontaminating merged builds (default: the first build's)")
    parser.add_argument("--token", default=None, help="Hugging Face token (default: HF_TOKEN)")
    parser.set_defaults(func=run)


def _group_by_dtype(run_dirs: list[str]) -> dict[str, list[str]]:
    """The run folders by the precision they were built in (config.json `dtype`, fp32 when absent), in order."""
    groups: dict[str, list[str]] = {}
    for run_dir in run_dirs:
        path = Path(run_dir) / "config.json"
        try:
            dtype = json.loads(path.read_text(encoding="utf-8")).get("dtype", DEFAULT_DTYPE)
        except (OSError, ValueError):
            raise UsageError(f"{run_dir} holds no finished build (no readable config.json); run `opgen build` first") \
                from None
        groups.setdefault(dtype, []).append(run_dir)
    return groups


def _rows_of(run_dirs: list[str], reference: str | None):
    """(table, stats, config, sources) of one build, or of several merged (sources then lists them)."""
    from opgen.pipeline.merge import merge_runs
    from opgen.publish.folder import load_run
    from opgen.records import dataset_table

    if len(run_dirs) == 1:
        rows, stats, config = load_run(Path(run_dirs[0]))
        return dataset_table(rows), stats, config, None
    merged = merge_runs(run_dirs, reference)
    for source in merged.sources:
        print(f"{source['path']}: {source['kept']} of {source['rows']} rows kept ({source['duplicate']} duplicates "
              f"of rows kept before, {source['contaminated']} contaminated)")
    return merged.table, merged.stats, merged.config, merged.sources


def run(args) -> int:
    for run_dir in args.run_dir:
        require_existing(run_dir, "RUN_DIR")
    if len(args.run_dir) == 1:
        result = publish(args.run_dir[0], args.repo_id, private=args.private, dry_run=args.dry_run, out=args.out,
                         token=args.token)
    else:
        from opgen.publish.folder import PrecisionPart, publish_table

        (dtype, first), *others = _group_by_dtype(args.run_dir).items()
        table, stats, config, sources = _rows_of(first, args.reference)
        precisions = []
        for other_dtype, run_dirs in others:
            part_table, part_stats, part_config, _ = _rows_of(run_dirs, args.reference)
            for key in ("profile", "device"):
                if part_config.get(key) != config.get(key):
                    raise UsageError(f"{run_dirs[0]} was built with --{key} {part_config.get(key)}, {first[0]} with "
                                     f"--{key} {config.get(key)}: publish builds of one {key} together")
            precisions.append(PrecisionPart(other_dtype, part_table, part_stats, part_config))
        default_out = "dataset-merged" if len(first) > 1 or precisions else "dataset"
        folder = Path(args.out) if args.out else Path(args.run_dir[0]) / default_out
        result = publish_table(table, stats, config, folder, args.repo_id, sources=sources, private=args.private,
                               dry_run=args.dry_run, token=args.token, precisions=precisions)
        if precisions:
            print(f"configs: default ({dtype}), {dtype}, " + ", ".join(part.dtype for part in precisions))
    print(f"dataset folder: {result.folder} ({result.rows} rows)")
    print(f"load it: python -c \"import datasets; print(datasets.load_dataset('{result.folder}', split='train'))\"")
    if result.target is None:
        print("dry run: nothing uploaded")
    elif result.target.startswith("https://"):
        print(f"uploaded: {result.target}")
        print(f"load it from the Hub: datasets.load_dataset('{args.repo_id}', split='train')")
    else:
        print(f"copied to: {result.target}")
    return 0
