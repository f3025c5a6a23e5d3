"""What decides a build (BuildConfig, stored in config.json), what it returns, and its KernelBench reference."""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from filters.base import Funnel
from filters.dedup.chains import DEFAULT_MAX_PER_CHAIN
from filters.window import DEFAULT_WINDOW_MS
from opgen.errors import UsageError
from opgen.sample.composition import DEFAULT_PRIOR_WEIGHT, Composition
from opgen.sample.sampler import DEFAULT_MIX
from opgen.taskcode.dtypes import DEFAULT_DTYPE, DTYPES
from opgen.vocab.prior import PRIOR_PATH

log = logging.getLogger("opgen.build")


# The build's default cap on tasks per chain of operator families: a share of the dataset, at least
# DEFAULT_MAX_PER_CHAIN. The composition prior makes real patterns (conv -> batch norm) common among candidates;
# this lets a 6,000-task dataset hold 12 genuinely different regimes of one instead of 3.
CHAIN_SHARE = 0.002


def chain_cap(n: int) -> int:
    return max(DEFAULT_MAX_PER_CHAIN, math.ceil(CHAIN_SHARE * n))


@dataclass(frozen=True)
class BuildConfig:
    """Everything that decides the dataset. Executor and worker count are not in it: they change speed only."""

    n: int
    seed: int
    profile: str = "smoke"
    device: str = "cpu"
    reference: str | None = None
    vocab_plugins: tuple[str, ...] = ()
    mix: dict = field(default_factory=lambda: dict(DEFAULT_MIX))
    shard_size: int = 16
    oversample: float = 1.25
    max_rounds: int = 8
    timeout_s: float = 120.0
    memory_mb: int = 4096
    runtime_window_ms: tuple[float, float] = DEFAULT_WINDOW_MS
    trials: int = 100
    warmups: int = 10
    trial_mode: str = "adaptive"
    min_trials: int = 10
    precision: str = "default"
    planning: str = "survival"   # survival: round 0 per source from the shipped prior; rounds: n x oversample
    cpu_timing: bool = False     # a CPU build times its tasks too (on the CPU): the streaming path without a GPU
    max_per_chain: int | None = None   # None: chain_cap(n), a share of the dataset (at least 3)
    composition: str = "mix"     # how each next operator is drawn: mix | prior | uniform (opgen/sample/composition.py)
    prior_weight: float = DEFAULT_PRIOR_WEIGHT
    composition_prior: str | None = None   # a mined prior file (opgen prior); None: the shipped one
    focus: tuple[str, ...] = ()  # operators, families or `plugins` every candidate is built around (`--focus`)
    dtype: str = DEFAULT_DTYPE   # the tasks' precision (`--dtype`: fp32, bf16, fp16)

    def __post_init__(self) -> None:
        self.composition_rule()  # a bad --composition, --prior-weight or --composition-prior is a usage error
        if self.n < 1:
            raise UsageError(f"--n must be at least 1, got {self.n}")
        if self.device not in ("cpu", "cuda"):
            raise UsageError(f"--device must be cpu or cuda, got {self.device!r}")
        if self.shard_size < 1:
            raise UsageError("--shard-size must be at least 1")
        if self.max_per_chain is None:
            object.__setattr__(self, "max_per_chain", chain_cap(self.n))
        if self.max_per_chain < 0:
            raise UsageError(f"--max-per-chain must be 0 (no cap) or more, got {self.max_per_chain}")
        if self.planning not in ("survival", "rounds"):
            raise UsageError(f"--planning must be survival or rounds, got {self.planning!r}")
        for path in self.vocab_plugins:
            if not Path(path).is_file():
                raise UsageError(f"vocabulary plugin not found: {path}")
        object.__setattr__(self, "focus", tuple(self.focus))
        if self.dtype not in DTYPES:
            raise UsageError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")

    def composition_rule(self) -> Composition:
        return Composition(self.composition, self.prior_weight, self.composition_prior)

    @property
    def timing_device(self) -> str | None:
        """Where the timing stage times: cuda on a CUDA build, cpu when `cpu_timing` asks, else no timing."""
        if self.device == "cuda":
            return "cuda"
        return "cpu" if self.cpu_timing else None

    def timing_options(self) -> dict:
        """The TimingOptions fields of this build's timing stage."""
        return {"device": self.timing_device, "trials": self.trials, "warmups": self.warmups, "trial_mode": self.trial_mode,
                "min_trials": self.min_trials, "seed": self.seed, "precision": self.precision,
                "compile_window_ms": tuple(self.runtime_window_ms) if self.timing_device == "cuda" else None}

    def identity(self, reference_hash: str) -> dict:
        """The JSON stored in config.json: the options, plugin contents and the reference corpus hash."""
        data = asdict(self)
        data["vocab_plugins"] = [str(Path(p).resolve()) for p in self.vocab_plugins]
        data["vocab_plugin_sha256"] = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in self.vocab_plugins]
        data["runtime_window_ms"] = list(self.runtime_window_ms)
        data["reference_sha256"] = reference_hash
        prior = Path(self.composition_prior) if self.composition_prior else PRIOR_PATH
        if self.composition_prior:
            data["composition_prior"] = str(prior.resolve())
        data["composition_prior_sha256"] = hashlib.sha256(prior.read_bytes()).hexdigest()
        if self.focus:
            data["focus"] = list(self.focus)
        else:   # an unfocused build's config reads as it did before there was a focus
            del data["focus"]
        if self.dtype == DEFAULT_DTYPE:   # and an fp32 one as before there were precisions
            del data["dtype"]
        return data


@dataclass
class BuildResult:
    """What a finished build produced."""

    run_dir: Path
    tasks: int
    wanted: int
    stats: dict
    funnel: Funnel


def load_reference_index(reference: str | None):
    """The KernelBench index of `reference` (--reference), else of the one rule every command follows
    (`kernels_ref.resolve_reference`)."""
    from kernels_ref import reference_index

    return reference_index(reference)
