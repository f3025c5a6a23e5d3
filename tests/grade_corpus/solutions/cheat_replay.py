# task: linear_gelu
# expect: mismatch
# Computes once, then replays that output on every later call.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)
        self.stored = None

    def forward(self, x):
        if self.stored is None:
            self.stored = torch.nn.functional.gelu(self.linear(x))
        return self.stored.clone()
