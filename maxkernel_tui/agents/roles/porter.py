"""The porter sub-agent: from a CUDA or Triton source (and the PyTorch harness in the file, if
any) it writes a JAX reference in the plain adapted format. Its request and its strict parser.
No jax.

Only LLM providers answer it; the built-in offline agent cannot port, and the porting flow says
so before asking (`agents/porting.py`).
"""

from __future__ import annotations

import ast
import re

from maxkernel_tui.agents.llm.types import Message, Request, Speaker
from maxkernel_tui.kernels.limits import text_oversize_problem

PORTER = "porter"
_PYTHON_BLOCK = re.compile(r"```(?:python|py)[ \t]*\n(.*?)\n```", re.DOTALL)
_ALLOWED_IMPORTS = ("jax", "math", "functools", "numpy", "typing")

JOB = (
    "You are the porter of a team that writes Pallas kernels for TPUs. Port the GPU kernel "
    "below (CUDA or Triton) to a plain JAX reference: the computation the kernel performs, "
    "written with jax.numpy and jax.lax, clear rather than fast. Answer with exactly one "
    "```python block holding the whole reference.py file."
)
FORMAT = (
    "Format of reference.py (the task format of the harness): it imports only jax, jax.numpy "
    "as jnp, jax.lax, math, functools and numpy; it defines `get_inputs(dtype=jnp.float32)` "
    "that assigns each production size as a local integer constant (`batch_size = 4096`), draws "
    "every input from keys split off `jax.random.key(0)` and returns two lists: "
    "`[dynamic arrays], [static Python values]`; and `computation(*dynamic, *static)` that "
    "returns the result. No torch, no triton, no file or network access."
)
HARNESS = (
    "The file has a PyTorch harness (`class Model`, `get_inputs`). Your reference is run "
    "beside it on the same inputs at small sizes and must agree: name every size of your "
    "`get_inputs` exactly as the harness's module-level constant, and make `computation`'s "
    "arguments the harness forward's inputs in order, then the model's parameters in "
    "`named_parameters()` order, drawn as PyTorch initialises them."
)


def build_port_request(
    source: str, filename: str, kind: str, has_harness: bool, *, model: str | None = None
) -> Request:
    system = "\n\n".join([JOB, FORMAT] + ([HARNESS] if has_harness else []))
    body = f"## Source ({kind}): {filename}\n```\n{source}\n```"
    return Request(
        messages=(Message(Speaker.USER, body),),
        system=system,
        model=model,
        max_tokens=8192,
        context={"role": PORTER},
    )


def parse_reference(text: str) -> str:
    """The reference.py of exactly one ```python block: it parses, imports only what the format
    allows, and defines `get_inputs(dtype=...)` and `computation`."""
    if too_large := text_oversize_problem(text, "the answer"):
        raise ValueError(too_large)
    blocks = _PYTHON_BLOCK.findall(text)
    if len(blocks) != 1:
        raise ValueError(
            f"answer with exactly one ```python block holding reference.py (found {len(blocks)})"
        )
    source = blocks[0].strip() + "\n"
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"reference.py does not parse: line {error.lineno}: {error.msg}") from None
    imported = [
        name
        for node in ast.walk(tree)
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    ]
    refused = sorted({n for n in imported if n.split(".")[0] not in _ALLOWED_IMPORTS})
    if refused:
        raise ValueError(f"reference.py may import only jax, math, functools and numpy: {refused}")
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    missing = [f for f in ("get_inputs", "computation") if f not in functions]
    if missing:
        raise ValueError(f"reference.py must define {' and '.join(missing)}")
    if [a.arg for a in functions["get_inputs"].args.args] != ["dtype"]:
        raise ValueError("get_inputs must take exactly one argument, `dtype=jnp.float32`")
    return source
