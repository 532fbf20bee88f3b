"""The jaxpr primitives the built-in agent translates into jnp source, and how.

Only primitives listed here (and checked to lower with Mosaic for TPU) can appear in a kernel
body the agent writes; anything else makes the agent say it cannot plan the task.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

Formatter = Callable[[list[str], dict[str, Any]], str]

_BINARY_OPERATORS = {
    "add": "+",
    "sub": "-",
    "mul": "*",
    "div": "/",
    "lt": "<",
    "le": "<=",
    "gt": ">",
    "ge": ">=",
    "eq": "==",
    "ne": "!=",
    "and": "&",
    "or": "|",
    "xor": "^",
}
_BINARY_FUNCTIONS = {
    "max": "jnp.maximum",
    "min": "jnp.minimum",
    "pow": "jnp.power",
    "rem": "jax.lax.rem",
    "atan2": "jnp.arctan2",
}
_UNARY_FUNCTIONS = {
    "exp": "jnp.exp",
    "exp2": "jnp.exp2",
    "log": "jnp.log",
    "log1p": "jnp.log1p",
    "tanh": "jnp.tanh",
    "logistic": "jax.nn.sigmoid",
    "sqrt": "jnp.sqrt",
    "rsqrt": "jax.lax.rsqrt",
    "abs": "jnp.abs",
    "sin": "jnp.sin",
    "cos": "jnp.cos",
    "tan": "jnp.tan",
    "erf": "jax.lax.erf",
    "erf_inv": "jax.lax.erf_inv",
    "floor": "jnp.floor",
    "ceil": "jnp.ceil",
    "is_finite": "jnp.isfinite",
    "square": "jnp.square",
}

REDUCTIONS = {"reduce_sum": "jnp.sum", "reduce_max": "jnp.max", "reduce_min": "jnp.min"}
VIEWS = {"reshape", "squeeze", "expand_dims", "broadcast_in_dim"}


def dtype_source(dtype: Any) -> str:
    return f"jnp.{np.dtype(dtype).name}"


def float_source(value: float) -> str:
    """A float as Python source; infinities as jnp's (`-inf` is no literal)."""
    if math.isinf(value):
        return "-jnp.inf" if value < 0 else "jnp.inf"
    return repr(value)


def _binary_operator(symbol: str) -> Formatter:
    return lambda args, params: f"{args[0]} {symbol} {args[1]}"


def _call(function: str) -> Formatter:
    return lambda args, params: f"{function}({', '.join(args)})"


def _select(args: list[str], params: dict[str, Any]) -> str:
    predicate, if_false, if_true = args
    return f"jnp.where({predicate}, {if_true}, {if_false})"


ELEMENTWISE: dict[str, Formatter] = {
    **{name: _binary_operator(symbol) for name, symbol in _BINARY_OPERATORS.items()},
    **{name: _call(function) for name, function in (_BINARY_FUNCTIONS | _UNARY_FUNCTIONS).items()},
    "neg": lambda args, params: f"-{args[0]}",
    "not": lambda args, params: f"~{args[0]}",
    "integer_pow": lambda args, params: f"jax.lax.integer_pow({args[0]}, {params['y']})",
    "clamp": lambda args, params: f"jnp.clip({args[1]}, {args[0]}, {args[2]})",
    "select_n": _select,
    "convert_element_type": lambda args, params: (
        f"{args[0]}.astype({dtype_source(params['new_dtype'])})"
    ),
}


def is_elementwise(eqn_primitive: str, operand_count: int) -> bool:
    if eqn_primitive == "select_n":
        return operand_count == 3  # a boolean predicate and two cases
    return eqn_primitive in ELEMENTWISE


def is_translatable(primitive: str, operand_count: int) -> bool:
    """Whether some plan of the agent can hold this primitive: matmuls and weight transposes
    and flips (done by XLA before the stage that reads them) shape the stages; positions (iota)
    only appear in masks the attention and scan kernels rebuild; a gather only as one element
    picked per row (see picks_one_per_row); a cumulative sum only in a scan's decay, computed
    before its kernel (retention.py)."""
    return (
        is_elementwise(primitive, operand_count)
        or primitive in REDUCTIONS
        or primitive in VIEWS
        or primitive
        in ("dot_general", "transpose", "rev", "iota", "gather", "conv_general_dilated", "cumsum")
    )


