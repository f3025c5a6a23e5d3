import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        return (x.half() * 100).cumsum(-1).float()


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return []
