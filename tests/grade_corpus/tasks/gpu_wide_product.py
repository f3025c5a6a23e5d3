import torch
import torch.nn as nn


class Model(nn.Module):
    """One matrix product whose output (64 MB) is larger than its inputs (1 MB each) and the only tensor it
    allocates: the block a tensor of the output's size is given is the one the reference writes its answer into."""

    def forward(self, a, b):
        return a @ b


def get_inputs():
    return [torch.randn(4096, 64), torch.randn(64, 4096)]


def get_init_inputs():
    return []
