# task: named_outputs
# expect: ok
# hardened
# The task's outputs, with the dict's keys in another order: a dict is read by its keys.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, a, b):
        return {"product": torch.mul(a, b), "sum": torch.add(a, b)}
