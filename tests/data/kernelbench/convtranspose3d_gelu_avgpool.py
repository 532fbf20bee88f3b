import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """ConvTranspose3d with output padding, GELU, SELU, AvgPool3d, a clamp."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding):
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(
            in_channels, out_channels, kernel_size, stride=stride, padding=padding,
            output_padding=output_padding)
        self.pool = nn.AvgPool3d(kernel_size=2)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = F.gelu(x)
        x = torch.selu(x)
        x = self.pool(x)
        x = torch.clamp(x, min=-0.5, max=0.5)
        return x


batch_size = 8
in_channels = 8
out_channels = 16
depth, height, width = 8, 16, 16
kernel_size = 3
stride = 2
padding = 1
output_padding = 1


def get_inputs():
    return [torch.randn(batch_size, in_channels, depth, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding]
