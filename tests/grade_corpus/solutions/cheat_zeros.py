# task: linear_gelu
# expect: mismatch
# Zeros of the right shape.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden

    def forward(self, x):
        return torch.zeros(x.shape[0], self.hidden, device=x.device)
