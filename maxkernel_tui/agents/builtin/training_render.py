"""A training spec -> a kernel file: the family's forward and backward kernels and custom_vjp
wrapper from pieces/backward/, copied as written, called with the spec's operands and options;
the block sizes are the file's tunables. No jax at import beyond the pieces'.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from typing import Any

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.pieces import attention
from maxkernel_tui.agents.builtin.pieces.backward import cross_entropy, flash, gemm_gelu, rmsnorm
from maxkernel_tui.agents.builtin.primitives import dtype_source
from maxkernel_tui.agents.builtin.program import Program
from maxkernel_tui.agents.builtin.training import TrainingFamily, TrainingSpec
from maxkernel_tui.agents.builtin.tunables import Tunables

# Each family's functions, in order, and the entry point its computation() calls.
_PIECES: dict[TrainingFamily, tuple[Callable[..., Any], ...]] = {
    TrainingFamily.RMSNORM: (
        rmsnorm._rms_rows_forward_kernel,
        rmsnorm._rms_rows_backward_kernel,
        rmsnorm._rms_row_spec,
        rmsnorm._rms_forward,
        rmsnorm._rms_backward,
        rmsnorm._rmsnorm_training,
    ),
    TrainingFamily.GEMM_GELU: (
        gemm_gelu._gelu,
        gemm_gelu._gelu_grad,
        gemm_gelu._gelu_blocks,
        gemm_gelu._gelu_forward_kernel,
        gemm_gelu._gelu_dx_kernel,
        gemm_gelu._gelu_dw_kernel,
        gemm_gelu._gelu_matmul_call,
        gemm_gelu._gelu_forward,
        gemm_gelu._gelu_backward,
        gemm_gelu._gelu_gradient,
        gemm_gelu._gemm_gelu_training,
    ),
    TrainingFamily.CROSS_ENTROPY: (
        cross_entropy._xent_blocks,
        cross_entropy._label_hits,
        cross_entropy._xent_forward_kernel,
        cross_entropy._xent_backward_kernel,
        cross_entropy._row_vector_spec,
        cross_entropy._xent_forward,
        cross_entropy._xent_backward,
        cross_entropy._cross_entropy_training,
    ),
    TrainingFamily.FLASH_ATTENTION: (
        attention._last_kv_block,
        attention._start_statistics,
        attention._block_logits,
        attention._causal_mask,
        attention._online_softmax_step,
        attention._finish_output,
        flash._first_q_block,
        flash._causal_cases,
        flash._run_causal,
        flash._probabilities,
        flash._score_gradient,
        flash._backward_block,
        flash._flash_forward_kernel,
        flash._flash_dq_kernel,
        flash._transposed_dot,
        flash._flash_dkv_kernel,
        flash._flash_blocks,
        flash._flash_params,
        flash._attention_specs,
        flash._query_major_specs,
        flash._flash_forward,
        flash._flash_dq,
        flash._flash_dkv,
        flash._flash_attention_training,
    ),
}

_PLANS = {
    TrainingFamily.RMSNORM: "rows in blocks with the whole hidden axis; the forward saves each "
    "row's 1/rms; one backward pass writes dx and sums dscale in a VMEM-resident f32 block",
    TrainingFamily.GEMM_GELU: "a tiled matmul with f32 accumulation whose last depth step "
    "applies GELU and saves z; the backward rebuilds dy * gelu'(z) block by block inside the "
    "dx = g w^T and dw = x^T g matmuls (g never goes to HBM)",
    TrainingFamily.CROSS_ENTROPY: "an online log-sum-exp over vocabulary blocks that picks the "
    "label's logit on the way and saves each row's lse; the backward writes softmax - onehot "
    "from the lse in one pass, every block independent",
    TrainingFamily.FLASH_ATTENTION: "online-softmax forward that saves each query row's "
    "log-sum-exp; a dq kernel (keys innermost, also writing rowsum(dO * O)) and a dk/dv kernel "
    "(queries innermost); under a causal mask blocks above the diagonal are neither fetched "
    "nor computed",
}


def training_tunables(family: TrainingFamily) -> Tunables:
    """The pieces' own preferred blocks (rows or queries, columns or keys, depth)."""
    if family is TrainingFamily.FLASH_ATTENTION:
        return Tunables(flash.BLOCK_Q, flash.BLOCK_KV)
    if family is TrainingFamily.CROSS_ENTROPY:
        return Tunables(cross_entropy.BLOCK_ROWS, cross_entropy.BLOCK_COLS)
    if family is TrainingFamily.RMSNORM:
        return Tunables(rmsnorm.BLOCK_ROWS)
    return Tunables(gemm_gelu.BLOCK_ROWS, gemm_gelu.BLOCK_COLS, gemm_gelu.BLOCK_DEPTH)


