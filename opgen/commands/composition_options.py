"""The composition options `opgen sample` and `opgen build` share: how the sampler draws each next operator, and
which operators every candidate is built around (`--focus`), and the tasks' precision (`--dtype`)."""

from __future__ import annotations

from opgen.sample.composition import COMPOSITIONS, DEFAULT_PRIOR_WEIGHT, Composition
from opgen.taskcode.dtypes import DEFAULT_DTYPE, DTYPES


def add_composition_options(parser) -> None:
    parser.add_argument("--composition", choices=COMPOSITIONS, default="mix",
                        help="how each next operator is drawn: mix (default) = --prior-weight from the prior mined "
                             "from real models, the rest category-uniform exploration; prior; uniform (by category)")
    parser.add_argument("--prior-weight", type=float, default=DEFAULT_PRIOR_WEIGHT,
                        help=f"the prior's share of each draw in mix (0..1, default {DEFAULT_PRIOR_WEIGHT})")
    parser.add_argument("--composition-prior", default=None, metavar="FILE",
                        help="a prior file written by `opgen prior` (default: the one shipped with opgen); its size "
                             "tables also give the gpu profile's sizes")


def composition_of(args) -> Composition:
    """The Composition the parsed options ask for; a bad value is one UsageError line."""
    return Composition(args.composition, args.prior_weight, args.composition_prior)


def add_dtype_option(parser) -> None:
    parser.add_argument("--dtype", choices=DTYPES, default=DEFAULT_DTYPE,
                        help="the tasks' precision: inputs drawn in it and parameters cast to it (default fp32); the "
                             "checks use its tolerance (opgen/taskcode/dtypes.py)")


def add_focus_option(parser) -> None:
    parser.add_argument("--focus", nargs="+", default=[], metavar="NAME",
                        help="build every candidate around one of these operators (torch.nansum) or families (relu); "
                             "`plugins`: every operator the --vocab-plugin files add. The rest of each chain is drawn "
                             "as usual, and the focused operator takes any position in it")
