import torch
import torch.nn as nn


class Model(nn.Module):
    def run(self, x):
        return x.relu()


def get_inputs():
    return [torch.rand(4)]


def get_init_inputs():
    return []
