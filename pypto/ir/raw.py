"""Raw blocks (``pypto.inline_asm``) in the graph and as workloads.

In a traced graph a raw block is an ``inline_asm`` node, whose inputs are the tensors
bound to its names and whose attributes hold the code, the names and the declared
outputs, and one ``asm_output`` node per declared output (what later ops read). A raw
block always runs, even when nothing reads its outputs (it may have none).

As a workload (family ``raw``) it reads one GM tensor per binding, whole and contiguous
(a view is copied to a tensor of its own first), and writes one per declared output:
nodes are a ``load`` per input, the ``inline_asm`` node, and an ``asm_output`` node per
output. Its key covers the code, so two blocks are the same workload only if they are
the same text bound to the same shapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pypto.ir.graph import ASM_OUTPUT, INLINE_ASM, Node
from pypto.ir.views import contiguous_strides
from pypto.ir.workload import RAW, TensorSpec, WNode, Workload


@dataclass(frozen=True)
class RawSpec:
    """What a raw block's attributes say: its code, the names its inputs are bound to,
    its declared outputs ``(name, shape, dtype name)`` and its instruction budget (None:
    the scalar unit's default)."""

    code: str
    inputs: tuple[str, ...]
    outputs: tuple[tuple[str, tuple[int, ...], str], ...]
    budget: int | None

    def attrs(self) -> dict[str, Any]:
        return {"code": self.code, "inputs": self.inputs, "outputs": self.outputs,
                "budget": self.budget}

    @staticmethod
    def of(node: Node | WNode) -> RawSpec:
        outputs = tuple((str(name), tuple(shape), str(dtype))
                        for name, shape, dtype in node.attr("outputs"))
        budget = node.attr("budget")
        return RawSpec(node.attr("code"), tuple(node.attr("inputs")), outputs,
                       None if budget is None else int(budget))


def raw_workload(block: Node, outputs: Sequence[Node], inputs: Sequence[Node]
                 ) -> Workload:
    """The workload of raw block ``block``: ``inputs`` are the (whole, contiguous) tensors
    it reads, one per binding, ``outputs`` its ``asm_output`` nodes in declared order."""
    nodes = [WNode("load", (), (("input", i), ("offset", 0),
                                ("strides", contiguous_strides(n.shape))), n.shape, n.dtype.name)
             for i, n in enumerate(inputs)]
    nodes.append(WNode(INLINE_ASM, tuple(range(len(inputs))), block.attrs, (), "bool"))
    nodes += [WNode(ASM_OUTPUT, (len(inputs),), (("index", k),), out.shape, out.dtype.name)
              for k, out in enumerate(outputs)]
    specs = tuple(TensorSpec(n.shape, n.dtype.name, n.layout, n.op == "const") for n in inputs)
    first = len(inputs) + 1
    return Workload(RAW, specs, tuple(nodes), tuple(range(first, first + len(outputs))))
