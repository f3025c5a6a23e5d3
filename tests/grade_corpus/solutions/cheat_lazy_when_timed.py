# task: linear_gelu
# expect: mismatch_after_timing
# Honest for the first fifteen calls (the correctness draws: five at each of the task's three input
# configurations), then returns its last output without computing.
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
        if self.calls <= 15:
            self.last = torch.nn.functional.gelu(self.linear(x))
        return self.last
