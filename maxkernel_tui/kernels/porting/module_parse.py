"""Reading a KernelBench module file without running it: its imports, module-level constants,
`get_inputs()`, `get_init_inputs()` and `Model.__init__`, evaluated on a small static
interpreter. No jax, no torch.

Integer constants become `Dim`s that keep their names, so that the shapes built from them stay
expressions over the sizes in the generated `get_inputs`.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from maxkernel_tui.kernels.porting.layers import Layer, Sequential, build_layer
from maxkernel_tui.kernels.porting.values import (
    Dim,
    Init,
    InitKind,
    TensorInit,
    fail,
    line_of,
    near_constant,
    static,
)
from maxkernel_tui.kernels.task import TaskImportError

TORCH, NN, FUNCTIONAL = "torch", "torch.nn", "torch.nn.functional"
_DEFAULT_ALIASES = {"torch": TORCH, "nn": NN, "F": FUNCTIONAL, "math": "math"}
_BINARY: dict[type, Callable[[object, object], object]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}
_FACTORIES = {
    "randn": InitKind.NORMAL,
    "rand": InitKind.UNIFORM,
    "ones": InitKind.ONES,
    "zeros": InitKind.ZEROS,
}


@dataclass(frozen=True)
class Parameter:
    """`nn.Parameter(<tensor>)` assigned in `__init__`."""

    tensor: TensorInit


@dataclass
class ModuleFile:
    """The parts of a KernelBench file the translator reads."""

    aliases: dict[str, str]  # local name -> the module it stands for
    env: dict[str, object]  # module-level constants
    constants: dict[str, tuple[int, str]]  # integer constant -> (value, defining code)
    model: ast.ClassDef
    get_inputs: ast.FunctionDef
    get_init_inputs: ast.FunctionDef | None


@dataclass
class ModelSpec:
    """`Model(*get_init_inputs())` as the translator sees it."""

    attributes: dict[str, object] = field(default_factory=dict)  # in assignment order
    forward: ast.FunctionDef | None = None
    inputs: list[TensorInit] = field(default_factory=list)


def _aliases(tree: ast.Module) -> dict[str, str]:
    aliases = dict(_DEFAULT_ALIASES)
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def is_module_file(tree: ast.Module) -> bool:
    """A `class Model(...Module)` and a `get_inputs()` function: KernelBench's format."""
    names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    return "get_inputs" in names and any(
        isinstance(n, ast.ClassDef)
        and n.name == "Model"
        and any(ast.unparse(b).endswith("Module") for b in n.bases)
        for n in tree.body
    )


def read_module(source: str) -> ModuleFile:
    tree = ast.parse(source)
    if not is_module_file(tree):
        raise fail(
            None, "not a KernelBench module: it needs `class Model(nn.Module)` and `get_inputs()`"
        )
    aliases = _aliases(tree)
    evaluator = StaticEval({}, aliases)
    constants: dict[str, tuple[int, str]] = {}
    functions: dict[str, ast.FunctionDef] = {}
    model: ast.ClassDef | None = None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for name, value in _assignments(node, evaluator):
                if isinstance(value, Dim) or (
                    isinstance(value, int) and not isinstance(value, bool)
                ):
                    code = value.expr if isinstance(value, Dim) else repr(value)
                    constants[name] = (int(static(value)), code)  # type: ignore[call-overload]
                    value = Dim(constants[name][0], name)
                evaluator.env[name] = value
        elif isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.ClassDef) and node.name == "Model":
            model = node
    assert model is not None  # is_module_file
    return ModuleFile(
        aliases,
        evaluator.env,
        constants,
        model,
        functions["get_inputs"],
        functions.get("get_init_inputs"),
    )


def _assignments(node: ast.Assign, evaluator: StaticEval) -> list[tuple[str, object]]:
    """(name, value) of a module-level `a = 1`, `a = b = 1` or `a, b = 1, 2`; other
    assignments (to attributes, of things the evaluator cannot read) are left out."""
    pairs: list[tuple[str, ast.expr]] = []
    for target in node.targets:
        if isinstance(target, ast.Name):
            pairs.append((target.id, node.value))
        elif (
            isinstance(target, ast.Tuple)
            and isinstance(node.value, ast.Tuple)
            and len(target.elts) == len(node.value.elts)
        ):
            pairs += [
                (t.id, v) for t, v in zip(target.elts, node.value.elts) if isinstance(t, ast.Name)
            ]
    found = []
    for name, expression in pairs:
        try:
            found.append((name, evaluator.eval(expression)))
        except TaskImportError:
            continue  # not a constant (a device, a helper object): forward may not use it
    return found


