"""The operator spec: what an operator accepts, how its parameters are drawn, and how it is written."""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, field

Shape = tuple[int, ...]
Params = dict[str, object]

CATEGORIES = (
    "gemm", "conv", "norm", "activation", "pooling", "reduction", "elementwise", "shape", "attention",
    "recurrent", "distance", "loss", "embedding", "transformers",
)
ALL_RANKS = (1, 2, 3, 4, 5)
FAMILY_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")
# Mixed-case acronyms that a CamelCase split would tear apart (`ReLU` -> `re_lu`).
_ACRONYMS = (("PReLU", "Prelu"), ("ReLU", "Relu"), ("SiLU", "Silu"))
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def default_family(name: str) -> str:
    """The family a name gets when nothing says otherwise: its last dotted part in snake case, an in-place `_`
    dropped (`nn.LeakyReLU`, `F.leaky_relu` -> `leaky_relu`; `nn.LSTMCell` -> `lstm_cell`)."""
    base = name.rsplit(".", 1)[-1]
    if base.endswith("_") and not base.startswith("_"):
        base = base.rstrip("_")
    for acronym, word in _ACRONYMS:
        base = base.replace(acronym, word)
    snake = re.sub(r"_+", "_", _CAMEL_BOUNDARY.sub("_", base).lower()).strip("_")
    return snake or "op"


@dataclass(frozen=True)
class Sizes:
    """Dimension choices of a size profile; the sampler draws every size from these lists."""

    name: str
    batch: tuple[int, ...]
    channels: tuple[int, ...]
    features: tuple[int, ...]
    length: tuple[int, ...]       # 1d spatial / sequence length
    spatial: tuple[int, ...]      # 2d height and width
    volume: tuple[int, ...]       # 3d depth, height and width
    heads: tuple[int, ...]
    max_numel: int                # no intermediate tensor may hold more elements than this
    # (kind, weights) pairs: a kind listed here is drawn with these weights (one per value), others uniformly
    weights: tuple[tuple[str, tuple[float, ...]], ...] = ()

    def pick(self, rng: random.Random, kind: str) -> int:
        for weighted, weights in self.weights:
            if weighted == kind:
                return rng.choices(getattr(self, kind), weights=weights)[0]
        return rng.choice(getattr(self, kind))


@dataclass(frozen=True)
class Extra:
    """An additional model input the operator needs (second matmul operand, loss target, ...)."""

    name: str
    shape: Shape
    dtype: str = "float"          # float (randn) | positive (rand) | long (randint) | prob (softmax of randn)
    high: int = 2                 # exclusive upper bound for long inputs
    dim_names: tuple[str | None, ...] = ()


DrawFn = Callable[[random.Random, Shape, Sizes], "Params | None"]
ShapeFn = Callable[[Shape, Params], Shape]
ExtrasFn = Callable[[Shape, Params], "list[Extra]"]
InputFn = Callable[[random.Random, Sizes], "tuple[Shape, tuple[str, ...]]"]
AcceptsFn = Callable[[Shape, Params], bool]


def _no_params(rng: random.Random, shape: Shape, sizes: Sizes) -> Params:
    return {}


def _same_shape(shape: Shape, params: Params) -> Shape:
    return shape


@dataclass(frozen=True)
class OpSpec:
    """One operator of the vocabulary.

    Templates use `{x}` (the current tensor), `{self}` (this op's attribute, `self.<attr>`), the names of
    extra inputs, the names of `helpers`, and parameter names. `helpers` are `(name, template)` pairs built
    in `__init__` before `module`, each stored as its own attribute that `{name}` refers to (a shared config
    object, the rotary embedding an attention block needs). `setup` templates are statements run in `__init__`
    right after `module` is built (a batch norm's running statistics, which at their defaults make it the
    identity in eval mode). A parameter listed in `args` becomes a
    `Model.__init__` argument and a module-level size constant (stored as `self.<name>` when a forward
    template uses it); any other parameter is written as a literal. By convention dim 0 of every tensor is
    the batch dimension and parameters never depend on it, so a profile can rescale the batch afterwards.
    `family` is the canonical operator family that synonyms share (`nn.ReLU`, `F.relu`, `torch.relu` -> `relu`);
    left empty it is derived from the name (`default_family`). `accepts`, when given, says whether the operator
    with its drawn parameters still makes a task worth having on an input of another shape (a softmax's row no
    longer than the check can see): the gpu profile's sizing, which grows inputs after the draw, keeps to it.
    """

    name: str
    category: str
    phrase: str
    ranks: tuple[int, ...] = ALL_RANKS
    draw: DrawFn = _no_params
    out_shape: ShapeFn = _same_shape
    module: str | None = None
    call: str = "{self}({x})"
    args: tuple[str, ...] = ()
    extras: ExtrasFn | None = None
    attr: str | None = None
    make_input: InputFn | None = None
    input_dtype: str = "float"
    first_only: bool = False
    last_only: bool = False
    standalone: bool = False
    imports: tuple[str, ...] = ()
    helpers: tuple[tuple[str, str], ...] = ()
    setup: tuple[str, ...] = ()
    family: str = ""
    accepts: AcceptsFn | None = None
    defined_in: str = field(default="opgen", compare=False)

    def __post_init__(self) -> None:
        if not self.family and isinstance(self.name, str) and self.name:
            object.__setattr__(self, "family", default_family(self.name))

    @property
    def is_module(self) -> bool:
        return self.module is not None

    @property
    def attr_name(self) -> str:
        if self.attr:
            return self.attr
        base = self.name.rsplit(".", 1)[-1]
        snake = "".join("_" + c.lower() if c.isupper() else c for c in base).lstrip("_")
        return snake.replace("__", "_")


