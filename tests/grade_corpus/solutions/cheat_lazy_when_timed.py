# task: linear_gelu
# expect: mismatch_after_timing
# Honest for the first five calls (the correctness draws), then returns its last output without computing.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        if self.calls <= 5:
            self.last = torch.nn.functional.gelu(self.linear(x))
        return self.last