def training_knobs(family: TrainingFamily) -> tuple[str, ...]:
    """The tunables the family's kernels read (training_tunables' fields that matter)."""
    if family is TrainingFamily.RMSNORM:
        return ("block_rows",)
    if family is TrainingFamily.GEMM_GELU:
        return ("block_rows", "block_cols", "block_depth")
    return ("block_rows", "block_cols")


def render_training(spec: TrainingSpec, program: Program, tunables: Tunables) -> str:
    sections = [
        _docstring(spec) + "\n" + parts.imports("functools", "math"),
        _constants(spec, tunables) + "\n" + parts.VMEM_CONSTANTS,
        *parts.functions_source(_PIECES[spec.family]),
        _computation(spec, program),
    ]
    return "\n\n".join(section.rstrip("\n") + "\n" for section in sections)


def _docstring(spec: TrainingSpec) -> str:
    plan = (
        f"Plan: {spec.family} as a jax.custom_vjp whose forward and backward are Pallas "
        f"kernels: {_PLANS[spec.family]}. The agent checked this reading against the reference "
        "at check shapes."
    )
    return parts.kernel_docstring(f"{spec.family} training (forward and backward)", plan)


def _constants(spec: TrainingSpec, tunables: Tunables) -> str:
    head = "# Tunables: preferred block sizes (shrunk to divisors of the actual sizes)."
    if spec.family is TrainingFamily.FLASH_ATTENTION:
        values = {"BLOCK_Q": tunables.block_rows, "BLOCK_KV": tunables.block_cols}
    elif spec.family is TrainingFamily.RMSNORM:
        values = {"BLOCK_ROWS": tunables.block_rows}
    elif spec.family is TrainingFamily.CROSS_ENTROPY:
        values = {"BLOCK_ROWS": tunables.block_rows, "BLOCK_COLS": tunables.block_cols}
    else:
        values = {
            "BLOCK_ROWS": tunables.block_rows,
            "BLOCK_COLS": tunables.block_cols,
            "BLOCK_DEPTH": tunables.block_depth,
        }
    return "\n".join([head, *(f"{name} = {value}" for name, value in values.items())]) + "\n"


_ENTRY = {
    TrainingFamily.RMSNORM: "_rmsnorm_training",
    TrainingFamily.GEMM_GELU: "_gemm_gelu_training",
    TrainingFamily.CROSS_ENTROPY: "_cross_entropy_training",
    TrainingFamily.FLASH_ATTENTION: "_flash_attention_training",
}


def _computation(spec: TrainingSpec, program: Program) -> str:
    """computation(): the reference's arguments into the family's custom_vjp wrapper."""
    names = program.arg_names
    arguments = [names[i] for i in spec.operands]
    body = ""
    options = dict(spec.options)
    if "scale_per_dim" in options:  # the scale follows the head dimension of each input
        body = (
            f"    scale = {options.pop('scale_per_dim')!r} * "
            f"{names[spec.operands[0]]}.shape[-1] ** -0.5\n"
        )
        arguments.append("scale=scale")
    if spec.family in (TrainingFamily.GEMM_GELU, TrainingFamily.FLASH_ATTENTION):
        arguments.append(f"out_dtype={dtype_source(spec.out_dtype)}")
    arguments += [f"{key}={_literal(value)}" for key, value in options.items()]
    call = f"    return {_ENTRY[spec.family]}("
    lines = textwrap.wrap(
        ", ".join(arguments), 100 - len(call), break_long_words=False, break_on_hyphens=False
    )
    return (
        f"def computation({', '.join(names)}):\n"
        + body
        + call
        + f"\n{' ' * len(call)}".join(lines)
        + ")\n"
    )


def _literal(value: object) -> str:
    """Python source for an option: an infinite float as float('-inf'), not a bare name."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, str):  # an enum's value: the piece takes the plain string
        return repr(str(value))
    return repr(value)
