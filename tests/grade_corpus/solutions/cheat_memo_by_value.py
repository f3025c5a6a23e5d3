# task: linear_gelu
# expect: ok
# Correct, but caches its output by a fingerprint of the input values and computes (an expensive "kernel": two hundred
# 256 x 256 matrix products) only on a miss: timed on the same values every trial, it would read about free. The
# grader draws every trial afresh, so each timed call misses and pays for its kernel (tests/test_grade.py).
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.linear = nn.Linear(features, hidden)
        self.work = torch.randn(256, 256) / 16
        self.seen = {}

    def forward(self, x):
        key = (tuple(x.shape), float(x.double().sum()), float(x.double().abs().sum()))
        if key not in self.seen:
            product = self.work
            for _ in range(200):
                product = product @ self.work
            self.seen[key] = torch.nn.functional.gelu(self.linear(x)) + 0 * product[0, 0]
        return self.seen[key].clone()
