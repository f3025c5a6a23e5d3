# task: linear_gelu
# expect: tampering
# runtime: tampering
# A global forward hook that zeroes every module's output, the reference's included.
import torch
import torch.nn as nn


def zero_everything(module, args, output):
    return torch.zeros_like(output)


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        self.hidden = hidden
        nn.modules.module.register_module_forward_hook(zero_everything)

    def forward(self, x):
        return torch.zeros(x.shape[0], self.hidden, device=x.device)
