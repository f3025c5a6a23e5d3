import torch
import torch.nn as nn
import torch._dynamo.config


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        pass

    def forward(self, x):
        scale = x.sum().item()
        return torch.tanh(x * scale * 0.05)


def get_inputs():
    return [torch.rand(4, 16)]


def get_init_inputs():
    return []


torch._dynamo.config.recompile_limit = 1
torch._dynamo.config.fail_on_recompile_limit_hit = True
