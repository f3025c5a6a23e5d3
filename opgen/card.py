"""The dataset card (README.md with a Hub YAML header) and its PNG plots, from a build's tasks and stats."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

from huggingface_hub import DatasetCard, DatasetCardData

from filters.decontam import CONTAMINATION_THRESHOLD
from filters.funnel import Funnel

COLUMN_NOTES = {
    "code": "the task source (KernelBench format: Model, get_inputs, get_init_inputs)",
    "ops": "canonical operator names from the code's AST, in call order",
    "data_source": "`torch#k` (k composed torch operators) or `transformers`",
    "id": "`ops-` + first 16 hex digits of sha256(code)",
    "num_ops": "len(ops)",
    "seed": "the sampler seed",
    "graph": "the sampled operator graph with its parameters (JSON, networkx node-link)",
    "input_shapes": "shapes of get_inputs() tensors",
    "output_shape": "shape of the forward output",
    "flops": "floating-point operations per forward call (counted with torch.utils.flop_counter)",
    "bytes_moved": "bytes read and written per forward call",
    "kb_nearest": "closest KernelBench problem",
    "kb_similarity": (f"its normalised-token shingle similarity (rejected at >= {CONTAMINATION_THRESHOLD}, or an "
                      "equal operator sequence)"),
    "eager_ms": "median CUDA-event time of one eager forward call",
    "compile_ms": "the same under torch.compile (default mode)",
    "eager_ms_iqr": "interquartile range of the eager samples",
    "compile_ms_iqr": "interquartile range of the compiled samples",
    "eager_device_us": "profiler device time per call (5 warm-ups, 10 iterations), eager",
    "compile_device_us": "the same, compiled",
    "compile_speedup": "eager_ms / compile_ms",
    "hardware": "GPU the timings were taken on",
    "torch_version": "torch version of the timings",
    "cuda_version": "CUDA version of the timings",
}


def size_category(n: int) -> str:
    """The Hub's size_categories bucket for `n` rows."""
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                         (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M")):
        if n < limit:
            return label
    return "n>1T" if n > 10**12 else "10M<n<100M"


def dataset_info_yaml(table, download_size: int) -> dict:
    """The card's `dataset_info` as push_to_hub writes it (features and split sizes).

    `datasets` also keys its cache of a local folder on this, so loading a rebuilt folder (or another
    folder of the same name) gives its own rows, not cached ones.
    """
    from datasets import DatasetInfo, Features, SplitDict, SplitInfo

    info = DatasetInfo(features=Features.from_arrow_schema(table.schema))
    info.splits = SplitDict()
    info.splits.add(SplitInfo(name="train", num_bytes=table.nbytes, num_examples=table.num_rows))
    info.download_size, info.dataset_size = download_size, table.nbytes
    return info._to_yaml_dict()


def card_data(n_rows: int, pretty_name: str, dataset_info: dict | None = None) -> DatasetCardData:
    return DatasetCardData(
        license="mit", language=["en"], pretty_name=pretty_name, size_categories=[size_category(n_rows)],
        task_categories=["text-generation"], tags=["code", "pytorch", "cuda", "gpu-kernels", "synthetic",
                                                    "kernelbench", "torch-compile"],
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": "data/train-*"}]}],
        **({"dataset_info": dataset_info} if dataset_info else {}),
    )


def _plot(path: Path, draw) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4), dpi=100)
    draw(axes)
    figure.tight_layout()
    figure.savefig(path, format="png")
    plt.close(figure)


def write_plots(rows: list[dict], mix: dict[str, float], folder: Path) -> tuple[dict[str, str], str | None]:
    """PNG plots under folder/plots; returns {title: relative path} and a note when timing plots are skipped."""
    plots_dir = folder / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    plots: dict[str, str] = {}
    sources = sorted(set(mix) | {r["data_source"] for r in rows})
    counts = Counter(r["data_source"] for r in rows)
    total = max(1, len(rows))

    def mix_plot(axes) -> None:
        x = range(len(sources))
        axes.bar([i - 0.2 for i in x], [100 * counts[s] / total for s in sources], width=0.4, label="this dataset")
        axes.bar([i + 0.2 for i in x], [100 * mix.get(s, 0) / max(1e-12, sum(mix.values())) for s in sources],
                 width=0.4, label="target mix")
        axes.set_xticks(list(x), sources)
        axes.set_ylabel("% of tasks")
        axes.set_title("Operator mix (data_source)")
        axes.legend()

    _plot(plots_dir / "data_source_mix.png", mix_plot)
    plots["Operator mix (data_source)"] = "plots/data_source_mix.png"

    frequency = Counter(op for r in rows for op in r["ops"]).most_common(25)

    def ops_plot(axes) -> None:
        names = [name for name, _ in reversed(frequency)]
        axes.barh(names, [n for _, n in reversed(frequency)])
        axes.set_xlabel("tasks using the operator")
        axes.set_title(f"Operator frequencies (top {len(frequency)})")
        axes.tick_params(axis="y", labelsize=7)

    _plot(plots_dir / "operator_frequency.png", ops_plot)
    plots["Operator frequencies"] = "plots/operator_frequency.png"

    eager = [r["eager_ms"] for r in rows if r.get("eager_ms")]
    speedup = [r["compile_speedup"] for r in rows if r.get("compile_speedup")]
    if not eager:
        return plots, ("Timing plots skipped: these tasks were not timed on CUDA, so the timing columns are null "
                       "(build with `--device cuda` to fill them).")

    def eager_plot(axes) -> None:
        import numpy as np

        bins = np.logspace(np.log10(min(eager)), np.log10(max(eager)) + 1e-9, 30)
        axes.hist(eager, bins=bins)
        axes.set_xscale("log")
        axes.set_xlabel("eager median time per forward call (ms)")
        axes.set_ylabel("tasks")
        axes.set_title("Eager time")

    _plot(plots_dir / "eager_ms.png", eager_plot)
    plots["Eager time distribution"] = "plots/eager_ms.png"
    if speedup:
        def speedup_plot(axes) -> None:
            axes.hist(speedup, bins=30)
            axes.axvline(1.0, color="black", linewidth=1)
            axes.set_xlabel("torch.compile speed-up over eager (eager_ms / compile_ms)")
            axes.set_ylabel("tasks")
            axes.set_title("Compile speed-up")

        _plot(plots_dir / "compile_speedup.png", speedup_plot)
        plots["Compile speed-up distribution"] = "plots/compile_speedup.png"
    return plots, None