class VocabError(ValueError):
    """A malformed operator spec; the message names the operator and the field."""


def _template_fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


def check_spec(spec: OpSpec) -> None:
    """Validate a spec's fields at load time, raising VocabError that names the operator and the field."""
    where = f"operator {spec.name!r}" if isinstance(spec.name, str) and spec.name else "operator <unnamed>"

    def fail(field_name: str, why: str) -> None:
        raise VocabError(f"{where} ({spec.defined_in}): field '{field_name}' {why}")

    if not isinstance(spec.name, str) or not spec.name or " " in spec.name:
        fail("name", "must be a canonical dotted name such as 'nn.Conv2d' or 'torch.cumsum'")
    if not spec.name.startswith(("nn.", "torch.", "F.", "transformers.")):
        fail("name", "must start with nn., torch., F. or transformers.")
    if not isinstance(spec.family, str) or not FAMILY_PATTERN.match(spec.family):
        fail("family", f"must be a lower-case snake_case name such as 'relu' or 'matmul', got {spec.family!r}")
    if spec.category not in CATEGORIES:
        fail("category", f"must be one of {', '.join(CATEGORIES)}, got {spec.category!r}")
    if not spec.phrase or not isinstance(spec.phrase, str):
        fail("phrase", "must be a non-empty description such as 'applies a 2D convolution'")
    if not spec.ranks or any(r not in ALL_RANKS for r in spec.ranks):
        fail("ranks", f"must be a non-empty tuple of ranks from {ALL_RANKS}")
    for fn_field in ("draw", "out_shape"):
        if not callable(getattr(spec, fn_field)):
            fail(fn_field, "must be callable")
    if spec.extras is not None and not callable(spec.extras):
        fail("extras", "must be callable or None")
    if spec.make_input is not None and not callable(spec.make_input):
        fail("make_input", "must be callable or None")
    if spec.accepts is not None and not callable(spec.accepts):
        fail("accepts", "must be callable or None")
    if spec.module is not None and not isinstance(spec.module, str):
        fail("module", "must be a construction template string or None")
    if not isinstance(spec.call, str) or "{x}" not in spec.call:
        fail("call", "must be a template string that uses {x}")
    if "{self}" in spec.call and spec.module is None:
        fail("call", "uses {self} but the operator has no 'module' template")
    for helper in spec.helpers:
        if not (isinstance(helper, tuple) and len(helper) == 2 and all(isinstance(h, str) for h in helper)
                and helper[0].isidentifier() and helper[0] not in ("x", "self")):
            fail("helpers", f"must be (name, template) pairs with an identifier name, got {helper!r}")
    if spec.input_dtype not in ("float", "long"):
        fail("input_dtype", "must be 'float' or 'long'")
    if spec.name.startswith("transformers.") and not spec.standalone:
        fail("standalone", "must be True for transformers classes (they are tasks of their own)")
    for imp in spec.imports:
        if not imp.startswith(("import torch", "from torch", "import transformers", "from transformers", "import math")):
            fail("imports", f"may only import torch, math or transformers, got {imp!r}")


def check_draw(spec: OpSpec, sizes: Sizes, rng: random.Random, shape: Shape) -> Params | None:
    """Draw parameters once and check the templates can be filled; errors name the operator and field."""
    where = f"operator {spec.name!r} ({spec.defined_in})"
    params = spec.draw(rng, shape, sizes)
    if params is None:
        return None
    if not isinstance(params, dict):
        raise VocabError(f"{where}: field 'draw' must return a dict of parameters or None")
    known = set(params) | {"x", "self"}
    extras = spec.extras(shape, params) if spec.extras else []
    known |= {extra.name for extra in extras}
    known |= {name for name, _ in spec.helpers}
    templates = [("module", spec.module), ("call", spec.call), *(("helpers", t) for _, t in spec.helpers),
                 *(("setup", t) for t in spec.setup)]
    for field_name, template in templates:
        if template is None:
            continue
        missing = _template_fields(template) - known
        if missing:
            raise VocabError(f"{where}: field '{field_name}' uses {sorted(missing)} which 'draw' does not provide")
    for arg in spec.args:
        if arg not in params:
            raise VocabError(f"{where}: field 'args' names {arg!r} which 'draw' does not provide")
    out = spec.out_shape(shape, params)
    if not isinstance(out, tuple) or not all(isinstance(d, int) and d > 0 for d in out):
        raise VocabError(f"{where}: field 'out_shape' must return a tuple of positive ints, got {out!r}")
    return params
