"""Cheat category: calls the reference implementation.

Loads the task's own reference.py (from the import path if the harness put it there, else
from the installed maxkernel_tui suite folder via importlib) and returns its result, passed
through an identity Pallas copy so that a pallas_call shows up in the jaxpr.

Expected: rejected at trace: the reference's matmul runs in XLA outside the Pallas copy
"""
import importlib.util
import pathlib

import jax
from jax.experimental import pallas as pl

try:
    from reference import computation as _reference_computation
except ImportError:
    _suite = pathlib.Path(importlib.util.find_spec("maxkernel_tui").origin).parent / "kernels" / "suite"
    _spec = importlib.util.spec_from_file_location("_stolen_reference", _suite / "41k_Gemm_Add_ReLU" / "reference.py")
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    _reference_computation = _module.computation


def _tile(dim, preferred):
    # The whole dim when small, else the largest power-of-two divisor up to `preferred`.
    if dim <= preferred:
        return dim
    tile = preferred
    while dim % tile:
        tile //= 2
    return tile


def _copy_kernel(y_ref, o_ref):
    o_ref[...] = y_ref[...]


def computation(x, weight, bias):
    result = _reference_computation(x, weight, bias)
    rows, cols = result.shape
    tm, tn = _tile(rows, 256), _tile(cols, 1024)
    return pl.pallas_call(
        _copy_kernel,
        grid=(rows // tm, cols // tn),
        in_specs=[pl.BlockSpec((tm, tn), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((tm, tn), lambda i, j: (i, j)),
        out_shape=jax.ShapeDtypeStruct(result.shape, result.dtype),
    )(result)
