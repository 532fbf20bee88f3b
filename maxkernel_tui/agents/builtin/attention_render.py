"""An attention spec -> a flash-attention kernel file (online softmax, f32 statistics in VMEM).

Grid (batch, query head, query block, key block) with the key blocks innermost and "arbitrary";
a query head reads key head h // group. Under a causal mask, key blocks wholly above the
diagonal are neither fetched (their index map clamps to the last block needed) nor computed,
and only blocks crossing the diagonal build the mask. The kernel's steps come from the real
code in pieces/attention.py.
"""

from __future__ import annotations

import textwrap

import numpy as np

from maxkernel_tui.agents.builtin import source_parts as parts
from maxkernel_tui.agents.builtin.attention import AttentionSpec
from maxkernel_tui.agents.builtin.pieces import attention as steps
from maxkernel_tui.agents.builtin.pieces import body_lines, function_source
from maxkernel_tui.agents.builtin.primitives import dtype_source
from maxkernel_tui.agents.builtin.program import Program
from maxkernel_tui.agents.builtin.tunables import Tunables


def render_attention(spec: AttentionSpec, program: Program, tunables: Tunables) -> str:
    rounds = np.dtype(spec.logits_dtype) != np.float32
    sections = [
        _docstring(spec) + "\n" + parts.imports("functools"),
        _constants(spec, tunables, rounds) + "\n" + parts.VMEM_CONSTANTS,
        parts.PICK_BLOCK,
        parts.BLOCK_BYTES,
        parts.COMPILER_PARAMS,
    ]
    if rounds:
        sections.append(
            f"def _as_reference_logits(logits):\n"
            '    """Round f32 logits where the reference rounds them '
            f"({np.dtype(spec.logits_dtype).name})."
            f'"""\n    return logits.astype(LOGITS_DTYPE).astype(jnp.float32)\n'
        )
    if spec.causal:
        sections.append(function_source(steps._last_kv_block))
    sections += [_kernel(spec, rounds), _computation(spec, program)]
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
    return "\n".join(
        [
            '"""Flash attention kernel, written by the built-in agent of maxkernel-tui from the '
            "reference's",
            "jaxpr (no task name or id was consulted).",
            "",
            *textwrap.wrap(plan, 96),
            '"""',
        ]
    )


def _constants(spec: AttentionSpec, tunables: Tunables, rounds: bool) -> str:
    lines = [
        "# Tunables: preferred query and key/value block lengths (shrunk to divisors of the "
        "sequence).",
        f"BLOCK_Q = {tunables.block_rows}",
        f"BLOCK_KV = {tunables.block_cols}",
    ]
    if spec.scale is not None:
        lines += ["# The reference's constant factor on the logits.", f"SCALE = {spec.scale!r}"]
    if spec.causal:
        lines += [
            "# What the reference writes into masked logits.",
            f"MASK_VALUE = {spec.mask_value!r}",
        ]
    if rounds:
        lines += [f"LOGITS_DTYPE = {dtype_source(spec.logits_dtype)}"]
    return "\n".join(lines) + "\n"


def _kernel(spec: AttentionSpec, rounds: bool) -> str:
    operands = ("q", "k", "v", "bias") if spec.bias is not None else ("q", "k", "v")
    refs = [f"{name}_ref" for name in (*operands, "o", "max", "sum", "acc")]
    logits = body_lines(steps.block_logits, 0)
    if rounds:
        logits.append("logits = _as_reference_logits(logits)")
    if spec.scale is not None:
        logits.append(
            "logits = _as_reference_logits(logits * SCALE)" if rounds else "logits = logits * SCALE"
        )
    if spec.bias is not None:
        added = "logits + bias_ref[...].astype(jnp.float32)"
        logits.append(f"logits = _as_reference_logits({added})" if rounds else f"logits = {added}")
    lines = [
        f"def _attention_kernel({', '.join(refs)}, *, block_q, block_k):",
        '    """One query block against one key block: update the running max, sum and output."""',
        "    qi, kj = pl.program_id(2), pl.program_id(3)",
        "",
        "    @pl.when(kj == 0)",
        "    def _start_row_block():",
        *body_lines(steps.start_statistics, 8),
        "",
    ]
    lines += ["    def _attend(masked):" if spec.causal else "    def _attend():"]
    lines += [f"        {line}" for line in logits]
    if spec.causal:
        lines += ["        if masked:", *body_lines(steps.causal_mask, 12)]
    lines += [*body_lines(steps.online_softmax_step, 8), ""]
    if spec.causal:
        lines += [
            "    # Blocks wholly below the diagonal need no mask; blocks wholly above it are "
            "skipped.",
            "    below = kj * block_k + block_k - 1 <= qi * block_q",
            "    crossing = jnp.logical_and(kj * block_k <= qi * block_q + block_q - 1, "
            "jnp.logical_not(below))",
            "    pl.when(below)(functools.partial(_attend, False))",
            "    pl.when(crossing)(functools.partial(_attend, True))",
            "    last = _last_kv_block(qi, block_q, block_k)",
        ]
    else:
        lines += ["    _attend()", "    last = pl.num_programs(3) - 1"]
    lines += [
        "",
        "    @pl.when(kj == last)",
        "    def _finish_row_block():",
        *body_lines(steps.finish_output, 8),
    ]
    return "\n".join(lines) + "\n"


