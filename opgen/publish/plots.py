"""The dataset card's PNG plots: the data_source mix, operator frequencies, eager time and compile speed-up."""

from __future__ import annotations

from collections import Counter
from pathlib import Path


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