class StaticEval:
    """Evaluates the constant parts of a module: sizes, layer constructors, parameter factories."""

    def __init__(self, env: dict[str, object], aliases: dict[str, str]) -> None:
        self.env = env
        self.aliases = aliases

    def dotted(self, node: ast.expr) -> str | None:
        """`nn.Conv2d` -> "torch.nn.Conv2d" through the file's imports; None if not a name."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None

    def eval(self, node: ast.expr) -> object:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.env:
                return self.env[node.id]
            if node.id in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[node.id]
            raise fail(line_of(node), f"`{node.id}` is not a constant the translator can read")
        if isinstance(node, ast.Tuple | ast.List):
            values = [self.eval(e) for e in node.elts]
            return tuple(values) if isinstance(node, ast.Tuple) else values
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            value = self.eval(node.operand)
            if isinstance(value, Dim):
                return (
                    Dim(-value.value, f"-{value.expr}") if isinstance(node.op, ast.USub) else value
                )
            return -value if isinstance(node.op, ast.USub) else value  # type: ignore[operator]
        if isinstance(node, ast.BinOp):
            return self._binary(node)
        if isinstance(node, ast.Attribute):
            return self._attribute(node)
        if isinstance(node, ast.Call):
            return self._call(node)
        raise fail(
            line_of(node), f"`{ast.unparse(node)}` is not a constant the translator can read"
        )

    def _attribute(self, node: ast.Attribute) -> object:
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            key = f"self.{node.attr}"
            if key in self.env:
                return self.env[key]
            raise fail(line_of(node), f"`self.{node.attr}` is used before it is set")
        name = self.dotted(node)
        if name in ("math.pi", "math.e"):
            return getattr(math, node.attr)
        raise fail(
            line_of(node), f"`{ast.unparse(node)}` is not a constant the translator can read"
        )

    def _binary(self, node: ast.BinOp) -> object:
        left, right = self.eval(node.left), self.eval(node.right)
        kind = type(node.op)
        if isinstance(left, TensorInit) or isinstance(right, TensorInit):
            return _scaled(left, right, kind, line_of(node))
        if kind not in _BINARY:
            raise fail(line_of(node), f"operator {ast.unparse(node)} is not supported here")
        value = _BINARY[kind](static(left), static(right))
        named = isinstance(left, Dim) or isinstance(right, Dim)
        if named and isinstance(value, int) and kind in _SYMBOL:
            code = f"({_code(left)} {_SYMBOL[kind]} {_code(right)})"
            return Dim(value, code)
        return value

    def _call(self, node: ast.Call) -> object:
        name = self.dotted(node.func)
        line = line_of(node)
        args = [
            self.eval(a.value) if isinstance(a, ast.Starred) else self.eval(a) for a in node.args
        ]
        if any(isinstance(a, ast.Starred) for a in node.args):
            args = _spread_starred(node.args, args)
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords if k.arg}
        if name == f"{NN}.Sequential":
            if not all(isinstance(a, Layer) for a in args):
                raise fail(line, "nn.Sequential takes layers only")
            return Sequential(tuple(args))  # type: ignore[arg-type]
        if name == f"{NN}.Parameter":
            if not args or not isinstance(args[0], TensorInit):
                raise fail(line, "nn.Parameter needs a tensor from torch.randn/rand/ones/zeros")
            # learned: one PyTorch starts at ones or zeros is drawn near them (near_constant)
            return Parameter(replace(args[0], init=near_constant(args[0].init)))
        layer = name.removeprefix(NN + ".") if name and name.startswith(NN + ".") else ""
        if layer[:1].isupper() and "." not in layer:
            return build_layer(layer, args, kwargs, line)  # an unknown layer is named there
        if name and name.startswith(TORCH + ".") and name.removeprefix(TORCH + ".") in _FACTORIES:
            shape = args[0] if len(args) == 1 and isinstance(args[0], tuple | list) else args
            kind = _FACTORIES[name.removeprefix(TORCH + ".")]
            return TensorInit(tuple(shape), Init(kind))
        if isinstance(node.func, ast.Name) and node.func.id in ("int", "float", "tuple", "list"):
            return {"int": int, "float": float, "tuple": tuple, "list": list}[node.func.id](
                *[static(a) for a in args]
            )
        if name and name.startswith("math.") and hasattr(math, name[5:]):
            return getattr(math, name[5:])(*[static(a) for a in args])
        shown = name or ast.unparse(node.func)
        raise fail(line, f"`{shown}(...)` is not supported by the translator here")


def _spread_starred(nodes: list[ast.expr], values: list[object]) -> list[object]:
    spread: list[object] = []
    for node, value in zip(nodes, values):
        spread.extend(value if isinstance(node, ast.Starred) else [value])  # type: ignore[arg-type]
    return spread


def _code(value: object) -> str:
    return value.expr if isinstance(value, Dim) else repr(value)


def _scaled(left: object, right: object, kind: type, line: int | None) -> TensorInit:
    """`torch.randn(n) * 0.02`, `torch.rand(n) * 2 - 1`, `0.1 + torch.rand(n)`: a factory's
    values scaled or shifted by a number."""
    tensor_left = isinstance(left, TensorInit)
    tensor, number = (left, right) if tensor_left else (right, left)
    assert isinstance(tensor, TensorInit)
    allowed = (ast.Mult, ast.Add, ast.Sub) + ((ast.Div,) if tensor_left else ())
    if not isinstance(number, int | float) or isinstance(number, bool) or kind not in allowed:
        raise fail(line, "a tensor may only be a factory times, plus, minus or over a number")
    scale, offset = tensor.init.scale, tensor.init.offset
    if kind is ast.Mult:
        scale, offset = scale * number, offset * number
    elif kind is ast.Div:
        scale, offset = scale / number, offset / number
    elif kind is ast.Add:
        offset += number
    elif tensor_left:
        offset -= number
    else:
        scale, offset = -scale, number - offset
    return TensorInit(tensor.shape, Init(tensor.init.kind, tensor.init.bound, scale, offset))


def run_function(fn: ast.FunctionDef, evaluator: StaticEval) -> object:
    """The value `fn` returns, executing its assignments statically."""
    for statement in fn.body:
        if isinstance(statement, ast.Return):
            return None if statement.value is None else evaluator.eval(statement.value)
        if isinstance(statement, ast.Assign) and all(
            isinstance(t, ast.Name) for t in statement.targets
        ):
            value = evaluator.eval(statement.value)
            for target in statement.targets:
                evaluator.env[target.id] = value  # type: ignore[attr-defined]
        elif not _is_docstring(statement):
            raise fail(line_of(statement), f"`{fn.name}` may only assign and return")
    raise fail(line_of(fn), f"`{fn.name}` returns nothing")


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _is_super_init(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Call)
        and "super(" in ast.unparse(statement.value.func)
    )


def build_model(module: ModuleFile) -> ModelSpec:
    """The model's attributes after `Model(*get_init_inputs())`, its forward and its inputs."""
    spec = ModelSpec()
    methods = {n.name: n for n in module.model.body if isinstance(n, ast.FunctionDef)}
    spec.forward = methods.get("forward")
    if spec.forward is None:
        raise fail(line_of(module.model), "class Model has no forward")
    init_args: list[object] = []
    if module.get_init_inputs is not None:
        returned = run_function(
            module.get_init_inputs, StaticEval(dict(module.env), module.aliases)
        )
        init_args = list(returned) if isinstance(returned, tuple | list) else [returned]
    if "__init__" in methods:
        _run_init(methods["__init__"], init_args, module, spec)
    inputs = run_function(module.get_inputs, StaticEval(dict(module.env), module.aliases))
    if not isinstance(inputs, tuple | list) or not all(isinstance(i, TensorInit) for i in inputs):
        raise fail(
            line_of(module.get_inputs), "get_inputs must return a list of torch.rand/randn tensors"
        )
    spec.inputs = [i for i in inputs if isinstance(i, TensorInit)]
    return spec