def is_plain_conv(params: dict[str, Any]) -> bool:
    """The convolution the agent writes as an implicit GEMM: 2-D or 3-D, channels-first image,
    (out, in, taps...) kernel and channels-first result (NCHW / OIHW, NCDHW / OIDHW), stride 1,
    no padding or dilation, one group."""
    numbers = params["dimension_numbers"]
    rank = len(numbers.lhs_spec)
    identity = tuple(range(rank))
    return (
        rank in (4, 5)
        and (tuple(numbers.lhs_spec), tuple(numbers.rhs_spec), tuple(numbers.out_spec))
        == (identity,) * 3
        and all(tuple(p) == (0, 0) for p in params.get("padding", ()))
        and all(
            _plain(params.get(name)) == (plain if isinstance(plain, int) else plain * (rank - 2))
            for name, plain in _PLAIN_CONV.items()
        )
    )


def is_transposed_conv(params: dict[str, Any]) -> bool:
    """A transposed 3-D convolution (ConvTranspose3d): a channels-first volume (NCDHW) dilated
    by a stride along some axis (`lhs_dilation`), padded by at least nothing, with a kernel
    in any axis order (laid out OIDHW by XLA), a channels-first result, one group, no window
    stride or kernel dilation."""
    numbers = params["dimension_numbers"]
    identity = tuple(range(5))
    dilation = _plain(params.get("lhs_dilation"))
    return (
        len(numbers.lhs_spec) == 5
        and (tuple(numbers.lhs_spec), tuple(numbers.out_spec)) == (identity, identity)
        and isinstance(dilation, tuple)
        and any(int(s) > 1 for s in dilation)
        and all(int(lo) >= 0 and int(hi) >= 0 for lo, hi in params.get("padding", ()))
        and all(
            _plain(params.get(name)) == (plain if isinstance(plain, int) else plain * 3)
            for name, plain in _PLAIN_CONV.items()
            if name != "lhs_dilation"
        )
    )


def uneven_phases(
    params: dict[str, Any], image: tuple[int, ...], kernel: tuple[int, ...]
) -> str | None:
    """Why a transposed convolution cannot be split into whole phases (pieces/conv_transposed.py
    computes every phase of an axis for as many outputs, each meeting some tap), or None: an
    output size that is no whole number of strides, or fewer taps than the stride."""
    numbers = params["dimension_numbers"]
    for axis, (stride, (low, high)) in enumerate(zip(params["lhs_dilation"], params["padding"])):
        size, taps = image[numbers.lhs_spec[2 + axis]], kernel[numbers.rhs_spec[2 + axis]]
        out = (size - 1) * stride + 1 + low + high - taps + 1
        if out % stride or taps < stride:
            return (
                f"a transposed convolution whose output ({out}) is not a whole number of strides "
                f"({stride}) or whose taps ({taps}) are fewer than its stride: its phases differ"
            )
    return None


# A plain convolution's parameters, besides its layouts and padding (per spatial axis: tuples).
_PLAIN_CONV: dict[str, int | tuple[int]] = {
    "window_strides": (1,),
    "lhs_dilation": (1,),
    "rhs_dilation": (1,),
    "feature_group_count": 1,
    "batch_group_count": 1,
}


def _plain(value: object) -> object:
    return tuple(value) if isinstance(value, (list, tuple)) else value


def picks_one_per_row(primitive: str, params: dict[str, Any]) -> bool:
    """`take_along_axis(x, idx[:, None], axis=-1)` on a 2-D x: out[r] = x[r, idx[r]]."""
    if primitive != "gather":
        return False
    numbers = params["dimension_numbers"]
    return (
        tuple(numbers.offset_dims),
        tuple(numbers.collapsed_slice_dims),
        tuple(numbers.start_index_map),
        tuple(numbers.operand_batching_dims),
        tuple(numbers.start_indices_batching_dims),
        tuple(params["slice_sizes"]),
    ) == ((), (1,), (1,), (0,), (0,), (1, 1))
