import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = torch.relu(x)
        y = torch.fft.rfft(x)
        return y


def get_inputs():
    return [torch.randn(8, 128)]


def get_init_inputs():
    return []
