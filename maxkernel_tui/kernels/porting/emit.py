"""Rendering a `Translation` as `reference.py` in the plain adapted format: production sizes as
integer constants in `get_inputs(dtype=jnp.float32)`, keys from `jax.random.key(0)`, the
parameters drawn as PyTorch initialises them, `[dynamic], [static]` returned, and
`computation(...)` with the helpers it calls copied in. No jax.
"""

from __future__ import annotations

from maxkernel_tui.kernels.porting.helper_source import helpers_source, import_lines
from maxkernel_tui.kernels.porting.values import InitKind, Tensor, Translation, shape_code

INDENT = "    "


def draw(tensor: Tensor, key: str) -> str:
    """The expression drawing `tensor`'s initial values."""
    shape = shape_code(tensor.shape)
    init = tensor.init
    if init.kind == InitKind.ONES:
        value = f"jnp.ones({shape}, dtype=dtype)"
    elif init.kind == InitKind.ZEROS:
        value = f"jnp.zeros({shape}, dtype=dtype)"
    elif init.kind == InitKind.NORMAL:
        value = f"jax.random.normal({key}, {shape}, dtype=dtype)"
    elif init.bound:
        value = (
            f"jax.random.uniform({key}, {shape}, dtype=dtype, "
            f"minval=-({init.bound}), maxval={init.bound})"
        )
    else:
        value = f"jax.random.uniform({key}, {shape}, dtype=dtype)"
    if init.scale != 1.0:
        value = f"{value} * {init.scale!r}"
    if init.offset != 0.0:
        value = f"{value} + {init.offset!r}"
    return value


def render_get_inputs(translation: Translation) -> str:
    lines = ["def get_inputs(dtype=jnp.float32):"]
    lines += [f"{INDENT}{name} = {code}" for name, (_, code) in translation.constants.items()]
    random = [t for t in translation.inputs if t.init.kind in (InitKind.UNIFORM, InitKind.NORMAL)]
    if random:
        lines.append(f"{INDENT}keys = jax.random.split(jax.random.key(0), {len(random)})")
    for tensor in translation.inputs:
        key = f"keys[{random.index(tensor)}]" if tensor in random else ""
        comment = f"  # Model.{tensor.torch_path}" if tensor.torch_path else ""
        lines.append(f"{INDENT}{tensor.name} = {draw(tensor, key)}{comment}")
    names = ", ".join(t.name for t in translation.inputs)
    lines.append(f"{INDENT}return [{names}], []")
    return "\n".join(lines)


def render_computation(translation: Translation, traced: bool = False) -> str:
    """`computation`; `traced` adds a `record(line, name, value)` call after each statement
    (`record` is given by whoever runs it: the PyTorch comparison)."""
    names = ", ".join(t.name for t in translation.inputs)
    lines = [f"def computation({names}):"]
    for statement in translation.body:
        if traced and statement.returned:
            result = statement.code.removeprefix("return ")
            lines.append(f"{INDENT}result_ = {result}")
            lines.append(f"{INDENT}record({statement.line}, 'return', result_)")
            lines.append(f"{INDENT}return result_")
            continue
        lines.append(f"{INDENT}{statement.code}  # line {statement.line}")
        if traced:
            lines += [
                f"{INDENT}record({statement.line}, {source!r}, {name})"
                for source, name in statement.assigned
            ]
    return "\n".join(lines)


def render_reference(translation: Translation, header: str, traced: bool = False) -> str:
    """The whole `reference.py`: docstring, imports, helpers, `get_inputs`, `computation`."""
    parts = [f'"""{header}"""', import_lines()]
    if translation.helpers:
        parts.append(helpers_source(translation.helpers))
    parts += [render_get_inputs(translation), render_computation(translation, traced)]
    return "\n\n\n".join(parts) + "\n"
