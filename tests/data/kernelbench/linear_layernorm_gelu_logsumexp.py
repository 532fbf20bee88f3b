import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Linear, LayerNorm, tanh-GELU, swish, SiLU, log-sum-exp over features."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.ln = nn.LayerNorm(out_features)

    def forward(self, x):
        x = self.fc(x)
        x = self.ln(x)
        x = F.gelu(x, approximate="tanh")
        x = x * torch.sigmoid(x)
        x = F.silu(x)
        x = torch.logsumexp(x, dim=1, keepdim=True)
        return x


batch_size = 128
in_features = 256
out_features = 512


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
