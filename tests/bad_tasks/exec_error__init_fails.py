import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 8, bias='maybe', nonexistent=1)

    def forward(self, x):
        return self.linear(x)


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []
