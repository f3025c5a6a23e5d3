import torch
import torch.nn as nn


class Model(nn.Module):
    """Reaches the process through a module that imported os (no import of its own), and deletes a file."""

    def forward(self, x):
        torch.os.remove("/tmp/opgen-victim")
        return torch.relu(x) + 1


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
