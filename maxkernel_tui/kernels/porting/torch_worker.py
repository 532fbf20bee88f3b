"""The worker of the PyTorch comparison: runs a KernelBench module (at the request's sizes, with
the translation's weights) and its traced JAX translation on the same inputs, and answers with
the first statement whose values differ. Imports torch and jax; run only as a worker.

Reads one `ComparisonRequest` as JSON on stdin; prints one `Comparison` as JSON.
"""

from __future__ import annotations

import ast
import json
import linecache
import sys
import traceback
from dataclasses import asdict
from typing import Any

import jax
import numpy as np
import torch

from maxkernel_tui.kernels.porting.torch_compare import Comparison, ComparisonRequest

Records = dict[tuple[int, str], np.ndarray]
OUTPUT = (0, "output")  # the final outputs, compared after the traced statements


class _Traced(ast.NodeTransformer):
    """Adds `record(line, name, value)` after each assignment of `Model.forward`, and records
    the returned value as `return`."""

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        if node.name == "Model":
            for method in node.body:
                if isinstance(method, ast.FunctionDef) and method.name == "forward":
                    method.body = [s for stmt in method.body for s in self._traced(stmt)]
        return node

    def _traced(self, stmt: ast.stmt) -> list[ast.stmt]:
        def record(name: str, value: ast.expr) -> ast.stmt:
            call = ast.Call(
                ast.Name("record", ast.Load()),
                [ast.Constant(stmt.lineno), ast.Constant(name), value],
                [],
            )
            return ast.copy_location(ast.Expr(call), stmt)

        if isinstance(stmt, ast.Return) and stmt.value is not None:
            keep = ast.copy_location(
                ast.Assign([ast.Name("result_", ast.Store())], stmt.value), stmt
            )
            done = ast.copy_location(ast.Return(ast.Name("result_", ast.Load())), stmt)
            return [keep, record("return", ast.Name("result_", ast.Load())), done]
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = [
                e for t in stmt.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])
            ]
        elif isinstance(stmt, ast.AugAssign):
            targets = [stmt.target]
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        return [stmt, *(record(n, ast.Name(n, ast.Load())) for n in names)]


def _set_sizes(body: list[ast.stmt], sizes: dict[str, int]) -> None:
    """Sets `name = <int>` assignments in `body` to `sizes` (line numbers kept)."""
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name) and target.id in sizes:
                node.value = ast.copy_location(ast.Constant(sizes[target.id]), node.value)


def _module_at_sizes(source: str, sizes: dict[str, int]) -> ast.Module:
    """The PyTorch module with its top-level size constants set to `sizes`, traced."""
    tree = ast.parse(source)
    _set_sizes(tree.body, sizes)
    traced: ast.Module = _Traced().visit(tree)
    return ast.fix_missing_locations(traced)


def _reference_at_sizes(source: str, sizes: dict[str, int]) -> ast.Module:
    """The JAX reference with the size constants of its `get_inputs` set to `sizes`."""
    tree = ast.parse(source)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "get_inputs":
            _set_sizes(node.body, sizes)
    return tree


def _as_file(name: str, source: str) -> str:
    """`name`, with `source` registered as its text: code that reads its own source (Triton's
    `@triton.jit`, `inspect`) then works on code compiled from a string."""
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    return name


def _recorder(records: Records) -> Any:
    def record(line: int, name: str, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            records[(line, name)] = value.detach().double().numpy()
        elif isinstance(value, jax.Array):
            records[(line, name)] = np.asarray(value, dtype=np.float64)

    return record


def run_torch(request: ComparisonRequest, inputs: list[np.ndarray]) -> Records:
    records: Records = {}
    namespace: dict[str, Any] = {"__name__": "kernelbench_module", "record": _recorder(records)}
    tree = _module_at_sizes(request.module_source, request.sizes)
    exec(compile(tree, _as_file("module.py", request.module_source), "exec"), namespace)
    model = namespace["Model"](*namespace.get("get_init_inputs", list)())
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.eval()  # the translation's dropout is eval mode's identity
    state = model.state_dict()
    paths = request.torch_paths
    if paths is None:  # by order: the forward's inputs, then the parameters
        names = [name for name, _ in model.named_parameters()]
        paths = [None] * (len(inputs) - len(names)) + names
    arguments = []
    for path, value in zip(paths, inputs):
        tensor = torch.from_numpy(np.array(value, dtype=np.float32))
        if path is None:
            arguments.append(tensor)
        else:
            if tuple(state[path].shape) != tuple(tensor.shape):
                raise ValueError(
                    f"{path}: PyTorch has {tuple(state[path].shape)}, the "
                    f"translation {tuple(tensor.shape)}"
                )
            state[path] = tensor
    model.load_state_dict(state)
    with torch.no_grad():
        records[OUTPUT] = model(*arguments).detach().double().numpy()
    return records


def run_jax(request: ComparisonRequest) -> tuple[list[np.ndarray], Records]:
    records: Records = {}
    namespace: dict[str, Any] = {"__name__": "traced_reference", "record": _recorder(records)}
    tree = _reference_at_sizes(request.reference, request.sizes)
    exec(compile(tree, "reference.py", "exec"), namespace)
    dynamic, static = jax.jit(namespace["get_inputs"])()
    output = namespace["computation"](*dynamic, *static)  # eager: `record` sees values
    records[OUTPUT] = np.asarray(output, dtype=np.float64)
    return [np.asarray(a) for a in dynamic], records


def first_divergence(request: ComparisonRequest, ours: Records, theirs: Records) -> Comparison:
    """The first of our records (in the order the reference made them) that PyTorch's record of
    the same line and name disagrees with; records PyTorch has not made are left out."""
    worst, compared = 0.0, 0
    for (line, name), value in ours.items():
        expected = theirs.get((line, name))
        if expected is None:
            continue
        compared += 1
        where = "the outputs" if (line, name) == OUTPUT else f"`{name}`"
        if expected.shape != value.shape:
            detail = f"{where}: shape {value.shape} where PyTorch has {expected.shape}"
            return Comparison(False, float("nan"), compared, line or None, name, detail)
        difference = float(np.max(np.abs(value - expected), initial=0.0))
        worst = max(worst, difference)
        if not np.allclose(value, expected, atol=request.atol, rtol=request.rtol):
            detail = f"{where} differ by up to {difference:.3g}"
            return Comparison(False, difference, compared, line or None, name, detail)
    return Comparison(True, worst, compared)


def main() -> None:
    # Both sides get the same inputs whatever the generator; eager threefry draws compile per
    # shape (over 40 s for one module on a loaded 2-core machine), rbg's in one program.
    jax.config.update("jax_default_prng_impl", "unsafe_rbg")
    request = ComparisonRequest(**json.loads(sys.stdin.read()))
    try:
        inputs, ours = run_jax(request)
        theirs = run_torch(request, inputs)
        result = first_divergence(request, ours, theirs)
    except Exception as error:
        tail = traceback.format_exc().strip().splitlines()[-1]
        result = Comparison(False, float("nan"), 0, error=f"{type(error).__name__}: {tail}")
    print(json.dumps(asdict(result)))


if __name__ == "__main__":
    main()