def _run_init(
    init: ast.FunctionDef, args: list[object], module: ModuleFile, spec: ModelSpec
) -> None:
    params = [a.arg for a in init.args.args[1:]]
    defaults = init.args.defaults
    env = dict(module.env)
    evaluator = StaticEval(env, module.aliases)
    for name, default in zip(params[len(params) - len(defaults) :], defaults):
        env[name] = evaluator.eval(default)
    if len(args) > len(params):
        raise fail(
            line_of(init), f"get_init_inputs gives {len(args)} values, __init__ takes {len(params)}"
        )
    env.update(zip(params, args))
    missing = [p for p in params if p not in env]
    if missing:
        raise fail(line_of(init), f"__init__ needs {', '.join(missing)} (not in get_init_inputs)")
    for statement in init.body:
        if _is_docstring(statement) or _is_super_init(statement):
            continue
        if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
            raise fail(line_of(statement), "__init__ may only assign attributes and locals")
        target = statement.targets[0]
        value = evaluator.eval(statement.value)
        if (
            isinstance(target, ast.Attribute)
            and isinstance(target.value, ast.Name)
            and target.value.id == "self"
        ):
            env[f"self.{target.attr}"] = value
            spec.attributes[target.attr] = value
        elif isinstance(target, ast.Name):
            env[target.id] = value
        else:
            raise fail(line_of(statement), f"cannot assign to `{ast.unparse(target)}`")
