"""Execute filters: checks that run task code inside a sandbox worker, in the order of STAGES.

The order is cheapest first, and it is a contract: each check reads only TaskRun fields that an earlier
check writes (`reads` / `writes` on each class; a test holds it). Adding a check means one file here and
its place in STAGES.
"""

from __future__ import annotations

from filters.base import Filter
from filters.execute.compile import CompileCheck
from filters.execute.degenerate import DegenerateCheck
from filters.execute.determinism import DeterminismCheck
from filters.execute.eager import EagerCheck
from filters.execute.finite import FiniteCheck
from filters.execute.operator_work import OperatorWorkCheck
from filters.execute.runtime import RuntimeCheck
from filters.execute.trivial import TrivialCheck
from filters.execute.visible import VisibleOutputCheck

STAGES: tuple[Filter, ...] = (EagerCheck(), FiniteCheck(), DeterminismCheck(), DegenerateCheck(), VisibleOutputCheck(),
                              TrivialCheck(), OperatorWorkCheck(), RuntimeCheck(), CompileCheck())
STAGE_NAMES = tuple(check.name for check in STAGES)
