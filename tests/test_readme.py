"""The README's worked example works: the filter of "Adding a filter" runs in the chain and rejects what it says."""

from __future__ import annotations

import re
from pathlib import Path

from filters.base import Funnel, judge
from filters.static import STATIC_FILTERS

README = Path(__file__).resolve().parents[1] / "README.md"
TASK = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        {body}
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 4)]

def get_init_inputs():
    return []
"""


def readme_filter():
    section = README.read_text().split("## Adding a filter", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)
    return namespace["HostSyncFilter"]()


def test_the_readme_filter_joins_the_chain_and_counts_into_the_funnel():
    chain = (*STATIC_FILTERS, readme_filter())
    funnel = Funnel()
    syncing = judge({"code": TASK.format(body="x = x * x.sum().item()")}, chain, funnel)
    honest = judge({"code": TASK.format(body="x = x * 2")}, chain, funnel)
    assert (syncing.keep, syncing.reason, syncing.stage) == (False, "invalid_task", "host_sync")
    assert honest.keep and honest.stage == "host_sync"
    assert funnel.stages["host_sync"].seen == 2 and funnel.stages["host_sync"].rejected["invalid_task"] == 1
