"""The dataset card (README.md with a Hub YAML header) and its PNG plots, from a build's tasks and stats."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

from huggingface_hub import DatasetCard, DatasetCardData

from opgen.outcome import MEANING, outcome_line, outcome_of, word
from opgen.publish.family_mix import family_counts, pair_counts, prior_pair_share, share, task_families
from opgen.publish.heldout_section import held_out_section
from opgen.records import COLUMN_DOCS
from opgen.sample.focus import focus_counts
from opgen.taskcode.dtypes import DEFAULT_DTYPE, TOLERANCES
from opgen.vocab.prior import CompositionPrior, load_prior


def size_category(n: int) -> str:
    """The Hub's size_categories bucket for `n` rows."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                         (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if n < limit:
            return label
    return "n>1T" if n > 10**12 else "10M<n<100M"


def dataset_info_yaml(table, download_size: int) -> dict:
    """The card's `dataset_info` of one config as push_to_hub writes it (features and split sizes).

    `datasets` keys its cache of a local folder on the card's `dataset_info` and `configs` (the folder's name, the
    configs' file patterns and these sizes), not on the files: without it, a rebuilt folder or another folder of the
    same name loads the rows cached from the first.
    """
    from datasets import DatasetInfo, Features, SplitDict, SplitInfo

    info = DatasetInfo(features=Features.from_arrow_schema(table.schema))
    info.splits = SplitDict()
    info.splits.add(SplitInfo(name="train", num_bytes=table.nbytes, num_examples=table.num_rows))
    info.download_size, info.dataset_size = download_size, table.nbytes
    return info._to_yaml_dict()


def card_data(n_rows: int, pretty_name: str, dataset_info: dict | list[dict] | None = None,
              extra_configs: list[dict] | None = None) -> DatasetCardData:
    return DatasetCardData(
        license="mit", language=["en"], pretty_name=pretty_name, size_categories=[size_category(n_rows)],
        task_categories=["text-generation"], tags=["code", "pytorch", "cuda", "gpu-kernels", "synthetic",
                                                    "kernelbench", "torch-compile"],
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*"}]},
                 *(extra_configs or [])],
        **({"dataset_info": dataset_info} if dataset_info else {}),
    )


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.4g}" if values else "n/a"


def _funnel_section(stats: dict) -> list[str]:
    lines = ["| stage | seen | kept | rejected | reasons |", "|---|---:|---:|---:|---|"]
    for name, count in stats["funnel"]["stages"].items():
        if count["seen"] == 0:
            continue
        rejected = Counter(count["rejected"])
        reasons = ", ".join(f"`{r}` {n}" for r, n in rejected.most_common()) or "-"
        lines.append(f"| {name} | {count['seen']} | {count['kept']} | {sum(rejected.values())} | {reasons} |")
    counts = outcome_of(stats)
    merged = (f" Publishing the builds as one dataset kept {stats['tasks']:,} of their {counts['tasks']:,} tasks "
              "(the `merge` stage)." if stats.get("merged") else "")
    lines += ["", f"{outcome_line(counts)}.{merged}", "",
              *(f"- {word(key)}: {meaning}" for key, meaning in MEANING.items()),
              "", "| rejected for | candidates |", "|---|---:|"]
    lines += [f"| `{reason}` | {n} |" for reason, n in sorted(stats["rejected"].items(), key=lambda kv: -kv[1])]
    if not stats["rejected"]:
        lines.append("| (none) | 0 |")
    return lines


def _summary_section(rows: list[dict], stats: dict) -> list[str]:
    counts = Counter(r["data_source"] for r in rows)
    total = max(1, len(rows))
    lines = ["| data_source | tasks | share | quota |", "|---|---:|---:|---:|"]
    for source, info in stats["by_source"].items():
        lines.append(f"| {source} | {counts[source]} | {100 * counts[source] / total:.1f}% | {info['quota']} |")
    ops = Counter(op for r in rows for op in r["ops"])
    lines += ["", f"Distinct operators: {len(ops)}. Most used:", "", "| operator | tasks |", "|---|---:|"]
    lines += [f"| `{op}` | {n} |" for op, n in ops.most_common(15)]
    sims = [r["kb_similarity"] for r in rows if r.get("kb_similarity") is not None]
    lines += ["", "| statistic | median | max |", "|---|---:|---:|",
              f"| num_ops | {_median([r['num_ops'] for r in rows])} | {max((r['num_ops'] for r in rows), default='n/a')} |",
              f"| flops | {_median([r['flops'] for r in rows])} | {max((r['flops'] for r in rows), default='n/a')} |",
              f"| bytes_moved | {_median([r['bytes_moved'] for r in rows])} | "
              f"{max((r['bytes_moved'] for r in rows), default='n/a')} |",
              f"| kb_similarity | {_median(sims)} | {max(sims, default='n/a')} |"]
    eager = [r["eager_ms"] for r in rows if r.get("eager_ms") is not None]
    if eager:
        speedups = [r["compile_speedup"] for r in rows if r.get("compile_speedup")]
        hardware = sorted({r["hardware"] for r in rows if r.get("hardware")})
        lines += [f"| eager_ms | {_median(eager)} | {max(eager):.4g} |",
                  f"| compile_speedup | {_median(speedups)} | {max(speedups, default=float('nan')):.4g} |",
                  "", f"Timed on: {', '.join(hardware)}."]
    else:
        lines += ["", "Timing columns are null: this build ran on the CPU (`--device cpu`) and was not timed."]
    return lines


