import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        y = x
        for _ in range(10 ** 12):
            y = torch.tanh(y)
        return y


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []
