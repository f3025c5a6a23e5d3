"""Known-good tasks are kept: KernelBench level 2, as level 1 in test_validate_kernelbench.py (a module of its own,
so `make test`'s two workers validate the two levels side by side)."""

from __future__ import annotations

import pytest

from tests.test_validate_kernelbench import check_level


@pytest.mark.heavy
def test_kernelbench_level_2_is_kept_apart_from_named_exceptions(kernelbench_problems):
    check_level(kernelbench_problems, 2)
