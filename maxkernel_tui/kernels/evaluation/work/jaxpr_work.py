"""Where a program's heavy work happens: inside Pallas kernels or in XLA around them. Imports jax.

Heavy work is counted from the jaxpr: matmul and convolution flops, and the elements that
reductions read. Everything inside a `pallas_call` counts as the kernel's; everything else,
including inside jit, cond, scan and custom derivatives, counts as XLA's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from maxkernel_tui.kernels.perf.jaxpr_walk import walk
from maxkernel_tui.kernels.perf.primitive_names import REDUCTIONS


@dataclass
class Work:
    """Heavy work of one program, split by where it runs."""

    pallas_calls: list[str] = field(default_factory=list)
    xla_flops: float = 0.0  # matmul/conv flops outside Pallas
    xla_reduced: float = 0.0  # elements read by reductions outside Pallas
    heavy_ops: list[str] = field(default_factory=list)  # the largest XLA ops, for the report

    @property
    def has_pallas(self) -> bool:
        return bool(self.pallas_calls)


def measure(closed_jaxpr: Any) -> Work:
    work = Work()
    for site in walk(closed_jaxpr.jaxpr):
        eqn, name = site.eqn, site.name
        if name == "pallas_call":
            work.pallas_calls.append(
                str(eqn.params.get("name_and_src_info", eqn.params.get("name", "kernel")))
            )
            continue
        flops = _flops(eqn)
        if flops:
            work.xla_flops += flops
            work.heavy_ops.append(f"{name} {_shapes(eqn)} ({flops:.3g} flops)")
        elif name in REDUCTIONS:
            elements = sum(_size(v) for v in eqn.invars)
            work.xla_reduced += elements
            work.heavy_ops.append(f"{name} {_shapes(eqn)} ({elements:.3g} elements)")
    return work


def value_bytes(atoms: Sequence[Any]) -> int:
    """The bytes of a jaxpr's values (an equation's operands or results), from their types."""
    return sum(
        math.prod(a.aval.shape) * np.dtype(a.aval.dtype).itemsize
        for a in atoms
        if hasattr(a.aval, "shape")
    )


def _flops(eqn: Any) -> float:
    name = eqn.primitive.name
    if name == "dot_general":
        (lhs_contract, _), _ = eqn.params["dimension_numbers"]
        lhs_shape = eqn.invars[0].aval.shape
        contracted = math.prod(lhs_shape[d] for d in lhs_contract)
        return 2.0 * _size(eqn.outvars[0]) * float(contracted)
    if name == "conv_general_dilated":
        return _conv_flops(eqn)
    if name == "ragged_dot" or name == "ragged_dot_general":
        lhs, rhs = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
        return 2.0 * float(math.prod(lhs)) * float(rhs[-1])
    return 0.0


def _conv_flops(eqn: Any) -> float:
    """2 x the products a convolution needs: per output feature, every input feature times the
    (output, tap) pairs of each spatial axis that meet an input element, not the padding or a
    dilated input's zeros (a transposed convolution meets a stride's share of its taps)."""
    numbers, params = eqn.params["dimension_numbers"], eqn.params
    image, kernel = eqn.invars[0].aval.shape, eqn.invars[1].aval.shape
    out = eqn.outvars[0].aval.shape
    pairs = 1
    for axis, (image_axis, kernel_axis, out_axis) in enumerate(
        zip(numbers.lhs_spec[2:], numbers.rhs_spec[2:], numbers.out_spec[2:], strict=True)
    ):
        pairs *= _axis_pairs(
            image[image_axis],
            kernel[kernel_axis],
            out[out_axis],
            int(params["window_strides"][axis]),
            int(params["padding"][axis][0]),
            int(params["lhs_dilation"][axis]),
            int(params["rhs_dilation"][axis]),
        )
    batch_and_features = out[numbers.out_spec[0]] * out[numbers.out_spec[1]]
    return 2.0 * float(batch_and_features * kernel[numbers.rhs_spec[1]] * pairs)


def _axis_pairs(
    size: int, taps: int, outs: int, stride: int, low: int, dilation: int, tap_dilation: int
) -> int:
    """(output, tap) pairs of one spatial axis whose input position is an element of the
    input, not padding or a dilation's zero."""
    count = 0
    for tap in range(taps):
        for o in range(outs):
            position = o * stride + tap * tap_dilation - low
            if position % dilation == 0 and 0 <= position // dilation < size:
                count += 1
    return count


def _size(var: Any) -> int:
    aval = getattr(var, "aval", None)
    return int(math.prod(aval.shape)) if aval is not None and hasattr(aval, "shape") else 0


def _shapes(eqn: Any) -> str:
    return ",".join(
        str(tuple(v.aval.shape)) for v in eqn.invars if hasattr(getattr(v, "aval", None), "shape")
    )
