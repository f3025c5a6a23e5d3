"""`opgen publish`: write a build's dataset folder (parquet shards, card, plots) and upload it or copy it; several
builds' run folders are merged into one dataset first (a focused build topping up an earlier one)."""

from __future__ import annotations

from pathlib import Path

from opgen.publish.folder import publish


def register(sub) -> None:
    parser = sub.add_parser("publish", help="write RUN_DIR's dataset folder and upload it to the Hub",
                            description="Write the dataset folder of a finished build and publish it. Given several "
                                        "run folders, their rows are merged into one dataset: each build's rows are "
                                        "deduplicated against the rows kept from the builds before it.")
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


def run(args) -> int:
    if len(args.run_dir) == 1:
        result = publish(args.run_dir[0], args.repo_id, private=args.private, dry_run=args.dry_run, out=args.out,
                         token=args.token)
    else:
        from opgen.pipeline.merge import merge_runs
        from opgen.publish.folder import publish_table

        merged = merge_runs(args.run_dir, args.reference)
        for source in merged.sources:
            print(f"{source['path']}: {source['kept']} of {source['rows']} rows kept ({source['duplicate']} duplicates "
                  f"of rows kept before, {source['contaminated']} contaminated)")
        folder = Path(args.out) if args.out else Path(args.run_dir[0]) / "dataset-merged"
        result = publish_table(merged.table, merged.stats, merged.config, folder, args.repo_id,
                               sources=merged.sources, private=args.private, dry_run=args.dry_run, token=args.token)
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