def _median(values: list[float]) -> str:
    return f"{statistics.median(values):.4g}" if values else "n/a"


def _funnel_section(stats: dict) -> list[str]:
    funnel = Funnel.from_dict(stats["funnel"])
    lines = ["| stage | seen | kept | rejected | reasons |", "|---|---:|---:|---:|---|"]
    for name, count in funnel.stages.items():
        if count.seen == 0:
            continue
        reasons = ", ".join(f"`{r}` {n}" for r, n in count.rejected.most_common()) or "-"
        lines.append(f"| {name} | {count.seen} | {count.kept} | {sum(count.rejected.values())} | {reasons} |")
    lines += ["", f"Candidates: {stats['candidates']}; survived every filter: {stats['survivors']}; "
              f"in the dataset: {stats['tasks']} (surplus survivors beyond the per-source quota: {stats['surplus']}).",
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


def render_card(rows: list[dict], stats: dict, config: dict, repo_id: str, plots: dict[str, str],
                plot_note: str | None, dataset_info: dict | None = None) -> DatasetCard:
    """The dataset card: Hub YAML header, then how the data was made, the funnel, summaries, plots, columns."""
    name = repo_id.rstrip("/").split("/")[-1]
    data = card_data(len(rows), name, dataset_info)
    reference = config.get("reference") or "ScalingIntelligence/KernelBench"
    body = [
        f"# {name}", "",
        f"{len(rows)} synthetic GPU-kernel training tasks in KernelBench format (a PyTorch `Model`, `get_inputs`, "
        "`get_init_inputs`), in the style of CUDA-Agent-Ops-6K, built by "
        "opgen with one command:", "",
        "```", f"opgen build --n {config['n']} --seed {config['seed']} --profile {config['profile']} "
        f"--device {config['device']}", "```", "",
        "## How it was made", "",
        f"1. **Sampling.** Operator chains of 1-5 torch operators (or one standalone transformers module) are drawn "
        f"from the operator vocabulary with seed {config['seed']} (profile `{config['profile']}`), shape-checked as "
        "networkx graphs and rendered to code. Candidate *i* depends only on (seed, *i*).",
        "2. **Static filters.** Parse, task shape, unsafe code (I/O, processes, ctypes, ...) and stochastic "
        "operators, by AST.",
        f"3. **Dedup and decontamination.** MinHash-LSH near-duplicates over normalised-token shingles "
        f"(confirmed by exact Jaccard, clusters by connected components); tasks whose operator sequence equals a "
        f"KernelBench task's or whose similarity to one is >= {CONTAMINATION_THRESHOLD} are dropped (reference: `{reference}`).",
        f"4. **Sandboxed execution** on `{config['device']}` in worker processes with time and memory limits: eager, "
        "`torch.compile` (compiled output within atol=rtol=1e-2 of eager), determinism, finite outputs, "
        "non-degenerate outputs (not constant, not the same for different inputs).",
        "5. **Timing** (CUDA builds only): CUDA-event medians with L2 flush, plus profiler device time as the "
        f"CUDA-Agent environment measures it; eager time must lie in {config['runtime_window_ms'][0]:g}-"
        f"{config['runtime_window_ms'][1]:g} ms.",
        "6. **Selection.** Candidates are drawn in rounds until every data source has its quota of survivors under "
        "the target mix (largest remainder); the dataset is the first survivors by sample index per source.", "",
        "## Funnel", "", *_funnel_section(stats), "",
        "## Summary", "", *_summary_section(rows, stats), "",
        "## Plots", "",
    ]
    for title, path in plots.items():
        body += [f"### {title}", "", f"![{title}]({path})", ""]
    if plot_note:
        body += [plot_note, ""]
    body += ["## Columns", "", "| column | meaning |", "|---|---|"]
    body += [f"| `{column}` | {note} |" for column, note in COLUMN_NOTES.items()]
    body += ["", "## Loading", "", "```python", "import datasets", "",
             f"tasks = datasets.load_dataset({repo_id!r}, split=\"train\")", "```", "",
             "## License", "", "MIT. KernelBench (MIT) is used only as the decontamination reference; none of its "
             "problems are included.", ""]
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(body))
