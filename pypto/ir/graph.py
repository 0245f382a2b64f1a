"""The traced graph: nodes with inferred shapes and dtypes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto.ir.dtypes import DType

# Node kinds, by op name.
VIEW_OPS = frozenset({"transpose", "reshape", "slice", "broadcast_to"})
ELEMENTWISE_UNARY = frozenset({"copy", "cast", "relu", "exp", "log", "sqrt", "rsqrt",
                               "reciprocal", "gelu", "sigmoid", "tanh", "abs", "neg"})
ELEMENTWISE_BINARY = frozenset({"add", "sub", "mul", "div", "maximum", "minimum"})
ELEMENTWISE_SCALAR = frozenset({"add_scalar", "mul_scalar", "max_scalar", "min_scalar"})
# a op b -> bool, and where(cond, x, y)
COMPARISONS = frozenset({"equal", "not_equal", "less", "less_equal", "greater",
                         "greater_equal"})
SELECT = frozenset({"where"})
REDUCTIONS = frozenset({"sum", "max", "min"})
ELEMENTWISE = (ELEMENTWISE_UNARY | ELEMENTWISE_BINARY | ELEMENTWISE_SCALAR | COMPARISONS
               | SELECT)
VECTOR_OPS = ELEMENTWISE | REDUCTIONS
# raw mode (pypto.inline_asm): the block, and each output it declares
INLINE_ASM = "inline_asm"
ASM_OUTPUT = "asm_output"


@dataclass(frozen=True)
class Node:
    """One op in the graph. ``attrs`` is a sorted tuple of (name, value) pairs."""

    id: int
    op: str
    inputs: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]
    shape: tuple[int, ...]
    dtype: DType
    layout: str = "ND"

    def attr(self, name: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        return default


@dataclass
class Graph:
    """Nodes in topological order; ``inputs`` and ``outputs`` are node ids."""

    name: str = "kernel"
    nodes: list[Node] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    consts: dict[int, np.ndarray] = field(default_factory=dict)
    sealed: bool = False  # set when the trace is over: no more nodes

    def add(self, op: str, inputs: tuple[int, ...], attrs: dict[str, Any],
            shape: tuple[int, ...], dtype: DType, layout: str = "ND") -> Node:
        node = Node(len(self.nodes), op, tuple(inputs), tuple(sorted(attrs.items())),
                    tuple(int(s) for s in shape), dtype, layout)
        self.nodes.append(node)
        return node

    def users(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {n.id: [] for n in self.nodes}
        for n in self.nodes:
            for i in n.inputs:
                out[i].append(n.id)
        return out

    def __str__(self) -> str:
        lines = [f"graph {self.name}({', '.join(f'%{i}' for i in self.inputs)}):"]
        for n in self.nodes:
            args = ", ".join(f"%{i}" for i in n.inputs)
            attrs = "".join(f", {k}={v!r}" for k, v in n.attrs)
            lines.append(f"  %{n.id}: {n.dtype.name}{list(n.shape)} = {n.op}({args}{attrs})")
        lines.append(f"  return {', '.join(f'%{i}' for i in self.outputs)}")
        return "\n".join(lines)
