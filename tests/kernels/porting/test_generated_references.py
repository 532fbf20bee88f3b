"""Generated references run: each translated module, at small sizes, gives finite outputs of the
shapes PyTorch would give, and for several modules the values of an independent float64 NumPy
implementation of the module. One jax subprocess runs them all."""

import math
import subprocess
import sys

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

from maxkernel_tui.kernels.porting.emit import render_reference
from maxkernel_tui.kernels.porting.torch_compare import at_sizes, comparison_sizes
from maxkernel_tui.kernels.porting.translate import translate_module
from maxkernel_tui.kernels.workers import jax_worker_env
from tests.support.paths import KERNELBENCH, TESTS


def _linear(x, w, b=None):
    return x @ w.T + (0 if b is None else b)


def _conv2d(x, w, b, padding):
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = sliding_window_view(x, w.shape[2:], axis=(2, 3))  # n c h w i j
    return np.einsum("nchwij,ocij->nohw", windows, w) + b[None, :, None, None]


def _conv_transpose2d(x, w, b, stride, padding):
    n, _, h, wd = x.shape
    kh, kw = w.shape[2:]
    full = np.zeros((n, w.shape[1], (h - 1) * stride + kh, (wd - 1) * stride + kw))
    for i in range(kh):
        for j in range(kw):
            full[
                :, :, i : i + (h - 1) * stride + 1 : stride, j : j + (wd - 1) * stride + 1 : stride
            ] += np.einsum("nchw,co->nohw", x, w[:, :, i, j])
    cropped = full[:, :, padding : full.shape[2] - padding, padding : full.shape[3] - padding]
    return cropped + b[None, :, None, None]


def _normalised(x, axes, eps=1e-5):
    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=axes, keepdims=True) + eps)


def _group_norm(x, groups, w, b):
    n = x.shape[0]
    y = _normalised(x.reshape(n, groups, -1), (2,)).reshape(x.shape)
    return y * w[None, :, None, None] + b[None, :, None, None]


def _gemm_relu_divide(x, w, b):
    return np.maximum(_linear(x, w, b), 0) / 2.0


def _rms_norm(x):
    return x / np.sqrt(np.mean(x**2, axis=1, keepdims=True) + 1e-5)


def _conv2d_groupnorm_tanh_hardswish(x, w, b, gw, gb, bias):
    y = np.tanh(_group_norm(_conv2d(x, w, b, padding=1), 8, gw, gb))
    return y * np.clip(y + 3, 0, 6) / 6 + bias


def _convtranspose2d_maxpool_hardtanh_mean(x, w, b):
    y = _conv_transpose2d(x, w, b, stride=2, padding=1)
    n, c, h, wd = y.shape
    y = y[:, :, : h // 2 * 2, : wd // 2 * 2].reshape(n, c, h // 2, 2, wd // 2, 2).max(axis=(3, 5))
    return np.tanh(np.clip(y, -1, 1).mean(axis=(2, 3), keepdims=True))


def _linear_layernorm_gelu_logsumexp(x, w, b, lw, lb):
    y = _normalised(_linear(x, w, b), (1,)) * lw + lb
    y = 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3)))
    y = y / (1 + np.exp(-y))
    y = y / (1 + np.exp(-y))
    top = y.max(axis=1, keepdims=True)
    return top + np.log(np.exp(y - top).sum(axis=1, keepdims=True))


def _sequential_batchnorm1d_selu(x, w0, b0, bw, bb, w4):
    y = _normalised(_linear(x, w0, b0), (0,)) * bw + bb
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    y = scale * np.where(y > 0, y, alpha * np.expm1(y))
    y = _linear(y, w4)
    y = np.where(y > 0, y, np.expm1(y))
    return 1 / (1 + np.exp(-y))


