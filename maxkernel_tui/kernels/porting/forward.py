"""Translating `Model.forward` into the body of `computation`, statement by statement, through
the operator table. No jax.

Tensors become code; constants (sizes, `self.eps`, literals) stay Python values, so an operator
can check that its `dim` or `kernel_size` is known when the reference is written.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from maxkernel_tui.kernels.porting.helper_source import helper_names
from maxkernel_tui.kernels.porting.layers import Layer, Sequential
from maxkernel_tui.kernels.porting.module_parse import (
    FUNCTIONAL,
    TORCH,
    ModuleFile,
    Parameter,
    StaticEval,
)
from maxkernel_tui.kernels.porting.operators import OPS, VARARGS, emit_op
from maxkernel_tui.kernels.porting.values import (
    NOT_STATIC,
    Expr,
    Statement,
    fail,
    line_of,
    literal,
    static,
)

_ARITH = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.MatMult: "@",
}
_STATIC_ARITH: dict[str, Callable[[Any, Any], object]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "@": operator.matmul,
}
RESERVED = frozenset({"jax", "jnp", "lax", "math", "NamedTuple", "computation", "get_inputs"})


@dataclass
class LayerInputs:
    """The reference's input names for the parameters of each attribute of the model."""

    layers: dict[str, dict[str, str]] = field(default_factory=dict)  # attr -> {arg: input}
    sequences: dict[str, list[dict[str, str]]] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)  # attr -> input


