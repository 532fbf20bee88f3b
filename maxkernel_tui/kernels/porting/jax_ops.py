"""The JAX helpers a translated reference calls, with PyTorch's semantics. Imports jax.

Generated references are self-contained: `helper_source` copies the functions used, as text,
from this file into each `reference.py`, so this module is tested once and every reference gets
the same code. Each function uses only `jax`, `jnp`, `lax`, `math` and the other helpers here.
Layouts are PyTorch's: channels first (N, C, *spatial); conv weights (out, in / groups, *k),
transposed conv weights (in, out / groups, *k).
"""

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax


def tuple_of(value: Any, n: int) -> tuple[Any, ...]:
    """`value` repeated `n` times unless it already is a sequence (PyTorch's `_ntuple`)."""
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * n


def linear(x: jax.Array, weight: jax.Array, bias: jax.Array | None) -> jax.Array:
    """`F.linear`: x @ weight.T + bias, weight of shape (out_features, in_features)."""
    y = jnp.matmul(x, weight.T)
    return y if bias is None else y + bias


def conv_nd(
    x: jax.Array,
    weight: jax.Array,
    bias: jax.Array | None,
    stride: int | Sequence[int],
    padding: int | Sequence[int] | str,
    dilation: int | Sequence[int],
    groups: int,
) -> jax.Array:
    """`F.conv1d/2d/3d`: cross-correlation, channels first, zero padding."""
    n = weight.ndim - 2
    if n > 3:
        raise ValueError(f"a convolution over {n} spatial axes (PyTorch's go up to 3)")
    spatial = "DHW"[-n:]
    numbers = ("NC" + spatial, "OI" + spatial, "NC" + spatial)
    pads: str | list[tuple[int, int]]
    if isinstance(padding, str):
        pads = padding.upper()
    else:
        pads = [(p, p) for p in tuple_of(padding, n)]
    y = lax.conv_general_dilated(
        x,
        weight,
        window_strides=tuple_of(stride, n),
        padding=pads,
        rhs_dilation=tuple_of(dilation, n),
        dimension_numbers=numbers,
        feature_group_count=groups,
    )
    return y if bias is None else y + bias.reshape((1, -1) + (1,) * n)


