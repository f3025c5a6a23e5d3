"""How the sampler orders the operators it tries next: by category (uniform), from the mined prior of real
models, or a mixture of the two (`--composition mix`, the default)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from opgen.errors import UsageError
from opgen.vocab.prior import CompositionPrior, load_prior
from opgen.vocab.spec import OpSpec

COMPOSITIONS = ("mix", "prior", "uniform")
# In `mix`, the share of the next-operator probability that comes from the prior; the rest is category-uniform
# exploration, so every operator keeps a chance at every position. 0.75 puts about 70% of adjacent pairs of
# gpu-profile candidates among pairs real models have (docs/vocabulary.md).
DEFAULT_PRIOR_WEIGHT = 0.75


@dataclass(frozen=True)
class Composition:
    """The next-operator rule: `mode` (mix | prior | uniform), the prior's share in mix, and the prior file
    (None: the one shipped in the package)."""

    mode: str = "mix"
    weight: float = DEFAULT_PRIOR_WEIGHT
    prior_path: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in COMPOSITIONS:
            raise UsageError(f"--composition must be one of {', '.join(COMPOSITIONS)}, got {self.mode!r}")
        if not 0.0 <= self.weight <= 1.0:
            raise UsageError(f"--prior-weight must be between 0 and 1, got {self.weight}")
        if self.prior_path is not None and not Path(self.prior_path).is_file():
            raise UsageError(f"composition prior not found: {self.prior_path}")

    @property
    def prior_share(self) -> float:
        return {"uniform": 0.0, "prior": 1.0}.get(self.mode, self.weight)

    def prior(self) -> CompositionPrior:
        return load_prior(str(Path(self.prior_path).resolve()) if self.prior_path else None)


UNIFORM = Composition("uniform")


def balanced_order(rng: random.Random, options: list[OpSpec], limit: int) -> list[OpSpec]:
    """Up to `limit` operators in random order, each drawn by first picking a category uniformly.

    Uniform over operators would make activations (the largest category) a quarter of all picks.
    """
    by_category: dict[str, list[OpSpec]] = {}
    for spec in options:
        by_category.setdefault(spec.category, []).append(spec)
    order: list[OpSpec] = []
    while by_category and len(order) < limit:
        category = rng.choice(sorted(by_category))
        group = by_category[category]
        order.append(group.pop(rng.randrange(len(group))))
        if not group:
            del by_category[category]
    return order


def category_uniform(options: list[OpSpec]) -> list[float]:
    """Each option's probability under `balanced_order`'s first pick: 1 / categories / its category's size."""
    sizes: dict[str, int] = {}
    for spec in options:
        sizes[spec.category] = sizes.get(spec.category, 0) + 1
    return [1.0 / len(sizes) / sizes[spec.category] for spec in options]


def prior_probabilities(options: list[OpSpec], prior: CompositionPrior, previous: str | None) -> list[float]:
    """Each option's probability under the prior: its family's chance of following `previous`, renormalised over
    the families among the options and shared evenly by a family's spellings (`nn.ReLU`, `F.relu`, ...)."""
    wanted = prior.next_families(previous)
    spellings: dict[str, int] = {}
    for spec in options:
        spellings[spec.family] = spellings.get(spec.family, 0) + 1
    mass = sum(wanted.get(family, 0.0) for family in spellings)
    if mass <= 0:
        return [0.0] * len(options)
    return [wanted.get(spec.family, 0.0) / mass / spellings[spec.family] for spec in options]


def draw_order(rng: random.Random, options: list[OpSpec], limit: int, previous: str | None,
               composition: Composition) -> list[OpSpec]:
    """Up to `limit` operators to try, most likely first, drawn without replacement from the composition's
    mixture (uniform: exactly `balanced_order`). `previous` is the family of the operator before (None: first)."""
    share = composition.prior_share
    if share == 0.0 or not options:
        return balanced_order(rng, options, limit)
    prior = prior_probabilities(options, composition.prior(), previous)
    if not any(prior):  # nothing here that real models use after `previous`
        return balanced_order(rng, options, limit)
    uniform = category_uniform(options)
    weights = [share * p + (1.0 - share) * u for p, u in zip(prior, uniform)]
    # Efraimidis-Spirakis: the largest u^(1/w) keys are a weighted sample without replacement.
    keyed = sorted(((math.log(rng.random() or 1e-300) / w, i) for i, w in enumerate(weights) if w > 0), reverse=True)
    order = [options[i] for _, i in keyed[:limit]]
    if len(order) < limit:  # pure prior: the operators it never names come after, by category
        rest = [spec for spec, w in zip(options, weights) if w == 0]
        order += balanced_order(rng, rest, limit - len(order))
    return order
