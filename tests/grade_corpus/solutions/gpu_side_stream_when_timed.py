# task: gpu_matmul
# expect: unsynchronized
# gpu
# Waits for its side stream on the first calls (the correctness draws), not after: the grader's timer synchronises
# every stream (no gain in its time), and the fresh draw after timing finds the output still being written.
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None
        self.calls = 0

    def forward(self, a, b):
        self.calls += 1
        if self.side is None:
            self.side = torch.cuda.Stream()
        self.side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.side):
            for _ in range(8):
                product = a @ b
            out = torch.relu(product)
        if self.calls <= 5:
            torch.cuda.current_stream().wait_stream(self.side)
        return out
