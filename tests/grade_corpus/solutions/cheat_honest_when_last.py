# task: linear_gelu
# expect: mismatch_after_timing
# hardened
# Counts its calls: honest on the correctness draws (five at each of the task's three input configurations), on the
# last timed trial (the tests' plan: one warm-up, three trials) and the fresh draw after timing; every other timed
# trial returns a stale output without computing. One trial besides the last, chosen at random, is checked too.
import torch
import torch.nn as nn

CHECKED, WARMUPS, TRIALS = 15, 1, 3


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)
        self.calls = 0
        self.last = None

    def forward(self, x):
        self.calls += 1
        if self.calls <= CHECKED + WARMUPS or self.calls >= CHECKED + WARMUPS + TRIALS:
            self.last = torch.nn.functional.gelu(self.linear(x))
        return self.last
