"""The composition prior shipped with the package: how often real models use each operator family, which family
follows which (data-flow pairs), and the sizes they run at. `opgen prior` mines it (opgen/mining)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PRIOR_PATH = Path(__file__).with_name("composition_prior.json")


@dataclass(frozen=True)
class CompositionPrior:
    """Family shares, next-family probabilities and size tables of the models in `models`."""

    families: dict[str, float]                   # share of all operator uses (every model weighs the same)
    transitions: dict[str, dict[str, float]]     # family -> {next family: probability}
    pairs: dict[str, float]                      # "a -> b" -> share of all data-flow pairs
    sizes: dict[str, dict[int, float]]           # size kind -> {value: share}
    models: tuple[str, ...]
    libraries: dict[str, str | None]

    def next_families(self, previous: str | None) -> dict[str, float]:
        """Probabilities of the family that follows `previous` (the family shares when nothing precedes it, or
        when real models never showed `previous`)."""
        if previous is None:
            return self.families
        return self.transitions.get(previous) or self.families

    def has_pair(self, first: str, second: str) -> bool:
        return f"{first} -> {second}" in self.pairs

    def size_table(self, kind: str) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """(values, weights) of one size kind (channels, features, heads, length, spatial, volume), by value."""
        table = self.sizes.get(kind, {})
        values = tuple(sorted(table))
        return values, tuple(table[v] for v in values)


def prior_from_json(data: dict) -> CompositionPrior:
    return CompositionPrior(
        families=dict(data["families"]), transitions={k: dict(v) for k, v in data["transitions"].items()},
        pairs=dict(data["pairs"]), sizes={kind: {int(v): w for v, w in table.items()}
                                          for kind, table in data["sizes"].items()},
        models=tuple(data.get("models", {})), libraries=dict(data.get("libraries", {})))


@lru_cache(maxsize=4)
def load_prior(path: str | None = None) -> CompositionPrior:
    """The shipped prior (or the one at `path`), read once per process."""
    return prior_from_json(json.loads(Path(path or PRIOR_PATH).read_text(encoding="utf-8")))
