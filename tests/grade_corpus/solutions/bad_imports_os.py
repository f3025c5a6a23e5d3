# task: linear_gelu
# expect: unsafe_code
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, hidden):
        super().__init__()
        os.system("true")