def _provenance_section(rows: list[dict]) -> list[str]:
    """How the timings were taken: every distinct provenance of the timed rows, with its task count."""
    keys = ("hardware", "driver_version", "cuda_version", "torch_version", "triton_version", "compile_mode",
            "precision", "matmul_precision", "cudnn_conv_precision", "cudnn_rnn_precision", "trial_mode",
            "timing_warmups", "timing_method")
    setups = Counter(tuple(r.get(k) for k in keys) for r in rows if r.get("eager_ms") is not None)
    if not setups:
        return ["No row was timed on a GPU, so there is no timing provenance."]
    lines = ["Every row carries how its timings were taken (columns below); the set-ups in this dataset:", ""]
    for setup, count in setups.most_common():
        values = dict(zip(keys, setup))
        lines += [f"- **{count} tasks**: {values['hardware']} (driver {values['driver_version']}, CUDA "
                  f"{values['cuda_version']}), torch {values['torch_version']}, triton {values['triton_version']}, "
                  f"`torch.compile` mode `{values['compile_mode']}`; precision `{values['precision']}` (matmul "
                  f"{values['matmul_precision']}, cuDNN conv {values['cudnn_conv_precision']}, cuDNN RNN "
                  f"{values['cudnn_rnn_precision']}); {values['trial_mode']} trials after {values['timing_warmups']} "
                  f"warm-ups; {values['timing_method']}."]
    trials = [r["eager_ms_count"] for r in rows if r.get("eager_ms_count")]
    if trials:
        lines += ["", f"Eager trials used: median {_median(trials)}, max {max(trials)}."]
    return lines


def families_section(rows: list[dict], prior: CompositionPrior | None = None, top: int = 15) -> list[str]:
    """The family mix: tasks per operator family and per adjacent family pair (synonyms counted as one), beside
    the composition prior's shares in real models when it is known."""
    chains = [task_families(r) for r in rows]
    families, pairs = family_counts(chains), pair_counts(chains)
    lines = [f"Operators are grouped into canonical families (`torch.mm`, `torch.matmul`, `F.linear` are all "
             f"`matmul`; the `families` column). Distinct families: {len(families)}; distinct family chains: "
             f"{len({tuple(c) for c in chains})}; distinct adjacent pairs: {len(pairs)}."]
    if prior is not None:
        real, total = prior_pair_share(chains, prior)
        lines += ["", f"{share(real, total)} of the {total} adjacent operator pairs are pairs that real models have "
                      f"(the composition prior, mined from {len(prior.models)} torchvision and transformers models; "
                      "its shares are of operator uses and of data-flow pairs there)."]
    prior_column = prior is not None
    lines += ["", "| family | tasks | share |" + (" real models |" if prior_column else ""),
              "|---|---:|---:|" + ("---:|" if prior_column else "")]
    lines += [f"| `{family}` | {n} | {share(n, len(rows))} |"
              + (f" {100 * prior.families.get(family, 0):.1f}% |" if prior_column else "")
              for family, n in families.most_common(top)]
    lines += ["", f"Top {top} adjacent family pairs (b directly after a):", "",
              "| a → b | tasks | share |" + (" real models |" if prior_column else ""),
              "|---|---:|---:|" + ("---:|" if prior_column else "")]
    lines += [f"| `{a}` → `{b}` | {n} | {share(n, len(rows))} |"
              + (f" {100 * prior.pairs.get(f'{a} -> {b}', 0):.1f}% |" if prior_column else "")
              for (a, b), n in pairs.most_common(top)]
    if not pairs:
        lines.append("| (no task has two operators) | 0 | 0.0% |" + (" |" if prior_column else ""))
    if prior_column:
        lines += ["", f"Top {top} pairs of the real models, and how many tasks have them:", "",
                  "| a → b (real models) | share there | tasks | share |", "|---|---:|---:|---:|"]
        for pair, prior_share in list(prior.pairs.items())[:top]:
            a, b = pair.split(" -> ")
            lines.append(f"| `{a}` → `{b}` | {100 * prior_share:.1f}% | {pairs.get((a, b), 0)} | "
                         f"{share(pairs.get((a, b), 0), len(rows))} |")
    return lines