NUMPY = {
    "gemm_relu_divide": _gemm_relu_divide,
    "rms_norm": _rms_norm,
    "conv2d_groupnorm_tanh_hardswish": _conv2d_groupnorm_tanh_hardswish,
    "convtranspose2d_maxpool_hardtanh_mean": _convtranspose2d_maxpool_hardtanh_mean,
    "linear_layernorm_gelu_logsumexp": _linear_layernorm_gelu_logsumexp,
    "sequential_batchnorm1d_selu": _sequential_batchnorm1d_selu,
}
# The output shape PyTorch gives at the comparison sizes (16, or the size itself when smaller).
SHAPES = {
    "bmm_matmul_scale": (8, 16),
    "conv1d_instancenorm_mish": (16, 16, 6),  # (16 - 5) // 2 + 1
    "conv2d_groupnorm_tanh_hardswish": (16, 16, 16, 16),
    "conv3d_batchnorm_softmax_maxpool": (16, 16, 7, 7, 7),  # (16 - 2) // 2
    "conv_transpose1d_sigmoid": (16, 16, 48),  # (16 - 1) * 3 + 3
    "convtranspose2d_maxpool_hardtanh_mean": (16, 16, 1, 1),
    "convtranspose3d_gelu_avgpool": (8, 16, 8, 16, 16),  # ((8 - 1) * 2 - 2 + 3 + 1) // 2
    "gemm_relu_divide": (16, 16),
    "linear_layernorm_gelu_logsumexp": (16, 1),
    "reductions_pooling_clamp": (16, 4),
    "rms_norm": (16, 16, 16, 16),
    "sequential_batchnorm1d_selu": (16, 16),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("references")
    for stem in SHAPES:
        translation = translate_module((KERNELBENCH / f"{stem}.py").read_text(), stem)
        small = at_sizes(translation, comparison_sizes(translation))
        (folder / f"{stem}.py").write_text(render_reference(small, stem))
    subprocess.run(
        [sys.executable, "-m", "tests.support.run_references", str(folder)],
        check=True,
        cwd=TESTS.parent,
        env=jax_worker_env(),
        timeout=300,
    )
    return {stem: dict(np.load(folder / f"{stem}.npz")) for stem in SHAPES}


@pytest.mark.slow
def test_every_generated_reference_runs_to_finite_outputs_of_pytorchs_shapes(results):
    shapes = {stem: tuple(arrays["output"].shape) for stem, arrays in results.items()}
    assert shapes == SHAPES
    assert [s for s, arrays in results.items() if not np.isfinite(arrays["output"]).all()] == []


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(NUMPY))
def test_generated_references_agree_with_float64_numpy(results, stem):
    arrays = results[stem]
    inputs = [arrays[f"input{i}"].astype(np.float64) for i in range(len(arrays) - 1)]
    expected = NUMPY[stem](*inputs)
    np.testing.assert_allclose(arrays["output"], expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize(
    "stem, weight, bias",
    # linear_layernorm_gelu_logsumexp is compared at its 512 features (its reference writes
    # `layer_norm(x, (512,), ...)`, which pins them), where a log-sum-exp over 512 averages
    # the affine parameters' spread to within 1e-2: it cannot show this, only a norm whose
    # output keeps every feature can
    [("conv2d_groupnorm_tanh_hardswish", 3, 4)],
)
def test_a_computation_ignoring_a_norms_affine_parameters_fails(results, stem, weight, bias):
    """The norm's weight and bias are drawn near PyTorch's ones and zeros, not equal to them:
    the same module with them left out is outside the import's default tolerance (1e-2)."""
    arrays = results[stem]
    inputs = [arrays[f"input{i}"].astype(np.float64) for i in range(len(arrays) - 1)]
    inputs[weight], inputs[bias] = np.ones_like(inputs[weight]), np.zeros_like(inputs[bias])
    ignoring = NUMPY[stem](*inputs)
    assert not np.allclose(arrays["output"], ignoring, rtol=1e-2, atol=1e-2)
