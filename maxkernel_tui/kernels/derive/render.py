"""A plain task's reference.py rewritten in our format: `CONFIGS` with `bench`, the derived
`check` and `heldout`, and `get_inputs(config="bench", seed=0)`. Pure text and AST; no jax.

Called without arguments the new get_inputs builds exactly the production inputs it built
before (seed 0 keeps every fixed key), so MaxKernel's harness still reads the folder; the rest
of the file (the reference, helpers, comments) is kept as written.
"""

from __future__ import annotations

import ast
import pprint

from maxkernel_tui.kernels.derive.plan import Derivation
from maxkernel_tui.kernels.derive.rewrite import BuilderNames, rewritten_builder
from maxkernel_tui.kernels.derive.sites import SiteKind, function

WRITTEN = BuilderNames(function="get_inputs", sizes="_sizes", seed="seed", mix="_fresh_key")
_KEY_HELPER = '''

def _fresh_key(seed, key):
    """A fixed key of the original get_inputs, made fresh by the seed (seed 0 keeps it)."""
    return (int(seed) * 1_000_003 + int(key)) % (2**31 - 1)
'''


def our_format(reference_py: str, derivation: Derivation) -> str:
    """reference.py with CONFIGS and a get_inputs(config, seed) in place of the plain one."""
    if not derivation.derived:
        raise ValueError(f"check and heldout cannot be derived: {derivation.fallback}")
    module_level = [
        s.name for s in derivation.sites if s.kind in (SiteKind.MODULE, SiteKind.CONFIG)
    ]
    if module_level:
        raise ValueError(
            f"get_inputs reads module-level size(s) {module_level}: assign them inside get_inputs"
        )
    tree = ast.parse(reference_py)
    original = function(tree, derivation.builder)
    assert original is not None  # the derivation found it
    fn = rewritten_builder(tree, derivation.builder, derivation.sites, WRITTEN)
    # sizes come from CONFIGS[config]; seed becomes an ordinary parameter after config
    fn.args.posonlyargs = fn.args.posonlyargs[2:]
    fn.args.args = [ast.arg("config"), ast.arg("seed"), *fn.args.args]
    fn.args.defaults = [ast.Constant("bench"), ast.Constant(0), *fn.args.defaults]
    lookup = ast.parse(f"{WRITTEN.sizes} = CONFIGS[config]").body[0]
    fn.body.insert(_after_docstring(fn), lookup)
    configs = "CONFIGS = " + pprint.pformat(derivation.sizes, sort_dicts=False, width=96)
    comment = (
        "# Named input configurations: `bench` is the production shape; `check` and `heldout`\n"
        "# were derived from it by maxkernel-tui (same powers of two, up to 2048).\n"
    )
    new_function = (
        comment + configs + "\n" + _KEY_HELPER + "\n\n" + ast.unparse(ast.fix_missing_locations(fn))
    )
    lines = reference_py.splitlines()
    start = min([original.lineno] + [d.lineno for d in original.decorator_list]) - 1
    end = original.end_lineno or original.lineno
    return "\n".join(lines[:start] + new_function.splitlines() + lines[end:]) + "\n"


def _after_docstring(fn: ast.FunctionDef) -> int:
    first = fn.body[0] if fn.body else None
    is_doc = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant)
    return 1 if is_doc else 0
