import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return torch.linalg.matrix_power(x, 10 ** 12)


def get_inputs():
    return [torch.rand(4096, 4096) / 4096]


def get_init_inputs():
    return []
