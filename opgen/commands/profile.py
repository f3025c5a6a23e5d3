"""`opgen profile`: what a build made and where its time went, from its run folder or state file, as a summary (every
figure as JSON with --json); --realism for its compositions."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from opgen.commands.paths import require_existing
from opgen.jsonl import require_writable


def register(sub) -> None:
    parser = sub.add_parser("profile", help="where a build's time went (run folder or state file); --realism",
                            description="Read a build's run folder, or its --save-state file, finished or not, and "
                                        "print what became of its candidates and where the time went: each check's "
                                        "seconds per candidate, the workers' CPU and lock-wait shares, memory "
                                        "retries and GPU peaks, the timing stage's holds and the window's "
                                        "rejections, and the rates a minute. --json prints every figure as JSON.")
    parser.add_argument("run", metavar="RUN", help="a run folder, or a build's state file (--save-state)")
    parser.add_argument("--compare", default=None, metavar="OTHER",
                        help="another run folder or state: the timings of the tasks both timed, side by side")
    parser.add_argument("--since", default=None, metavar="EARLIER",
                        help="an earlier run folder or state of the same build: only the shards finished after it")
    parser.add_argument("--realism", action="store_true",
                        help="also the share of adjacent family pairs that real models have, for every fate of the "
                             "build's candidates (drawn, kept by dedup, published, each rejection)")
    parser.add_argument("--composition-prior", default=None, metavar="FILE",
                        help="the real models' family pairs for --realism (default: the shipped prior)")
    parser.add_argument("--json", nargs="?", const="-", default=None, metavar="OUT",
                        help="every figure as JSON: on stdout in place of the summary, or, with OUT, into that file "
                             "beside the summary")
    parser.set_defaults(func=run)


def run(args) -> int:
    from opgen.analysis.run_profile import profile_figures
    from opgen.analysis.run_source import run_folder

    for path, what in ((args.run, "RUN"), (args.compare, "--compare"), (args.since, "--since"),
                       (args.composition_prior, "--composition-prior")):
        require_existing(path, what)
    to_file = args.json not in (None, "-")
    if to_file:
        require_writable(args.json, "--json")
    with tempfile.TemporaryDirectory() as scratch:
        # a state's outcome (and --realism) reads the tasks finished so far, written out as a build writes them
        run_dir = run_folder(Path(args.run), Path(scratch) / "run", with_outputs=True)
        compare_dir, since_dir = (run_folder(Path(path), Path(scratch) / name) if path else None
                                  for path, name in ((args.compare, "compare"), (args.since, "since")))
        figures = profile_figures(run_dir, compare_dir, since_dir)
        if args.realism:
            from opgen.analysis.realism import candidate_fates, realism_table
            from opgen.pipeline.rundir import RunDir
            from opgen.vocab.prior import load_prior

            figures["realism"] = realism_table(candidate_fates(RunDir(run_dir)), load_prior(args.composition_prior))
    text = json.dumps(figures, indent=1)
    if args.json == "-":
        print(text)
        return 0
    from opgen.analysis.profile_text import profile_summary

    print(profile_summary(figures, args.run))
    if args.realism:
        from opgen.analysis.realism import realism_markdown

        print("\nadjacent family pairs that real models have, by what became of the candidates:\n"
              + realism_markdown(figures["realism"]))
    if to_file:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0
