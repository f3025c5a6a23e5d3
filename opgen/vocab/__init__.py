"""The operator vocabulary: built-in specs plus plugin files and `opgen.vocab` entry points, checked at load."""

from __future__ import annotations

import dataclasses
import importlib.util
import random
from collections.abc import Iterable, Sequence
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from opgen.vocab.builders import default_input
from opgen.vocab.profiles import SMOKE
from opgen.vocab.spec import OpSpec, VocabError, check_draw, check_spec

BUILTIN_MODULES = ("opgen.vocab.torch_ops", "opgen.vocab.hf_ops")
ENTRY_POINT_GROUP = "opgen.vocab"


class Vocabulary:
    """An ordered, name-keyed set of operator specs."""

    def __init__(self, specs: Iterable[OpSpec]):
        self.specs: dict[str, OpSpec] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: OpSpec) -> None:
        if not isinstance(spec, OpSpec):
            raise VocabError(f"vocabulary entry {spec!r} is not an OpSpec")
        check_spec(spec)
        if spec.name in self.specs:
            raise VocabError(
                f"operator {spec.name!r} ({spec.defined_in}): field 'name' is already defined by "
                f"{self.specs[spec.name].defined_in}"
            )
        _check_draws(spec)
        self.specs[spec.name] = spec

    def __getitem__(self, name: str) -> OpSpec:
        return self.specs[name]

    def __contains__(self, name: str) -> bool:
        return name in self.specs

    def __len__(self) -> int:
        return len(self.specs)

    def __iter__(self):
        return iter(self.specs.values())

    def without(self, names: Iterable[str]) -> Vocabulary:
        """The same vocabulary less the named operators (already checked: no draw is run again)."""
        left = Vocabulary(())
        dropped = set(names)
        left.specs = {name: spec for name, spec in self.specs.items() if name not in dropped}
        return left

    @property
    def chain_ops(self) -> list[OpSpec]:
        """Operators that compose into torch chains."""
        return [s for s in self.specs.values() if not s.standalone]

    @property
    def standalone_ops(self) -> list[OpSpec]:
        """Operators that form tasks of their own (transformers classes)."""
        return [s for s in self.specs.values() if s.standalone]


def _check_draws(spec: OpSpec) -> None:
    """Fill the templates once at smoke sizes so a wrong spec fails at load time, not mid-run."""
    rng = random.Random(f"check:{spec.name}")
    for _ in range(20):
        if spec.make_input is not None:
            shape, _ = spec.make_input(rng, SMOKE)
        else:
            shape, _ = default_input(rng, SMOKE, rng.choice(spec.ranks))
        try:
            if check_draw(spec, SMOKE, rng, shape) is not None:
                return
        except VocabError:
            raise
        except Exception as error:  # a user's draw function raising is a spec error too
            raise VocabError(f"operator {spec.name!r} ({spec.defined_in}): field 'draw' raised {error!r}") from None
    raise VocabError(f"operator {spec.name!r} ({spec.defined_in}): field 'draw' never accepts a smoke-size input")


def _specs_from_object(obj, origin: str) -> list[OpSpec]:
    """A module/entry-point object gives specs via `SPECS`, a list, or a callable returning a list."""
    if hasattr(obj, "SPECS"):
        obj = obj.SPECS
    elif callable(obj) and not isinstance(obj, OpSpec):
        obj = obj()
    if isinstance(obj, OpSpec):
        obj = [obj]
    if not isinstance(obj, (list, tuple)):
        raise VocabError(f"{origin}: expected SPECS, a list of OpSpec, or a function returning one")
    return [dataclasses.replace(spec, defined_in=origin) if isinstance(spec, OpSpec) else spec for spec in obj]


def load_plugin_file(path: str | Path) -> list[OpSpec]:
    """Specs from a plugin file defining `SPECS = [OpSpec(...), ...]`."""
    path = Path(path)
    if not path.is_file():
        raise VocabError(f"vocabulary plugin not found: {path}")
    module_spec = importlib.util.spec_from_file_location(f"opgen_plugin_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    try:
        module_spec.loader.exec_module(module)
    except Exception as error:
        raise VocabError(f"vocabulary plugin {path}: failed to import: {error!r}") from None
    if not hasattr(module, "SPECS"):
        raise VocabError(f"vocabulary plugin {path}: defines no SPECS list")
    return _specs_from_object(module, str(path))


def _entry_point_specs() -> list[OpSpec]:
    specs: list[OpSpec] = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = entry.load()
        except Exception as error:
            raise VocabError(f"entry point {entry.name!r} ({entry.value}): failed to load: {error!r}") from None
        specs.extend(_specs_from_object(obj, f"entry point {entry.value}"))
    return specs


def load_vocabulary(plugins: Sequence[str | Path] = (), *, entry_points: bool = True) -> Vocabulary:
    """The built-in operators, then entry-point operators, then plugin files, all checked."""
    specs: list[OpSpec] = []
    for module_name in BUILTIN_MODULES:
        module = importlib.import_module(module_name)
        specs.extend(_specs_from_object(module, module_name))
    if entry_points:
        specs.extend(_entry_point_specs())
    for plugin in plugins:
        specs.extend(load_plugin_file(plugin))
    return Vocabulary(specs)


@lru_cache(maxsize=8)
def cached_vocabulary(plugins: tuple[str, ...] = ()) -> Vocabulary:
    """Load once per process and plugin set (workers call this)."""
    return load_vocabulary(plugins)


__all__ = ["OpSpec", "Vocabulary", "VocabError", "load_vocabulary", "cached_vocabulary", "load_plugin_file"]
