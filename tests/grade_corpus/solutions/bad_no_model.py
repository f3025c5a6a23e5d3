# task: linear_gelu
# expect: invalid_solution
import torch.nn as nn


class Model(nn.Module):
    pass
