"""An attention spec -> a flash-attention kernel file: pieces/attention.py's kernel and wrapper,
copied as written, called with the spec's parameters; the block lengths are the file's tunables.
"""

from __future__ import annotations

import textwrap

import numpy as np

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.attention import AttentionSpec
from maxkernel_tui.agents.builtin.primitives import dtype_source, float_source
from maxkernel_tui.agents.builtin.program import Program
from maxkernel_tui.agents.builtin.tunables import Tunables


def render_attention(spec: AttentionSpec, program: Program, tunables: Tunables) -> str:
    sections = [
        _docstring(spec) + "\n" + parts.imports("functools"),
        _constants(spec, tunables) + "\n" + parts.VMEM_CONSTANTS,
        *parts.functions_source(parts.FLASH_ATTENTION),
        _computation(spec, program),
    ]
    return "\n\n".join(section.rstrip("\n") + "\n" for section in sections)


def _docstring(spec: AttentionSpec) -> str:
    layout = (
        "(batch, seq, heads, dim), transposed to (batch, heads, seq, dim) around the kernel"
        if spec.seq_first
        else "(batch, heads, seq, dim)"
    )
    pieces = [
        "scale" if spec.scale is not None else None,
        "bias" if spec.bias is not None else None,
        "causal mask" if spec.causal else None,
    ]
    reading = " + ".join(p for p in pieces if p) or "no scale, bias or mask"
    plan = (
        f"Plan: softmax over keys of Q K^T ({reading}), then times V; inputs {layout}; query head "
        "h "
        "reads key head h // group. The agent checked this reading against the reference at check "
        "shapes. Online softmax: running max and sum in f32 VMEM scratch, the output accumulated "
        "in "
        "f32 and divided once at the last key block. Key blocks innermost and 'arbitrary'."
    )
    return parts.kernel_docstring("Flash attention", plan)


def _constants(spec: AttentionSpec, tunables: Tunables) -> str:
    lines = [
        "# Tunables: preferred query and key/value block lengths (shrunk to divisors of the "
        "sequence).",
        f"BLOCK_Q = {tunables.block_rows}",
        f"BLOCK_KV = {tunables.block_cols}",
    ]
    if spec.scale is not None and spec.scale_per_dim:
        lines += [
            "# The reference's factor on the logits, times 1/sqrt(head dimension): the kernel "
            "reads the",
            "# head dimension from the query's shape.",
            f"SCALE = {spec.scale!r}",
        ]
    elif spec.scale is not None:
        lines += ["# The reference's constant factor on the logits.", f"SCALE = {spec.scale!r}"]
    if spec.causal:
        lines += [
            "# What the reference writes into masked logits.",
            f"MASK_VALUE = {float_source(spec.mask_value)}",
        ]
    return "\n".join(lines) + "\n"


def _computation(spec: AttentionSpec, program: Program) -> str:
    """computation(): the reference's arguments into pieces/attention.py's wrapper."""
    names = program.arg_names
    arguments = [names[spec.query], names[spec.key], names[spec.value]]
    if spec.bias is not None:
        arguments.append(names[spec.bias])
    arguments.append(f"out_dtype={dtype_source(program.outputs[0].dtype)}")
    body = ""
    if spec.scale is not None and spec.scale_per_dim:
        body = f"    scale = SCALE * {names[spec.query]}.shape[-1] ** -0.5  # 1/sqrt(head dim)\n"
        arguments.append("scale=scale")
    elif spec.scale is not None:
        arguments.append("scale=SCALE")
    if spec.causal:
        arguments += ["causal=True", "mask_value=MASK_VALUE"]
    if np.dtype(spec.logits_dtype) != np.float32:  # the reference rounds its logits
        arguments.append(f"logits_dtype={dtype_source(spec.logits_dtype)}")
    if spec.seq_first:
        arguments.append("seq_first=True")
    call = "    return _flash_attention("
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
