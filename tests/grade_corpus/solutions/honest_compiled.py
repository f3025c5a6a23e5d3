# task: linear_gelu
# expect: ok
# The reference under torch.compile.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)
        self.fused = torch.compile(self._forward)

    def _forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))

    def forward(self, x):
        return self.fused(x)
