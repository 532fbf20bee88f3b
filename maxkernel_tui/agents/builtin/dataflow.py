"""Which sizes of the reference are the same size: bound by where they flow, never by value.

Every axis of every value is a node. An input's axes start as nodes of their own; the equations
of the reference's jaxpr tie nodes that must be equal (a contraction's two sides, the operands
of an element-wise op, a broadcast's mapped axes) and define the sizes they make (a reshape's
merged axes are the product of what they merge, a split's parts divide what they split, a
valid convolution's output is its input shifted). Two sizes that merely have the same value,
at one configuration or at all of them, stay apart unless the program ties them. Once the walk
is over, each class of tied nodes resolves to one `Dim` (dims.py): a symbol read from the first
input axis in its class, a product, quotient or shift of other classes, or, for the few sizes no
rule reaches (an iota's length, a broadcast of a constant), an expression found by value.

No jax here: the rules read primitive names, parameters and the sizes of both traces.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from maxkernel_tui.agents.builtin.dims import Dim, DimTable, ShapeRuleError
from maxkernel_tui.agents.builtin.primitives import is_elementwise
from maxkernel_tui.kernels.perf.primitive_names import AXIS_REDUCTIONS, CUMULATIVE_REDUCTIONS

Values = tuple[int, int]  # a size at bench shapes and at the probe (check) shapes
Nodes = tuple[int, ...]  # one node per axis of a value

# Primitives besides the element-wise ones whose result has the shape of their operand.
_SAME_SHAPE = CUMULATIVE_REDUCTIONS | {"rev", "sort", "reduce_precision"}


@dataclass(frozen=True)
class Product:
    """A size that is the product of others: axes merged by a reshape."""

    factors: Nodes


@dataclass(frozen=True)
class Part:
    """One part of a size split by a reshape into `parts` (this one at `index`)."""

    source: int
    parts: Nodes
    index: int


@dataclass(frozen=True)
class Shift:
    """A size times a stride plus a constant offset, less another size where one is given: a
    valid convolution's output, height - kh + 1 (taps fixed: height - 2); a transposed
    convolution's, stride * depth when its padding and taps make up for the dilation."""

    base: int
    offset: int
    less: int | None = None
    scale: int = 1


Definition = Product | Part | Shift


class SizeFlow:
    """Union-find over size nodes, with the definitions of the sizes equations make.

    `tie_equal_inputs`: input axes of equal values in both traces are tied too (binding by
    value, the fallback for plans that need two coincident sizes to be one, as attention's
    query and key lengths)."""

    def __init__(self, tie_equal_inputs: bool = False) -> None:
        self.tie_equal_inputs = tie_equal_inputs
        self._parent: list[int] = []
        self._values: list[Values] = []
        self._origins: dict[int, tuple[int, int]] = {}  # input node -> (input position, axis)
        self._definitions: dict[int, Definition] = {}

    # -- building --------------------------------------------------------------------------
    def node(self, values: Values) -> int:
        self._parent.append(len(self._parent))
        self._values.append(values)
        return len(self._parent) - 1

    def nodes(self, bench: tuple[int, ...], check: tuple[int, ...]) -> Nodes:
        return tuple(self.node((b, c)) for b, c in zip(bench, check, strict=True))

    def input_nodes(self, bench: tuple[int, ...], check: tuple[int, ...], position: int) -> Nodes:
        nodes = self.nodes(bench, check)
        for axis, node in enumerate(nodes):
            self._origins[node] = (position, axis)
            if self.tie_equal_inputs:
                for other in list(self._origins):
                    if other != node and self._values[other] == self._values[node]:
                        self.tie(other, node)
                        break
        return nodes

    def define(self, node: int, definition: Definition) -> None:
        self._definitions.setdefault(node, definition)

    def values(self, node: int) -> Values:
        return self._values[node]

    def find(self, node: int) -> int:
        while self._parent[node] != node:
            self._parent[node] = self._parent[self._parent[node]]
            node = self._parent[node]
        return node

    def tie(self, a: int, b: int) -> None:
        """Record that two sizes are one. Sizes of different values are never tied (a rule that
        asks for it read an equation it does not understand); sizes of 1 need no tie."""
        if self._values[a] != self._values[b] or self._values[a] == (1, 1):
            return
        root_a, root_b = self.find(a), self.find(b)
        if root_a != root_b:
            self._parent[max(root_a, root_b)] = min(root_a, root_b)

    def tie_all(self, a: Nodes, b: Nodes) -> None:
        for x, y in zip(a, b, strict=True):
            self.tie(x, y)

    def close(self) -> None:
        """Congruence: two products of the same classes are one size, and so are the parts of a
        split merged back and the size they were split from (a group norm's (rows, groups,
        width) reshaped back to (rows, features))."""
        merged = True
        while merged:
            merged = False
            seen: dict[tuple[int, ...], int] = {
                tuple(sorted(self.find(p) for p in d.parts)): d.source
                for d in self._definitions.values()
                if isinstance(d, Part)
            }
            for node, definition in self._definitions.items():
                if not isinstance(definition, Product):
                    continue
                key = tuple(sorted(self.find(f) for f in definition.factors))
                other = seen.setdefault(key, node)
                if self.find(other) != self.find(node):
                    self.tie(other, node)
                    merged = merged or self.find(other) == self.find(node)

    # -- resolving -----------------------------------------------------------------------------
    def resolver(self, table: DimTable) -> SizeResolver:
        self.close()
        return SizeResolver(self, table)

    def class_definitions(self) -> dict[int, list[Definition]]:
        found: dict[int, list[Definition]] = {}
        for node in sorted(self._definitions):
            found.setdefault(self.find(node), []).append(self._definitions[node])
        return found

    def class_origins(self) -> dict[int, tuple[int, int]]:
        """The first input axis of each class that holds one."""
        found: dict[int, tuple[int, int]] = {}
        for node in sorted(self._origins, key=self._origins.__getitem__):
            found.setdefault(self.find(node), self._origins[node])
        return found

    def input_classes(self) -> dict[int, list[tuple[int, int]]]:
        """Every input axis (but size-1 ones), grouped by class: root -> [(position, axis)]."""
        self.close()
        found: dict[int, list[tuple[int, int]]] = {}
        for node, origin in sorted(self._origins.items(), key=lambda item: item[1]):
            if self._values[node] != (1, 1):
                found.setdefault(self.find(node), []).append(origin)
        return found


class SizeResolver:
    """Each class of nodes as a `Dim`: a definition over other sizes (product, part, shift)
    first, so equal products compare equal; else the symbol of its first input axis; else a
    definition that came out constant; else by value."""

    def __init__(self, flow: SizeFlow, table: DimTable) -> None:
        self.flow = flow
        self.table = table
        self._definitions = flow.class_definitions()
        self._origins = flow.class_origins()
        self._resolved: dict[int, Dim] = {}
        self._resolving: set[int] = set()
        for root, (position, axis) in sorted(self._origins.items(), key=lambda item: item[1]):
            if root not in self._definitions and flow.values(root) != (1, 1):
                bench, check = flow.values(root)
                self._resolved[root] = table.new_symbol(bench, check, position, axis)

    def dim(self, node: int) -> Dim:
        """The size of `node`; ShapeRuleError when it follows no rule at all."""
        root = self.flow.find(node)
        if root in self._resolved:
            return self._resolved[root]
        bench, check = self.flow.values(root)
        if (bench, check) == (1, 1):
            return Dim.const(1)
        defined = []
        if root not in self._resolving:
            self._resolving.add(root)
            try:
                defined = self._defined(root)
            finally:
                self._resolving.discard(root)
        # A definition over other sizes first (equal products compare equal), then the input
        # axis it is read from; a definition that came out constant only when neither says more.
        found = next((d for d in defined if not d.is_const), None)
        if found is None and root in self._origins:
            position, axis = self._origins[root]
            found = self.table.new_symbol(bench, check, position, axis)
        if found is None:
            found = defined[0] if defined else self.table.dim(bench, check)
        self._resolved[root] = found
        return found

    def _defined(self, root: int) -> list[Dim]:
        found = []
        for definition in self._definitions.get(root, []):
            try:
                dim = self._definition(definition)
            except ShapeRuleError:
                continue
            if dim is not None:
                found.append(dim)
        return found

    def _definition(self, definition: Definition) -> Dim | None:
        if isinstance(definition, Product):
            product = Dim.const(1)
            for factor in definition.factors:
                product = product * self.dim(factor)
            return product
        if isinstance(definition, Shift) and definition.scale != 1:
            if definition.offset or definition.less is not None:
                return None  # stride * size + offset: no rule of ours; found by value
            return Dim.const(definition.scale) * self.dim(definition.base)
        if isinstance(definition, Shift):
            less = None if definition.less is None else self.dim(definition.less)
            return self.table.shifted(self.dim(definition.base), definition.offset, less)
        return self._part(definition)

    def _part(self, part: Part) -> Dim | None:
        """A part of a split size: the one part that varies between the traces is the source
        over the others, which are constants. When none varies, the last part is taken to
        follow the source (a group norm's width, its group count fixed), so that the parts still
        multiply back to the source at any shape."""
        values = [self.flow.values(p) for p in part.parts]
        varying = [i for i, (b, c) in enumerate(values) if b != c] or [len(values) - 1]
        if len(varying) != 1:
            return None
        if part.index != varying[0]:
            bench, check = values[part.index]
            return Dim.const(bench) if bench == check else None
        constant = 1
        for i, (bench, _) in enumerate(values):
            if i != part.index:
                constant *= bench
        return self.dim(part.source) * Dim(Fraction(1, constant))


def flow_equation(
    flow: SizeFlow,
    primitive: str,
    params: dict[str, Any],
    operands: list[Nodes | None],
    results: list[Nodes],
) -> None:
    """Tie and define the result sizes of one equation (`operands`: None for a constant).
    A primitive without a rule leaves its results' sizes to be found by value."""
    arrays = [o for o in operands if o is not None]
    if not results or not arrays:
        return  # constants only: nothing flows
    out = results[0]
    if primitive in AXIS_REDUCTIONS:
        kept = [n for axis, n in enumerate(arrays[0]) if axis not in params["axes"]]
        flow.tie_all(tuple(kept), out)
    elif primitive == "transpose":
        flow.tie_all(tuple(arrays[0][a] for a in params["permutation"]), out)
    elif primitive == "squeeze":
        kept = [n for axis, n in enumerate(arrays[0]) if axis not in params["dimensions"]]
        flow.tie_all(tuple(kept), out)
    elif primitive == "broadcast_in_dim":
        for axis, target in enumerate(params["broadcast_dimensions"]):
            flow.tie(arrays[0][axis], out[target])
    elif primitive == "reshape":
        _reshape(flow, arrays[0], out)
    elif primitive == "dot_general" and len(arrays) == 2:
        _dot_general(flow, params, arrays, out)
    elif primitive == "concatenate":
        for array in arrays:
            for axis, (a, b) in enumerate(zip(array, out, strict=True)):
                if axis != params["dimension"]:
                    flow.tie(a, b)
    elif primitive == "gather" and len(arrays) == 2:
        # Batch axes of the result follow the indices' leading axes (x[r, idx[r]] is (r,)).
        indices = arrays[1]
        for a, b in zip(indices, out, strict=False):
            flow.tie(a, b)
    elif is_elementwise(primitive, len(operands)) or primitive in _SAME_SHAPE:
        # Every operand of the result's rank has its shape (scalars broadcast).
        for result in results:
            for array in arrays:
                if len(array) == len(result):
                    flow.tie_all(array, result)


def flow_plain_conv(flow: SizeFlow, image: Nodes, kernel: Nodes, out: Nodes) -> None:
    """A plain channels-first convolution (NCHW x OIHW, NCDHW x OIDHW): batch and out channels
    flow through, the image's and the kernel's channels are one size, each spatial output is its
    input less the taps (a constant where the taps are the same in both traces, else the taps'
    own size)."""
    flow.tie(image[0], out[0])
    flow.tie(kernel[0], out[1])
    flow.tie(image[1], kernel[1])
    for axis in range(2, len(out)):
        taps = flow.values(kernel[axis])
        if taps[0] == taps[1]:
            flow.define(out[axis], Shift(image[axis], 1 - taps[0]))
        else:
            flow.define(out[axis], Shift(image[axis], 1, kernel[axis]))


def flow_transposed_conv(
    flow: SizeFlow, image: Nodes, kernel: Nodes, out: Nodes, params: dict[str, Any]
) -> None:
    """A transposed convolution (primitives.is_transposed_conv): batch and out channels flow
    through as a plain one's, the kernel's axes in its own order (rhs_spec: out, in, taps...);
    each spatial output is (input - 1) * stride + 1 + padding - taps + 1, defined here where the
    taps are the same in both traces."""
    order = params["dimension_numbers"].rhs_spec
    flow.tie(image[0], out[0])
    flow.tie(kernel[order[0]], out[1])
    flow.tie(image[1], kernel[order[1]])
    for axis, stride, (low, high) in zip(
        range(2, len(out)), params["lhs_dilation"], params["padding"], strict=True
    ):
        taps = flow.values(kernel[order[axis]])
        if taps[0] == taps[1]:
            offset = 2 - stride + low + high - taps[0]
            flow.define(out[axis], Shift(image[axis], offset, scale=stride))


def _dot_general(flow: SizeFlow, params: dict[str, Any], arrays: list[Nodes], out: Nodes) -> None:
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = params["dimension_numbers"]
    lhs, rhs = arrays
    for a, b in zip(lhs_contract, rhs_contract, strict=True):
        flow.tie(lhs[a], rhs[b])
    for a, b in zip(lhs_batch, rhs_batch, strict=True):
        flow.tie(lhs[a], rhs[b])
    lhs_free = [lhs[a] for a in range(len(lhs)) if a not in lhs_batch and a not in lhs_contract]
    rhs_free = [rhs[a] for a in range(len(rhs)) if a not in rhs_batch and a not in rhs_contract]
    flow.tie_all((*[lhs[a] for a in lhs_batch], *lhs_free, *rhs_free), out)


def _reshape(flow: SizeFlow, source: Nodes, out: Nodes) -> None:
    """Match the non-unit axes of both sides in contiguous segments of equal size: one axis to
    one is a tie, many to one a product, one to many a split, many to many left to values."""
    ins = [n for n in source if flow.values(n) != (1, 1)]
    outs = [n for n in out if flow.values(n) != (1, 1)]
    i = j = 0
    while i < len(ins) and j < len(outs):
        seg_in, seg_out = [ins[i]], [outs[j]]
        size_in, size_out = _size(flow, seg_in), _size(flow, seg_out)
        while size_in != size_out:
            if size_in[0] < size_out[0] and i + 1 < len(ins):
                i += 1
                seg_in.append(ins[i])
            elif size_out[0] < size_in[0] and j + 1 < len(outs):
                j += 1
                seg_out.append(outs[j])
            else:
                return  # the two traces segment differently: leave the rest to values
            size_in, size_out = _size(flow, seg_in), _size(flow, seg_out)
        if len(seg_in) == 1 and len(seg_out) == 1:
            flow.tie(seg_in[0], seg_out[0])
        elif len(seg_out) == 1:
            flow.define(seg_out[0], Product(tuple(seg_in)))
        elif len(seg_in) == 1:
            for index, part in enumerate(seg_out):
                flow.define(part, Part(seg_in[0], tuple(seg_out), index))
        i, j = i + 1, j + 1


def _size(flow: SizeFlow, nodes: list[int]) -> Values:
    bench = check = 1
    for node in nodes:
        b, c = flow.values(node)
        bench, check = bench * b, check * c
    return bench, check
