import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Conv2d, GroupNorm, tanh, HardSwish, a bias parameter added with broadcasting."""

    def __init__(self, in_channels, out_channels, kernel_size, groups, bias_shape):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)
        self.group_norm = nn.GroupNorm(groups, out_channels)
        self.tanh = nn.Tanh()
        self.bias = nn.Parameter(torch.randn(bias_shape) * 0.02)

    def forward(self, x):
        x = self.conv(x)
        x = self.group_norm(x)
        x = self.tanh(x)
        x = F.hardswish(x)
        x = x + self.bias
        return x


batch_size = 32
in_channels = 16
out_channels = 64
height = width = 64
kernel_size = 3
groups = 8
bias_shape = (out_channels, 1, 1)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups, bias_shape]