def conv_transpose_nd(
    x: jax.Array,
    weight: jax.Array,
    bias: jax.Array | None,
    stride: int | Sequence[int],
    padding: int | Sequence[int],
    output_padding: int | Sequence[int],
    dilation: int | Sequence[int],
    groups: int,
) -> jax.Array:
    """`F.conv_transpose1d/2d/3d`: the gradient of a conv, written as a conv of the input dilated
    by the stride with the spatially flipped kernel; weight (in, out / groups, *k)."""
    n = weight.ndim - 2
    strides, paddings = tuple_of(stride, n), tuple_of(padding, n)
    output_paddings, dilations = tuple_of(output_padding, n), tuple_of(dilation, n)
    in_channels, out_per_group = weight.shape[0], weight.shape[1]
    kernel = weight.shape[2:]
    # (in, out/g, *k) -> (g, in/g, out/g, *k) -> (g, out/g, in/g, *k) -> (out, in/g, *k)
    w = weight.reshape((groups, in_channels // groups, out_per_group) + kernel)
    w = jnp.swapaxes(w, 1, 2).reshape((groups * out_per_group, in_channels // groups) + kernel)
    w = jnp.flip(w, axis=tuple(range(2, 2 + n)))
    pads = [
        (d * (k - 1) - p, d * (k - 1) - p + op)
        for k, p, op, d in zip(kernel, paddings, output_paddings, dilations)
    ]
    spatial = "DHW"[-n:]
    y = lax.conv_general_dilated(
        x,
        w,
        window_strides=(1,) * n,
        padding=pads,
        lhs_dilation=strides,
        rhs_dilation=dilations,
        dimension_numbers=("NC" + spatial, "OI" + spatial, "NC" + spatial),
        feature_group_count=groups,
    )
    return y if bias is None else y + bias.reshape((1, -1) + (1,) * n)


def _window(
    n: int,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None,
    padding: int | Sequence[int],
    dilation: int | Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...], tuple[int, ...]]:
    kernel = tuple_of(kernel_size, n)
    strides = kernel if stride is None or stride == [] else tuple_of(stride, n)
    pads = tuple_of(padding, n)
    return (
        (1, 1) + kernel,
        (1, 1) + strides,
        ((0, 0), (0, 0)) + tuple((p, p) for p in pads),
        (1, 1) + tuple_of(dilation, n),
    )


def max_pool_nd(
    x: jax.Array,
    n: int,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
) -> jax.Array:
    """`F.max_pool1d/2d/3d` (floor mode): padding counts as -inf."""
    dims, strides, pads, dilations = _window(n, kernel_size, stride, padding, dilation)
    pooled: jax.Array = lax.reduce_window(
        x, -jnp.inf, lax.max, dims, strides, pads, window_dilation=dilations
    )
    return pooled.astype(x.dtype)


def avg_pool_nd(
    x: jax.Array,
    n: int,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    count_include_pad: bool = True,
) -> jax.Array:
    """`F.avg_pool1d/2d/3d` (floor mode): the mean over each window, zero padding counted unless
    `count_include_pad` is False."""
    dims, strides, pads, _ = _window(n, kernel_size, stride, padding, 1)
    total: jax.Array = lax.reduce_window(x, 0.0, lax.add, dims, strides, pads)
    if count_include_pad:
        return (total / math.prod(dims)).astype(x.dtype)
    counts: jax.Array = lax.reduce_window(jnp.ones_like(x), 0.0, lax.add, dims, strides, pads)
    return (total / counts).astype(x.dtype)


def adaptive_pool_nd(
    x: jax.Array,
    n: int,
    output_size: int | Sequence[int | None] | None,
    reduce: Callable[..., jax.Array],
) -> jax.Array:
    """`F.adaptive_avg_pool*` / `adaptive_max_pool*` (values only): output cell i of a size-L axis
    covers [floor(i L / out), ceil((i + 1) L / out)), as PyTorch computes it."""
    sizes = tuple_of(output_size, n)
    for axis, out in zip(range(x.ndim - n, x.ndim), sizes):
        length = x.shape[axis]
        out = length if out is None else out
        cells = [
            reduce(
                lax.slice_in_dim(x, (i * length) // out, -(-((i + 1) * length) // out), axis=axis),
                axis=axis,
                keepdims=True,
            )
            for i in range(out)
        ]
        x = jnp.concatenate(cells, axis=axis)
    return x


def batch_norm_train(
    x: jax.Array, weight: jax.Array | None, bias: jax.Array | None, eps: float
) -> jax.Array:
    """`nn.BatchNorm*d` in PyTorch's default training mode: batch statistics over every axis but
    the channels (axis 1), biased variance."""
    axes = (0,) + tuple(range(2, x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    y = (x - mean) * lax.rsqrt(var + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def batch_norm_eval(
    x: jax.Array,
    running_mean: jax.Array,
    running_var: jax.Array,
    weight: jax.Array | None,
    bias: jax.Array | None,
    eps: float,
) -> jax.Array:
    """`F.batch_norm(training=False)`: the given running statistics per channel (axis 1)."""
    shape = (1, -1) + (1,) * (x.ndim - 2)
    y = (x - running_mean.reshape(shape)) * lax.rsqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def rms_norm(
    x: jax.Array, normalized_shape: int | Sequence[int], weight: jax.Array | None, eps: float | None
) -> jax.Array:
    """`F.rms_norm`: x / sqrt(mean(x^2) + eps) over the last len(normalized_shape) axes; eps
    None means the dtype's machine epsilon, as PyTorch takes it."""
    axes = tuple(range(x.ndim - len(tuple_of(normalized_shape, 1)), x.ndim))
    epsilon = jnp.finfo(x.dtype).eps if eps is None else eps
    y = x * lax.rsqrt(jnp.mean(jnp.square(x), axis=axes, keepdims=True) + epsilon)
    return y if weight is None else y * weight


def instance_norm(
    x: jax.Array, weight: jax.Array | None, bias: jax.Array | None, eps: float
) -> jax.Array:
    """`F.instance_norm` / `nn.InstanceNorm*d`: statistics per sample and channel over space."""
    axes = tuple(range(2, x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    y = (x - mean) * lax.rsqrt(var + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def group_norm(
    x: jax.Array, num_groups: int, weight: jax.Array | None, bias: jax.Array | None, eps: float
) -> jax.Array:
    """`F.group_norm`: statistics per sample over each group of channels and all of space."""
    n, c = x.shape[0], x.shape[1]
    grouped = x.reshape((n, num_groups, c // num_groups) + x.shape[2:])
    axes = tuple(range(2, grouped.ndim))
    mean = jnp.mean(grouped, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(grouped - mean), axis=axes, keepdims=True)
    y = ((grouped - mean) * lax.rsqrt(var + eps)).reshape(x.shape)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def layer_norm(
    x: jax.Array,
    normalized_shape: int | Sequence[int],
    weight: jax.Array | None,
    bias: jax.Array | None,
    eps: float,
) -> jax.Array:
    """`F.layer_norm`: statistics over the last len(normalized_shape) axes."""
    axes = tuple(range(x.ndim - len(tuple_of(normalized_shape, 1)), x.ndim))
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=True)
    y = (x - mean) * lax.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def softplus(x: jax.Array, beta: float, threshold: float) -> jax.Array:
    """`F.softplus`: log(1 + exp(beta x)) / beta, linear where beta x > threshold."""
    return jnp.where(x * beta > threshold, x, jnp.logaddexp(x * beta, 0.0) / beta)


def mish(x: jax.Array) -> jax.Array:
    """`F.mish`: x tanh(softplus(x))."""
    return x * jnp.tanh(softplus(x, 1.0, 20.0))


class ValuesIndices(NamedTuple):
    """What `torch.max(x, dim)` and `torch.min(x, dim)` return."""

    values: jax.Array
    indices: jax.Array


def max_along(x: jax.Array, dim: int, keepdim: bool) -> ValuesIndices:
    """`torch.max(x, dim, keepdim)`: values and indices."""
    return ValuesIndices(
        jnp.max(x, axis=dim, keepdims=keepdim), jnp.argmax(x, dim, keepdims=keepdim)
    )


def min_along(x: jax.Array, dim: int, keepdim: bool) -> ValuesIndices:
    """`torch.min(x, dim, keepdim)`: values and indices."""
    return ValuesIndices(
        jnp.min(x, axis=dim, keepdims=keepdim), jnp.argmin(x, dim, keepdims=keepdim)
    )


def variance(
    x: jax.Array, dim: int | Sequence[int] | None, correction: int, keepdim: bool
) -> jax.Array:
    """`torch.var` with Bessel's correction `correction` (1 unless `unbiased=False`)."""
    return jnp.var(x, axis=dim, ddof=correction, keepdims=keepdim)


def flatten(x: jax.Array, start_dim: int, end_dim: int) -> jax.Array:
    """`torch.flatten(x, start_dim, end_dim)`."""
    end = end_dim % x.ndim
    start = start_dim % x.ndim
    return x.reshape(x.shape[:start] + (-1,) + x.shape[end + 1 :])


def squeeze(x: jax.Array, dim: int | Sequence[int] | None) -> jax.Array:
    """`torch.squeeze`: a named axis of size 1 is dropped; an axis of another size is kept."""
    if dim is None:
        return jnp.squeeze(x)
    dims = tuple(d % x.ndim for d in tuple_of(dim, 1) if x.shape[d] == 1)
    return jnp.squeeze(x, axis=dims) if dims else x
