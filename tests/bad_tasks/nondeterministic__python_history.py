import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.history = []

    def forward(self, x):
        self.history.append(1)
        return torch.tanh(x) * len(self.history)


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []
