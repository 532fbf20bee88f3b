"""A KernelBench module's source to a `Translation`: its sizes, its inputs (forward arguments,
then the parameters in the order `__init__` creates them) and the translated forward. No jax.
"""

from __future__ import annotations

import ast

from maxkernel_tui.kernels.porting.forward import ForwardTranslator, LayerInputs
from maxkernel_tui.kernels.porting.layers import Layer, Sequential
from maxkernel_tui.kernels.porting.module_parse import (
    ModelSpec,
    ModuleFile,
    Parameter,
    build_model,
    read_module,
)
from maxkernel_tui.kernels.porting.values import (
    Tensor,
    Translation,
    fail,
    line_of,
    shape_code,
)


def translate_module(source: str, name: str) -> Translation:
    """The translation of `source`; a `TaskImportError` naming the line of what it cannot do."""
    module = read_module(source)
    spec = build_model(module)
    assert spec.forward is not None  # build_model requires it
    arguments = [a.arg for a in spec.forward.args.args[1:]]
    if len(arguments) != len(spec.inputs):
        raise fail(
            line_of(spec.forward),
            f"forward takes {len(arguments)} tensors but get_inputs returns {len(spec.inputs)}",
        )
    parameters, layer_inputs = _parameters(spec, set(arguments))
    translator = ForwardTranslator(
        module, spec.attributes, layer_inputs, {p.name for p in parameters}
    )
    forward_inputs = [
        Tensor(translator.bind_argument(arg), tensor.shape, tensor.init)
        for arg, tensor in zip(arguments, spec.inputs)
    ]
    body = translator.statements(spec.forward)
    inputs = forward_inputs + parameters
    return Translation(
        name=name,
        constants=_used_constants(module, inputs),
        inputs=inputs,
        body=body,
        helpers=translator.helpers,
        operators=translator.operators,
    )


def _parameters(spec: ModelSpec, arguments: set[str]) -> tuple[list[Tensor], LayerInputs]:
    """The model's parameters as inputs, named `<attr>_<arg>` (`<attr>_<i>_<arg>` inside an
    `nn.Sequential`), each with its name in `state_dict()`."""
    tensors: list[Tensor] = []
    names = LayerInputs()

    def add(name: str, tensor: Tensor) -> str:
        while name in arguments or any(t.name == name for t in tensors):
            name += "_param"
        tensors.append(Tensor(name, tensor.shape, tensor.init, tensor.torch_path))
        return name

    def layer_params(layer: Layer, prefix: str, path: str) -> dict[str, str]:
        return {
            slot.arg: add(
                f"{prefix}_{slot.arg}",
                Tensor("", slot.shape, slot.init, f"{path}.{slot.arg}"),
            )
            for slot in layer.params
        }

    for attr, value in spec.attributes.items():
        if isinstance(value, Layer):
            names.layers[attr] = layer_params(value, attr, attr)
        elif isinstance(value, Sequential):
            names.sequences[attr] = [
                layer_params(layer, f"{attr}_{i}", f"{attr}.{i}")
                for i, layer in enumerate(value.layers)
            ]
        elif isinstance(value, Parameter):
            names.parameters[attr] = add(
                attr, Tensor("", value.tensor.shape, value.tensor.init, attr)
            )
    return tensors, names


def _used_constants(module: ModuleFile, inputs: list[Tensor]) -> dict[str, tuple[int, str]]:
    """The size constants the inputs' shapes and bounds are built from, with what they depend
    on, in the module's order."""
    codes = [shape_code(t.shape) for t in inputs] + [t.init.bound or "" for t in inputs]
    wanted = set()
    pending = [n for code in codes for n in _names(code)]
    while pending:
        name = pending.pop()
        if name in module.constants and name not in wanted:
            wanted.add(name)
            pending.extend(_names(module.constants[name][1]))
    return {n: v for n, v in module.constants.items() if n in wanted}


def _names(code: str) -> set[str]:
    if not code:
        return set()
    return {n.id for n in ast.walk(ast.parse(code, mode="eval")) if isinstance(n, ast.Name)}