class ForwardTranslator:
    def __init__(
        self,
        module: ModuleFile,
        attributes: dict[str, object],
        inputs: LayerInputs,
        taken: set[str],
    ) -> None:
        self.module = module
        self.attributes = attributes
        self.inputs = inputs
        self.names = StaticEval(module.env, module.aliases)
        self.taken = taken | RESERVED | helper_names()
        self.locals: dict[str, Expr] = {}
        self.renamed: dict[str, str] = {}
        self.helpers: set[str] = set()
        self.operators: list[str] = []

    # names ---------------------------------------------------------------------------------
    def bind_argument(self, name: str) -> str:
        """The reference's name for forward argument or local `name` (renamed off a clash)."""
        if name not in self.renamed:
            chosen = name
            while chosen in self.taken:
                chosen += "_"
            self.renamed[name] = chosen
        self.locals[name] = Expr(self.renamed[name])
        return self.renamed[name]

    # statements ----------------------------------------------------------------------------
    def statements(self, forward: ast.FunctionDef) -> list[Statement]:
        body: list[Statement] = []
        for node in forward.body:
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
                continue
            body.append(self.statement(node))
        if not body or not body[-1].returned:
            raise fail(line_of(forward), "forward must end with a return")
        return body

    def statement(self, node: ast.stmt) -> Statement:
        line = line_of(node) or 0
        if isinstance(node, ast.Return):
            if node.value is None:
                raise fail(line, "forward must return a tensor")
            return Statement(line, f"return {self.expr(node.value).code}", returned=True)
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            value = self.expr(node.value)
            return self._assign(node.targets[0], value, line)
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            symbol = _ARITH.get(type(node.op))
            if symbol is None:
                raise fail(line, f"operator {ast.unparse(node)} is not supported")
            current = self.expr(node.target)
            value = self.expr(node.value)
            return self._assign(node.target, self._arith(current, symbol, value), line)
        kind = type(node).__name__.lower()
        raise fail(
            line, f"`{kind}` statements are not supported in forward: {ast.unparse(node)[:60]}"
        )

    def _assign(self, target: ast.expr, value: Expr, line: int) -> Statement:
        if isinstance(target, ast.Name):
            name = self.bind_argument(target.id)
            self.locals[target.id] = Expr(name, value.value)
            return Statement(line, f"{name} = {value.code}", ((target.id, name),))
        if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
            pairs = tuple((e.id, self.bind_argument(e.id)) for e in target.elts)  # type: ignore[attr-defined]
            return Statement(line, f"{', '.join(n for _, n in pairs)} = {value.code}", pairs)
        raise fail(line, f"cannot assign to `{ast.unparse(target)}`")

    # expressions ---------------------------------------------------------------------------
    def expr(self, node: ast.expr) -> Expr:
        line = line_of(node)
        if isinstance(node, ast.Constant):
            return literal(node.value)
        if isinstance(node, ast.Name):
            if node.id in self.locals:
                return self.locals[node.id]
            if node.id in self.module.env:
                return literal(static(self.module.env[node.id]))
            raise fail(line, f"`{node.id}` is not defined in forward")
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.BinOp):
            symbol = _ARITH.get(type(node.op))
            if symbol is None:
                raise fail(line, f"operator {ast.unparse(node)} is not supported")
            return self._arith(self.expr(node.left), symbol, self.expr(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = self.expr(node.operand)
            sign = "-" if isinstance(node.op, ast.USub) else "+"
            if operand.is_static:
                return literal(-operand.value if sign == "-" else operand.value)  # type: ignore[operator]
            return Expr(f"({sign}{operand.code})")
        if isinstance(node, ast.Tuple | ast.List):
            items = [self.expr(e) for e in node.elts]
            if all(i.is_static for i in items):
                values = [i.value for i in items]
                return literal(tuple(values) if isinstance(node, ast.Tuple) else values)
            inner = ", ".join(i.code for i in items)
            return Expr(f"({inner},)" if len(items) == 1 else f"({inner})")
        if isinstance(node, ast.Subscript):
            return Expr(f"{self.expr(node.value).code}[{self._index(node.slice)}]")
        if isinstance(node, ast.Call):
            return self._call(node)
        raise fail(line, f"`{ast.unparse(node)[:60]}` is not supported in forward")

    def _index(self, node: ast.expr) -> str:
        if isinstance(node, ast.Slice):
            parts = [self.expr(p).code if p else "" for p in (node.lower, node.upper)]
            step = f":{self.expr(node.step).code}" if node.step else ""
            return f"{parts[0]}:{parts[1]}{step}"
        if isinstance(node, ast.Tuple):
            return ", ".join(self._index(e) for e in node.elts)
        if isinstance(node, ast.Constant) and node.value is Ellipsis:
            return "..."
        return self.expr(node).code

    def _arith(self, left: Expr, symbol: str, right: Expr) -> Expr:
        if left.is_static and right.is_static:
            return literal(_STATIC_ARITH[symbol](left.value, right.value))
        if symbol == "@":
            self.operators.append("matmul")
        return Expr(f"({left.code} {symbol} {right.code})")

    def _attribute(self, node: ast.Attribute) -> Expr:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            if node.attr == "training":
                return literal(False)
            if node.attr in self.inputs.parameters:
                return Expr(self.inputs.parameters[node.attr])
            if node.attr not in self.attributes:
                raise fail(line_of(node), f"`self.{node.attr}` is not set in __init__")
            value = self.attributes[node.attr]
            if isinstance(value, Layer | Sequential | Parameter):
                raise fail(line_of(node), f"`self.{node.attr}` is a layer; call it")
            return literal(static(value))
        base = self.expr(node.value)
        if node.attr in ("shape", "T", "ndim", "mT"):
            return Expr(f"{base.code}.{'mT' if node.attr == 'mT' else node.attr}")
        if node.attr in ("values", "indices"):
            return Expr(f"{base.code}.{node.attr}")
        raise fail(line_of(node), f"attribute `.{node.attr}` is not supported")

    def _call(self, node: ast.Call) -> Expr:
        line = line_of(node)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        ):
            return self._layer_call(func.attr, node)
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise fail(line, f"`*` arguments are not supported: {ast.unparse(node)[:60]}")
        args = [self.expr(a) for a in node.args]
        kwargs = {k.arg: self.expr(k.value) for k in node.keywords if k.arg}
        dotted = self.names.dotted(func)
        if dotted is not None:
            for prefix in (FUNCTIONAL + ".", TORCH + "."):
                if dotted.startswith(prefix):
                    return self._op(dotted.removeprefix(prefix), args, kwargs, line, dotted)
            raise fail(line, f"operator `{dotted}` is not supported by the translator")
        if isinstance(func, ast.Attribute):
            receiver = self.expr(func.value)
            return self._op(func.attr, [receiver, *args], kwargs, line, f"Tensor.{func.attr}")
        raise fail(line, f"call `{ast.unparse(func)}` is not supported by the translator")

    def _op(
        self, name: str, args: list[Expr], kwargs: dict[str, Expr], line: int | None, shown: str
    ) -> Expr:
        if name in VARARGS:
            if kwargs or not args:
                raise fail(line, f"`{shown}` takes its sizes positionally")
            self.operators.append(name)
            return Expr(VARARGS[name](args[0], args[1:], f"`{shown}`", line))
        if name not in OPS:
            raise fail(line, f"operator `{shown}` is not supported by the translator")
        code, helpers = emit_op(name, args, kwargs, line)
        self.helpers.update(helpers)
        self.operators.append(name)
        return Expr(code, NOT_STATIC)

    def _layer_call(self, attr: str, node: ast.Call) -> Expr:
        line = line_of(node)
        value = self.attributes.get(attr)
        if len(node.args) != 1 or node.keywords:
            raise fail(line, f"`self.{attr}(...)` takes one tensor")
        x = self.expr(node.args[0])
        if isinstance(value, Layer):
            return self._apply(value, x, self.inputs.layers[attr], line)
        if isinstance(value, Sequential):
            for layer, names in zip(value.layers, self.inputs.sequences[attr]):
                x = self._apply(layer, x, names, line)
            return x
        raise fail(line, f"`self.{attr}` is not a layer the translator knows")

    def _apply(self, layer: Layer, x: Expr, names: dict[str, str], line: int | None) -> Expr:
        kwargs = {k: literal(v) for k, v in layer.arguments.items()}
        kwargs.update({arg: Expr(name) for arg, name in names.items()})
        code, helpers = emit_op(layer.op, [x], kwargs, line)
        self.helpers.update(helpers)
        self.operators.append(layer.kind)
        return Expr(code)
