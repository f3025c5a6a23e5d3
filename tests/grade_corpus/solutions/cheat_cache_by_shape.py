# task: linear_gelu
# expect: mismatch
# One output cached per input shape: right at the first draw of each size, stale after.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)
        self.cache = {}

    def forward(self, x):
        key = tuple(x.shape)
        if key not in self.cache:
            self.cache[key] = torch.nn.functional.gelu(self.linear(x))
        return self.cache[key]
