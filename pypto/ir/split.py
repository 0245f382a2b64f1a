"""Splitting a fused workload into two passes of one program (fusion as a choice).

A fused workload (a matmul or conv2d with an elementwise tail, or a vector chain) can
run as one pass, or as two: a *head* (the cube op, or the chain's first ops) that
stores the values the rest reads, and a *tail* (a vector chain) that loads them back
from GM. The workload, its key and its space stay the same: whether it is split is a
knob of its schedule (``pypto.schedule_space.fusion``), so the tuner searches it and
the database remembers it like any other knob.

``split_workload(wl, head_ops)`` builds the two parts: ``head_ops`` is how many of the
workload's ops (nodes other than loads, in order) the head computes. The values that
cross from head to tail must have the workload's full row space (``space``), so the
tail reads them with plain contiguous loads (``crossing_ok``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from pypto.ir.views import contiguous_strides
from pypto.ir.workload import TensorSpec, WNode, Workload

#: Workload attributes a part keeps (the rest, such as a forced fusion, are the whole's).
PART_ATTRS = ("space",)


@dataclass(frozen=True)
class Split:
    """The two passes of a split workload, and how their tensors map onto the whole's.

    ``head_inputs`` and ``tail_inputs`` name the source of each part input:
    ``("input", i)`` is input ``i`` of the whole, ``("value", n)`` the value of the
    whole's node ``n`` that the head stored. ``head_outputs`` and ``tail_outputs`` are
    the whole's node of each part output; ``scratch`` the nodes the head stores that
    the whole does not output (they need GM of their own).
    """

    head: Workload
    tail: Workload
    head_inputs: tuple[tuple[str, int], ...]
    head_outputs: tuple[int, ...]
    tail_inputs: tuple[tuple[str, int], ...]
    tail_outputs: tuple[int, ...]
    scratch: tuple[int, ...]


def op_nodes(wl: Workload) -> list[int]:
    """Indices of the workload's ops (its nodes other than loads), in order."""
    return [i for i, n in enumerate(wl.nodes) if n.op != "load"]


def crossing(wl: Workload, head_ops: int) -> list[int]:
    """The head's values that the tail reads (whole node indices, in order)."""
    ops = op_nodes(wl)
    head = set(ops[:head_ops])
    return sorted({a for i in ops[head_ops:] for a in wl.nodes[i].args if a in head})


def crossing_ok(wl: Workload, head_ops: int) -> bool:
    """Whether ``wl`` can split after its first ``head_ops`` ops: both parts have ops,
    and every value crossing between them has the workload's full row space and is
    not a boolean mask."""
    ops = op_nodes(wl)
    if not 0 < head_ops < len(ops):
        return False
    space = tuple(wl.attr("space"))
    return all(tuple(wl.nodes[i].shape) == space and wl.nodes[i].dtype != "bool"
               for i in crossing(wl, head_ops))


@functools.lru_cache(maxsize=256)
def split_workload(wl: Workload, head_ops: int) -> Split:
    """``wl`` as a head of its first ``head_ops`` ops and a vector tail of the rest.

    Raises:
        ValueError: ``wl`` cannot split there (``crossing_ok`` is false).
    """
    if not crossing_ok(wl, head_ops):
        raise ValueError(f"{wl.describe()} cannot split after {head_ops} op(s)")
    ops = op_nodes(wl)
    head_set, tail_set = set(ops[:head_ops]), set(ops[head_ops:])
    cross = crossing(wl, head_ops)
    outputs = set(wl.outputs)
    head_out = sorted((head_set & outputs) | set(cross))
    head = _Part(wl)
    for i, n in enumerate(wl.nodes):
        if i in head_set:
            head.copy_op(i, n)
    tail = _Part(wl)
    for i in ops[head_ops:]:
        for a in wl.nodes[i].args:
            if a in head_set and a not in tail.local:
                tail.value_load(a)
        tail.copy_op(i, wl.nodes[i])
    head_wl = head.workload(wl.family, head_out)
    tail_out = [o for o in wl.outputs if o in tail_set]
    tail_wl = tail.workload("vector", sorted(tail_out))
    return Split(head_wl, tail_wl, tuple(head.sources), tuple(head_out), tuple(tail.sources),
                 tuple(sorted(tail_out)), tuple(n for n in cross if n not in outputs))


class _Part:
    """One part while it is built: its nodes, inputs and the whole's node -> its own."""

    def __init__(self, whole: Workload) -> None:
        self.whole = whole
        self.nodes: list[WNode] = []
        self.inputs: list[TensorSpec] = []
        self.sources: list[tuple[str, int]] = []
        self.local: dict[int, int] = {}

    def _input(self, source: tuple[str, int], spec: TensorSpec) -> int:
        if source not in self.sources:
            self.sources.append(source)
            self.inputs.append(spec)
        return self.sources.index(source)

    def _load(self, whole_index: int) -> int:
        """The part's copy of the whole's load node ``whole_index``."""
        if whole_index not in self.local:
            n = self.whole.nodes[whole_index]
            source = n.attr("input")
            index = self._input(("input", source), self.whole.inputs[source])
            attrs = tuple((k, index if k == "input" else v) for k, v in n.attrs)
            self.local[whole_index] = len(self.nodes)
            self.nodes.append(WNode("load", (), attrs, n.shape, n.dtype))
        return self.local[whole_index]

    def value_load(self, whole_index: int) -> None:
        """Load the value of the whole's node ``whole_index`` back from GM, whole."""
        n = self.whole.nodes[whole_index]
        index = self._input(("value", whole_index), TensorSpec(n.shape, n.dtype))
        attrs: dict[str, Any] = {"input": index, "offset": 0,
                                 "strides": contiguous_strides(n.shape)}
        self.local[whole_index] = len(self.nodes)
        self.nodes.append(WNode("load", (), tuple(sorted(attrs.items())), n.shape, n.dtype))

    def copy_op(self, whole_index: int, n: WNode) -> None:
        args = []
        for a in n.args:
            if a not in self.local and self.whole.nodes[a].op == "load":
                self._load(a)
            args.append(self.local[a])
        self.local[whole_index] = len(self.nodes)
        self.nodes.append(WNode(n.op, tuple(args), n.attrs, n.shape, n.dtype))

    def workload(self, family: str, outputs: list[int]) -> Workload:
        attrs = tuple((k, v) for k, v in self.whole.attrs if k in PART_ATTRS)
        return Workload(family, tuple(self.inputs), tuple(self.nodes),
                        tuple(self.local[o] for o in outputs), attrs)
