# task: linear_gelu
# expect: mismatch
# A constant near the output's mean.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden

    def forward(self, x):
        return torch.full((x.shape[0], self.hidden), 0.1, device=x.device)