def _computation(spec: AttentionSpec, program: Program) -> str:
    kv = "jnp.minimum(j, _last_kv_block(i, block_q, block_k))" if spec.causal else "j"
    lines = _layout_lines(spec, program) + _index_map_lines(spec, kv)
    operands = ["q", "k", "v"]
    specs = [
        "pl.BlockSpec((None, None, block_q, head_size), query_block)",
        "pl.BlockSpec((None, None, block_k, head_size), kv_block)",
        "pl.BlockSpec((None, None, block_k, head_size), kv_block)",
    ]
    blocks = [
        "_block_bytes(block_q, head_size, q.dtype)",
        "2 * _block_bytes(block_k, head_size, k.dtype)",
    ]
    if spec.bias is not None:
        bias = program.inputs[spec.bias]
        lead = ["b" if not bias.shape[0].is_one() else "0"] if len(bias.shape) == 4 else []
        lead.append("h" if not bias.shape[-3].is_one() else "0")
        lines += [
            "    def bias_block(b, h, i, j):",
            '        """The bias for query block i and key block j of head h."""',
            f"        return {', '.join(lead)}, i, {kv}",
            "",
        ]
        operands.append("bias")
        specs.append(
            f"pl.BlockSpec(({', '.join(['None'] * len(lead))}, block_q, block_k), bias_block)"
        )
        blocks.append("_block_bytes(block_q, block_k, bias.dtype)")
    blocks.append("_block_bytes(block_q, head_size, q.dtype)")  # the output block
    lines += _call_lines(spec, program, operands, specs, blocks)
    return "\n".join(lines) + "\n"


def _layout_lines(spec: AttentionSpec, program: Program) -> list[str]:
    """computation()'s start: q, k and v as (batch, heads, seq, dim), and the block lengths."""
    names = program.arg_names
    query, key, value = names[spec.query], names[spec.key], names[spec.value]
    lines = [f"def computation({', '.join(names)}):"]
    if spec.bias is not None and names[spec.bias] != "bias":
        lines += [f"    bias = {names[spec.bias]}"]
    if spec.seq_first:
        lines += [
            "    # The kernel's blocks want (seq, dim) last: move the heads in front of the "
            "sequence.",
            f"    q, k, v = (jnp.swapaxes(t, 1, 2) for t in ({query}, {key}, {value}))",
        ]
    elif (query, key, value) != ("q", "k", "v"):
        lines += [f"    q, k, v = {query}, {key}, {value}"]
    return lines + [
        "    batch, heads, seq, head_size = q.shape",
        "    group = heads // k.shape[1]",
        "    block_q = _pick_block(seq, BLOCK_Q, "
        f"{8 * max(1, 4 // program.inputs[spec.query].dtype.itemsize)})",
        "    block_k = _pick_block(seq, BLOCK_KV, 128)",
        "",
    ]


def _index_map_lines(spec: AttentionSpec, kv: str) -> list[str]:
    """The query and key/value index maps (`kv`: the key block a grid step reads)."""
    return [
        "    def query_block(b, h, i, j):",
        '        """Query (and output) block i of head h."""',
        "        return b, h, i, 0",
        "",
        "    def kv_block(b, h, i, j):",
        '        """Key/value block j of the key head that query head h reads'
        + (
            ' (clamped to the\n        last block the causal mask keeps)."""'
            if spec.causal
            else '."""'
        ),
        "        # lax.div: `//` on traced integers lowers through sign, which Mosaic lacks here.",
        f"        return b, jax.lax.div(h, group), {kv}, 0",
        "",
    ]


def _call_lines(
    spec: AttentionSpec, program: Program, operands: list[str], specs: list[str], blocks: list[str]
) -> list[str]:
    """The VMEM footprint, the pallas_call and the result in the reference's layout."""
    output = program.outputs[0]
    return [
        "    # Two buffers per block, f32 statistics and output accumulator, ~3 f32 logits "
        "temporaries.",
        "    footprint = 2 * (" + "\n                     + ".join(blocks) + ")",
        "    footprint += (2 * _block_bytes(block_q, 1, jnp.float32) + _block_bytes(block_q, "
        "head_size, jnp.float32)",
        "                  + 3 * _block_bytes(block_q, block_k, jnp.float32))",
        "    out = pl.pallas_call(",
        "        functools.partial(_attention_kernel, block_q=block_q, block_k=block_k),",
        "        out_shape=jax.ShapeDtypeStruct((batch, heads, seq, head_size), "
        f"{dtype_source(output.dtype)}),",
        "        grid=(batch, heads, seq // block_q, seq // block_k),",
        "        in_specs=[",
        *[f"            {s}," for s in specs],
        "        ],",
        "        out_specs=pl.BlockSpec((None, None, block_q, head_size), query_block),",
        "        scratch_shapes=[pltpu.VMEM((block_q, 1), jnp.float32), pltpu.VMEM((block_q, 1), "
        "jnp.float32),",
        "                        pltpu.VMEM((block_q, head_size), jnp.float32)],",
        '        compiler_params=_compiler_params(("parallel", "parallel", "parallel", '
        '"arbitrary"), footprint),',
        f"    )({', '.join(operands)})",
        f"    return {'jnp.swapaxes(out, 1, 2)' if spec.seq_first else 'out'}",
    ]