def build_command(config: dict) -> str:
    """The `opgen build` command line of a build's config (its plugin files by name, its focus)."""
    plugins = "".join(f" --vocab-plugin {Path(p).name}" for p in config.get("vocab_plugins") or [])
    focus = f" --focus {' '.join(config['focus'])}" if config.get("focus") else ""
    return (f"opgen build --n {config['n']} --seed {config['seed']} --profile {config['profile']} "
            f"--device {config['device']}{plugins}{focus}")


def focus_section(rows: list[dict], configs: list[dict]) -> list[str]:
    """What the builds focused on (`--focus`) and how many tasks hold each focused operator; empty when no row
    comes from a focused build."""
    focused = [r for r in rows if r.get("focus")]
    if not focused:
        return []
    operators = list(dict.fromkeys(name for r in focused for name in r["focus"]))
    counts = focus_counts(focused, operators)
    asked = sorted({" ".join(c["focus"]) for c in configs if c.get("focus")})
    lines = [f"{len(focused)} of the {len(rows)} tasks come from a build focused on chosen operators "
             f"({', '.join(f'`--focus {a}`' for a in asked)}): every one of them holds at least one of "
             f"{', '.join(f'`{name}`' for name in operators)}, at any position of its chain, the rest of the chain "
             "drawn as usual. The `focus` column says which operators a task's build focused on.", "",
             "| focused operator | tasks holding it | share of the focused tasks | share of all tasks |",
             "|---|---:|---:|---:|"]
    lines += [f"| `{name}` | {n} | {share(n, len(focused))} | {share(n, len(rows))} |" for name, n in counts.items()]
    return lines


def sources_section(sources: list[dict]) -> list[str]:
    """The builds a merged dataset was published from, and what the merge dropped of each."""
    lines = ["The rows of these builds were merged in this order; each build's rows were deduplicated (exact, "
             "near and family-chain duplicates) and decontaminated against the rows kept before them, so every "
             "`id` is unique.", "",
             "| build | command | rows | kept | duplicates dropped | contaminated dropped |",
             "|---|---|---:|---:|---:|---:|"]
    lines += [f"| `{s['run']}` | `{build_command(s['config'])}` | {s['rows']} | {s['kept']} | {s['duplicate']} | "
              f"{s['contaminated']} |" for s in sources]
    return lines


def _composition_prior(config: dict) -> CompositionPrior | None:
    """The build's composition prior (a custom file that is gone since is left out of the card)."""
    try:
        return load_prior(config.get("composition_prior"))
    except (OSError, ValueError, KeyError):
        return None


def precisions_section(default: tuple[str, list[dict], dict], parts: list[tuple[str, list[dict], dict]]) -> list[str]:
    """One line per precision config: its rows, the tolerance its checks used, its candidates, its timings."""
    lines = ["| config | dtype | tasks | candidates | checked at | median eager ms | median compile speed-up |",
             "|---|---|---:|---:|---|---:|---:|"]
    for index, (dtype, rows, stats) in enumerate([default, *parts]):
        tolerance = TOLERANCES[dtype]
        eager = [r["eager_ms"] for r in rows if r.get("eager_ms") is not None]
        speedup = [r["compile_speedup"] for r in rows if r.get("compile_speedup") is not None]
        lines.append(f"| `{'default' if index == 0 else dtype}` | {dtype} | {len(rows)} | {stats.get('candidates', 0)} "
                     f"| {tolerance.text()} | {_median(eager)} | {_median(speedup)} |")
    return [*lines, "", "The funnel, summary and plots below are the default config's. Each precision's tasks are "
            "the same chains rendered in it, checked at its tolerance (" + "; ".join(
                f"{t.dtype}: {t.source}" for t in TOLERANCES.values()) + ")."]


