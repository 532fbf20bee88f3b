import torch
import torch.nn as nn


class Model(nn.Module):
    """ConvTranspose1d with groups, sigmoid, dropout (identity in eval mode)."""

    def __init__(self, in_channels, out_channels, kernel_size, groups):
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose1d(in_channels, out_channels, kernel_size,
                                                 stride=3, groups=groups, bias=False)
        self.dropout = nn.Dropout(p=0.0)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = self.dropout(torch.sigmoid(x))
        return x


batch_size = 16
in_channels = 32
out_channels = 64
length = 128
kernel_size = 3
groups = 4


def get_inputs():
    return [torch.randn(batch_size, in_channels, length)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
