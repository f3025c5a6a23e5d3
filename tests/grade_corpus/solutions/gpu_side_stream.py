# task: gpu_matmul
# expect: unsynchronized
# gpu
# Launches its work on a stream of its own and returns without making the caller's stream wait: a timer that waits
# only for the current stream sees a call that costs nothing, and the output is still being written.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, a, b):
        if self.side is None:
            self.side = torch.cuda.Stream()
        out = torch.empty(a.shape[0], b.shape[1], device=a.device)
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(8):   # long enough to be still running when the call returns
                product = a @ b
            out.copy_(torch.relu(product))
        return out