def render_card(rows: list[dict], stats: dict, config: dict, repo_id: str, plots: dict[str, str],
                plot_note: str | None, dataset_info: dict | list[dict] | None = None, extra_configs: list[dict] | None = None,
                baselines: str = "", sources: list[dict] | None = None,
                precisions: list[tuple[str, list[dict], dict]] | None = None) -> DatasetCard:
    """The dataset card: Hub YAML header, then how the data was made, the funnel, summaries, plots, columns.
    `sources` (rows merged from several builds) lists the builds; `config` is then the first one's;
    `precisions` (dtype, rows, stats) are the configs of other precisions."""
    name = repo_id.rstrip("/").split("/")[-1]
    data = card_data(len(rows), name, dataset_info, extra_configs)
    reference = config.get("reference") or "ScalingIntelligence/KernelBench"
    prior = _composition_prior(config)
    composition = config.get("composition", "uniform")
    drawn = {"uniform": "each operator by first drawing its category uniformly",
             "prior": "each next operator from the composition prior (which family real models run after the "
                      "previous one)",
             "mix": f"each next operator {100 * config.get('prior_weight', 0):.0f}% from the composition prior "
                    "(which family real models run after the previous one) and the rest by category uniformly"}
    focus = focus_section(rows, [source["config"] for source in sources] if sources else [config])
    body = [
        f"# {name}", "",
        f"{len(rows)} synthetic GPU-kernel training tasks in KernelBench format (a PyTorch `Model`, `get_inputs`, "
        "`get_init_inputs`), in the style of CUDA-Agent-Ops-6K, built by "
        + (f"opgen from {len(sources)} builds merged into one dataset (see Sources):" if sources else
           "opgen with one command:"), "",
        "```", *(build_command(s["config"]) for s in sources or [{"config": config}]), "```", "",
        "## How it was made", "",
        f"1. **Sampling.** Operator chains of 1-5 torch operators (or one standalone transformers module) are drawn "
        f"from the operator vocabulary with seed {config['seed']} (profile `{config['profile']}`; composition "
        f"`{composition}`: {drawn.get(composition, composition)}), shape-checked as networkx graphs and rendered to "
        "code. Candidate *i* depends only on (seed, *i*)."
        + (" GPU sizes (channels, hidden sizes, heads, sequence lengths, spatial sides) are drawn from the real "
           "models' size tables; the eager-time target is reached by growing the batch within realistic bounds "
           "(images 256, video 32, sequences 64, rows 65,536), then the spatial size or sequence length."
           if config["profile"] == "gpu" else ""),
        "2. **Static filters.** Parse, task shape, unsafe code (I/O, processes, ctypes, ...) and stochastic "
        "operators, by AST.",
        f"3. **Dedup and decontamination.** MinHash-LSH near-duplicates over normalised-token shingles "
        f"(confirmed by exact Jaccard, clusters by connected components), then near duplicates by family chain (same "
        f"operator families in order, same salient parameters, every size within 2x; at most "
        f"{config.get('max_per_chain') or 'unlimited'} tasks per chain); tasks whose operator or family sequence equals "
        f"a KernelBench level 1-3 task's or whose similarity to one is >= {stats.get('contamination_threshold', 0.65)} "
        f"are dropped (reference: `{reference}`).",
        f"4. **Sandboxed execution** on `{config['device']}` in worker processes with time and memory limits: eager, "
        f"`torch.compile` (compiled output within {TOLERANCES[config.get('dtype', DEFAULT_DTYPE)].text()} of eager), "
        "determinism, finite outputs, non-degenerate outputs (not constant, not the same for different inputs), "
        "visible outputs (all zeros, a constant or another input draw's output pass the check on at most 90% of the "
        "output values: the `accept_*_share` columns) and operators that all do work (each one made the identity "
        "changes the output beyond the check's tolerance).",
        "5. **Timing** (CUDA builds only): CUDA-event medians with L2 flush, plus profiler device time as the "
        f"CUDA-Agent environment measures it; eager time must lie in {config['runtime_window_ms'][0]:g}-"
        f"{config['runtime_window_ms'][1]:g} ms.",
        "6. **Selection.** Candidates are drawn in rounds until every data source has its quota of survivors under "
        "the target mix (largest remainder); the dataset is the first survivors by sample index per source.", "",
        *(["## Sources", "", *sources_section(sources), ""] if sources else []),
        *(["## Focus", "", *focus, ""] if focus else []),
        *(["## Precisions", "", *precisions_section((config.get("dtype", DEFAULT_DTYPE), rows, stats), precisions),
           ""] if precisions else []),
        "## Funnel", "", *_funnel_section(stats), "",
        "## Summary", "", *_summary_section(rows, stats), "",
        "## Timing provenance", "", *_provenance_section(rows), "",
        baselines, "",
        *([held_out_section(rows), ""] if any(r.get("held_out_count") is not None for r in rows) else []),
        "## Operator families", "", *families_section(rows, prior), "",
        "## Plots", "",
    ]
    for title, path in plots.items():
        body += [f"### {title}", "", f"![{title}]({path})", ""]
    if plot_note:
        body += [plot_note, ""]
    body += ["## Columns", "", "| column | meaning |", "|---|---|"]
    body += [f"| `{column}` | {note} |" for column, note in COLUMN_DOCS.items()]
    body += ["", "## Loading", "", "```python", "import datasets", "",
             f"tasks = datasets.load_dataset({repo_id!r}, split=\"train\")",
             *(f"tasks_{dtype} = datasets.load_dataset({repo_id!r}, {dtype!r}, split=\"train\")"
               for dtype, _, _ in precisions or []), "```", "",
             "## License", "", "MIT. KernelBench (MIT) is used only as the decontamination reference; none of its "
             "problems are included.", ""]
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body))
