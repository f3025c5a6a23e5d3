"""Candidate held-out configurations of a task, screened for shape errors on the meta device (no memory, no
kernels): which free sizes can vary, and configurations of them to validate."""

from __future__ import annotations

import warnings

import torch

from opgen.taskcode.sizes import NoHeldOutSizes, free_sizes, held_out_value, scaled_configs

SCREEN_SCALE = 0.5   # the scale each free size is first tried at, on its own


class MetaScreen:
    """The task's forward run on the meta device at a configuration: shapes only. `blind` when the meta device
    cannot run the task even at its timed sizes (data-dependent operators): every configuration then passes the
    screen, and only validation decides."""

    def __init__(self, code: str):
        self.namespace: dict = {"__name__": "opgen_task"}
        exec(compile(code, "<task>", "exec"), self.namespace)  # noqa: S102 - inside the sandbox worker
        self.model = None
        try:
            with torch.device("meta"):
                torch.manual_seed(0)
                self.model = self.namespace["Model"](*self.namespace["get_init_inputs"]()).eval()
        except Exception:  # noqa: BLE001 - a model the meta device cannot build: screen nothing
            self.model = None
        self.blind = self.model is None or not self._forward({})

    def runs(self, sizes: dict[str, int]) -> bool:
        return self.blind or self._forward(sizes)

    def _forward(self, sizes: dict[str, int]) -> bool:
        saved = {name: self.namespace[name] for name in sizes}
        self.namespace.update(sizes)
        try:
            with torch.device("meta"), torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.model(*self.namespace["get_inputs"]())
            return True
        except Exception:  # noqa: BLE001 - a shape error (or anything else) at these sizes
            return False
        finally:
            self.namespace.update(saved)


def candidate_configs(code: str, limit: int) -> list[dict[str, int]]:
    """Up to `limit` configurations to validate, best first. Each free size is first varied on its own: odd if
    the forward takes it, else kept divisible as timed, else not varied at all; then configurations of those
    that vary, each screened as a whole; failing those, configurations of every free size together, then of all
    but one. Raises NoHeldOutSizes saying why there are none."""
    free = free_sizes(code)
    screen = MetaScreen(code)
    varying, aligned = {}, set()
    for name, value in free.items():
        if screen.runs({name: held_out_value(value, SCREEN_SCALE)}):
            varying[name] = value
        elif held_out_value(value, SCREEN_SCALE, aligned=True) != value and \
                screen.runs({name: held_out_value(value, SCREEN_SCALE, aligned=True)}):
            varying[name] = value
            aligned.add(name)
    configs = [config for config in scaled_configs(varying, aligned=frozenset(aligned)) if screen.runs(config)]
    if not configs:   # sizes that only change together (one size for several dimensions that must match)
        for together in [free, *({k: v for k, v in free.items() if k != name} for name in free)]:
            configs = [config for config in scaled_configs(together) if together and screen.runs(config)]
            if configs:
                break
    if not configs:
        raise NoHeldOutSizes(f"no configuration of the free sizes ({', '.join(free)}) passes the forward's shapes, "
                             f"alone or together")
    return configs[:limit]
