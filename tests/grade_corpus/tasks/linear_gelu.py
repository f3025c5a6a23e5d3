import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int, hidden: int):
        super().__init__()
        self.linear = nn.Linear(features, hidden)

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x))


batch, features, hidden = 4, 16, 32


def get_inputs():
    return [torch.randn(batch, features)]


def get_init_inputs():
    return [features, hidden]
