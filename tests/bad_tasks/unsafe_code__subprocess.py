import torch
import torch.nn as nn
import subprocess


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        subprocess.run(['true'])
        return torch.tanh(x)


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []
