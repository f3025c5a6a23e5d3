# task: matmul_scale
# expect: input_modified
# Zeroes its inputs so that a reference run on the same tensors afterwards would agree with its zeros.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()

    def forward(self, a, b):
        a.zero_()
        b.zero_()
        return torch.zeros(a.shape[0], b.shape[1], device=a.device)
