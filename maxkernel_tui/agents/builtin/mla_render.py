"""An MLA spec -> a kernel file: pieces/mla.py's layer with the matmul stage and the flash
attention copied as written, called with the spec's dims, RoPE and softmax parameters; the block
sizes are the file's tunables (the attention's query and key blocks follow the projections' row
and column blocks).
"""

from __future__ import annotations

import numpy as np

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.mla import MlaSpec
from maxkernel_tui.agents.builtin.primitives import dtype_source, float_source
from maxkernel_tui.agents.builtin.program import Program
from maxkernel_tui.agents.builtin.tunables import Tunables

_DOCSTRING = '''"""Multi-head latent attention kernel, written by maxkernel-tui's built-in agent
from the reference's jaxpr (no task name or id was consulted).

Plan: the projections (x . q_down . q_up for the queries, x . kv_down for the latent and the
shared rotary key, latent . k_up and latent . v_up for keys and values, and the output
projection) as Pallas matmul stages with f32 accumulation; RoPE on the rotary parts in jnp;
then flash attention over keys built from the latent (online softmax in f32 VMEM scratch, key
blocks innermost and 'arbitrary', causal blocks above the diagonal skipped). The agent checked
its reading of the projections, RoPE and softmax against the reference at check shapes.
"""
'''


def render_mla(spec: MlaSpec, program: Program, tunables: Tunables) -> str:
    sections = [
        _DOCSTRING + "\n" + parts.imports("functools"),
        _constants(spec, tunables) + "\n" + parts.VMEM_CONSTANTS,
        *parts.functions_source(parts.MATMUL_STAGE, parts.FLASH_ATTENTION, parts.MLA_LAYER),
        _computation(spec, program),
    ]
    return "\n\n".join(section.rstrip("\n") + "\n" for section in sections)


def _constants(spec: MlaSpec, tunables: Tunables) -> str:
    t = tunables
    lines = [
        "# Each block size shrinks to a divisor of the actual size that keeps the TPU's (8, 128)",
        "# tiling, and further while the VMEM footprint is over budget.",
        "# Tunables: preferred block sizes (projections, then attention's query and key blocks).",
        f"BLOCK_ROWS = {t.block_rows}",
        f"BLOCK_COLS = {t.block_cols}",
        f"BLOCK_DEPTH = {t.block_depth}",
        f"BLOCK_Q = {t.block_rows}",
        f"BLOCK_KV = {t.block_cols}",
    ]
    if spec.theta_arg is None:
        lines += ["", "# RoPE's frequency base.", f"ROPE_THETA = {spec.theta!r}"]
    core = spec.core
    if core.scale is not None:
        lines += [
            "# The reference's factor on the logits"
            + (" (times 1/sqrt(query head dim))." if core.scale_per_dim else "."),
            f"SCALE = {core.scale!r}",
        ]
    if core.causal:
        lines += [
            "# What the reference writes into masked logits.",
            f"MASK_VALUE = {float_source(core.mask_value)}",
        ]
    return "\n".join(lines) + "\n"


def _computation(spec: MlaSpec, program: Program) -> str:
    """computation(): the reference's arguments into pieces/mla.py's layer."""
    names = program.arg_names
    core = spec.core
    attend = [f"out_dtype={dtype_source(spec.attention_dtype)}", "seq_first=True"]
    if core.scale is not None:
        scale = "SCALE * q.shape[-1] ** -0.5" if core.scale_per_dim else "SCALE"
        attend.append(f"scale={scale}")
    if core.causal:
        attend += ["causal=True", "mask_value=MASK_VALUE"]
    if np.dtype(core.logits_dtype) != np.float32:  # the reference rounds its logits
        attend.append(f"logits_dtype={dtype_source(core.logits_dtype)}")
    arguments = ", ".join("None" if p is None else names[p] for p in spec.weights)
    return (
        f"def computation({', '.join(names)}):\n"
        "    def attend(q, k, v):\n"
        "        return _flash_attention(\n"
        "            q, k, v,\n" + "".join(f"            {a},\n" for a in attend) + "        )\n\n"
        "    return _mla_layer(\n"
        f"        {arguments},\n"
        "        project=_project,\n"
        "        attend=attend,\n"
        f"        theta={spec.theta_arg or 'ROPE_THETA'},\n"
        f"        table_dtype={dtype_source(spec.table_dtype)},\n"
        f"        interleaved={spec.interleaved},\n"
        "    )\n"
    )
