"""KernelBench tasks 18k-34k checked against float64 NumPy formulations on their `check` configs."""

import math

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # runs the references under jax on their check shapes


def _f64(a):
    return np.asarray(a, np.float64)


def _conv2d_valid(x, w):
    """NCHW x OIHW, stride 1, VALID, as a sum of one channel contraction per kernel tap."""
    _, _, kh, kw = w.shape
    out_h, out_w = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    out = 0.0
    for i in range(kh):
        for j in range(kw):
            out = out + np.einsum(
                "nchw,oc->nohw", x[:, :, i : i + out_h, j : j + out_w], w[:, :, i, j], optimize=True
            )
    return out


def _gelu_tanh(v):
    return 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v**3)))


def _mish(v):
    return v * np.tanh(np.logaddexp(v, 0.0))


def test_28k_conv_transpose_matches_scatter_definition(reference):
    _, (x, w, conv_bias, ln_w, ln_b), static, out = reference(
        "28k_ConvTranspose3d_LayerNorm_GELU_Scaling"
    )
    stride, padding, k, eps, scale = static
    x, w = _f64(x), _f64(w)
    n, _, d, h, wd = x.shape
    c_out = w.shape[1]
    # Scatter every input voxel through every tap into a buffer with `padding` spare cells at
    # each border, then crop them: that drops out-of-range positions, as ConvTranspose3d does.
    full = np.zeros((n, c_out, stride * (d - 1) + k, stride * (h - 1) + k, stride * (wd - 1) + k))
    for kd in range(k):
        for kh in range(k):
            for kw in range(k):
                full[
                    :,
                    :,
                    kd : kd + stride * d : stride,
                    kh : kh + stride * h : stride,
                    kw : kw + stride * wd : stride,
                ] += np.einsum("nidhw,io->nodhw", x, w[:, :, kd, kh, kw], optimize=True)
    y = full[:, :, padding:-padding, padding:-padding, padding:-padding]
    y = y + _f64(conv_bias)[:, None, None, None]
    assert y.shape == out.shape == (n, c_out, 2 * d, 2 * h, 2 * wd)
    assert y.shape[-1] != c_out  # LayerNorm size must not be confused with channels
    mean = y.mean(-1, keepdims=True)
    var = ((y - mean) ** 2).mean(-1, keepdims=True)
    y = (y - mean) / np.sqrt(var + eps) * _f64(ln_w) + _f64(ln_b)
    np.testing.assert_allclose(_f64(out), _gelu_tanh(y) * scale, atol=1e-4, rtol=1e-4)
    assert out.dtype.name == "float32"


def test_24k_transposed_weight_clamp_logsumexp_mish(reference):
    _, (x, w, b), (scale, lo, hi), out = reference(
        "24k_Matmul_Scale_ResidualAdd_Clamp_LogSumExp_Mish"
    )
    x, w = _f64(x), _f64(w)
    # W is (out, in) with out != in, so only x @ W^T is defined.
    assert w.shape[1] == x.shape[1] != w.shape[0]
    y = 2.0 * ((x @ w.T + _f64(b)) * scale)
    assert (np.abs(y) > hi).any()  # the clamp is exercised on `check`
    y = np.clip(y, lo, hi)
    z = np.log(np.exp(y - y.max(1, keepdims=True)).sum(1, keepdims=True)) + y.max(1, keepdims=True)
    np.testing.assert_allclose(_f64(out), z * _mish(z), atol=1e-3, rtol=1e-5)
    assert out.shape == (x.shape[0], 1) and out.dtype.name == "float32"


def test_22k_conv_instance_norm_per_sample_and_channel(reference):
    _, (x, w, conv_bias, in_w, in_b), (divide_by,), out = reference(
        "22k_Conv2d_InstanceNorm_Divide"
    )
    y = _conv2d_valid(_f64(x), _f64(w)) + _f64(conv_bias)[None, :, None, None]
    expected = np.empty_like(y)
    for i in range(y.shape[0]):
        for c in range(y.shape[1]):
            plane = y[i, c]
            normed = (plane - plane.mean()) / np.sqrt(plane.var() + 1e-5)
            expected[i, c] = (normed * float(in_w[c]) + float(in_b[c])) / divide_by
    np.testing.assert_allclose(_f64(out), expected, atol=1e-4, rtol=1e-4)
    assert out.dtype.name == "float32"


def test_34k_conv_mish_batch_norm_over_batch_and_space(reference):
    _, (x, w, conv_bias, bn_w, bn_b), _, out = reference("34k_Conv2d_Activation_BatchNorm")
    y = _mish(_conv2d_valid(_f64(x), _f64(w)) + _f64(conv_bias)[None, :, None, None])
    expected = np.empty_like(y)
    for c in range(y.shape[1]):
        channel = y[:, c]
        normed = (channel - channel.mean()) / np.sqrt(channel.var() + 1e-5)
        expected[:, c] = normed * float(bn_w[c]) + float(bn_b[c])
    np.testing.assert_allclose(_f64(out), expected, atol=1e-4, rtol=1e-4)
    assert out.dtype.name == "float32"


def test_29k_swish_before_bias_then_contiguous_group_norm(reference):
    _, (x, w, b, gn_w, gn_b), (groups, features), out = reference("29k_Matmul_Swish_Sum_GroupNorm")
    y = _f64(x) @ _f64(w)
    y = y / (1.0 + np.exp(-y)) + _f64(b)
    width = features // groups
    expected = np.empty_like(y)
    for g in range(groups):
        block = y[:, g * width : (g + 1) * width]
        mean, var = block.mean(1, keepdims=True), block.var(1, keepdims=True)
        expected[:, g * width : (g + 1) * width] = (block - mean) / np.sqrt(var + 1e-5)
    expected = expected * _f64(gn_w) + _f64(gn_b)
    np.testing.assert_allclose(_f64(out), expected, atol=1e-4, rtol=1e-4)
    assert out.dtype.name == "float32"


def test_31k_batch_norm_uses_batch_statistics(reference):
    _, (x, w, b, bn_w, bn_b), _, out = reference("31k_Gemm_BatchNorm_GELU_ReLU")
    y = np.einsum("bk,nk->bn", _f64(x), _f64(w)) + _f64(b)
    y = (y - y.mean(0)) / np.sqrt(y.var(0) + 1e-5) * _f64(bn_w) + _f64(bn_b)
    np.testing.assert_allclose(_f64(out), np.maximum(_gelu_tanh(y), 0.0), atol=1e-4, rtol=1e-4)
    assert out.dtype.name == "float32"


def test_26k_instance_norm_over_1x1_collapses_to_bias(reference):
    _, (_, y, _, _, _, in_b), _, out = reference("26k_BMM_InstanceNorm_Sum_ResidualAdd_Multiply")
    expected = (_f64(in_b) + _f64(y)) * _f64(y)
    np.testing.assert_allclose(_f64(out), expected, atol=1e-6, rtol=1e-6)
    assert out.dtype.name == "float32"
