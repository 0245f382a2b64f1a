"""``Workload``: one fused kernel launch, as a small value with a content key.

A workload holds its own little graph. ``load`` nodes read an input tensor through a
strided view (``offset``, ``strides`` in elements; a stride of 0 broadcasts), so
transposes, slices and broadcasts cost no extra kernel. Every other node is an op on
earlier nodes. ``outputs`` are nodes stored as contiguous tensors.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

FAMILIES = ("matmul", "vector", "conv2d", "movement")
#: The family of a raw block (``pypto.inline_asm``): run as written, never tuned.
RAW = "raw"


@dataclass(frozen=True)
class TensorSpec:
    """An input or output: shape, dtype, layout, and ``const`` for a constant the kernel
    captured (a weight PyPTO owns, so a schedule may choose how it is stored)."""

    shape: tuple[int, ...]
    dtype: str
    layout: str = "ND"
    const: bool = False

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def to_json(self, *, sizes: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"dtype": self.dtype, "layout": self.layout}
        if sizes:
            out["shape"] = list(self.shape)
        else:
            out["rank"] = len(self.shape)
        if self.const:  # only when set, so the keys of other workloads stay as they were
            out["const"] = True
        return out


@dataclass(frozen=True)
class WNode:
    op: str
    args: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...]
    shape: tuple[int, ...]
    dtype: str

    def attr(self, name: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    def to_json(self, *, sizes: bool = True) -> dict[str, Any]:
        attrs = {k: _canon(v) for k, v in self.attrs
                 if sizes or k not in ("offset", "strides")}
        out: dict[str, Any] = {"op": self.op, "args": list(self.args), "attrs": attrs,
                               "dtype": self.dtype}
        out["shape"] = list(self.shape) if sizes else len(self.shape)
        return out


def _canon(value: Any) -> Any:
    """JSON-safe canonical form: floats as exact hex strings, tuples as lists."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return {"float": value.hex()}
    if isinstance(value, (tuple, list)):
        return [_canon(v) for v in value]
    raise TypeError(f"attribute value {value!r} has no canonical form")


@dataclass(frozen=True, eq=False)
class Workload:
    """A fused kernel: ``family`` (matmul, vector, conv2d), inputs, nodes, outputs."""

    family: str
    inputs: tuple[TensorSpec, ...]
    nodes: tuple[WNode, ...]
    outputs: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...] = field(default=())

    def attr(self, name: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    def to_json(self, *, sizes: bool = True) -> dict[str, Any]:
        return {
            "family": self.family,
            "inputs": [s.to_json(sizes=sizes) for s in self.inputs],
            "nodes": [n.to_json(sizes=sizes) for n in self.nodes],
            "outputs": list(self.outputs),
            "attrs": {k: _canon(v) for k, v in self.attrs
                      if sizes or k not in ("space",)},
        }

    @staticmethod
    def from_json(spec: str | dict[str, Any]) -> Workload:
        """The workload whose ``to_json()`` is ``spec`` (see ``workload_from_json``)."""
        return workload_from_json(spec)

    def canonical_json(self, *, sizes: bool = True) -> str:
        return json.dumps(self.to_json(sizes=sizes), sort_keys=True, separators=(",", ":"))

    @cached_property
    def key(self) -> str:
        """sha256 over the canonical JSON: equal workloads anywhere share a key."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()

    @cached_property
    def family_key(self) -> str:
        """The key without sizes: workloads that differ only in shape share it."""
        return hashlib.sha256(self.canonical_json(sizes=False).encode()).hexdigest()

    @property
    def output_specs(self) -> tuple[TensorSpec, ...]:
        return tuple(TensorSpec(self.nodes[i].shape, self.nodes[i].dtype) for i in self.outputs)

    @property
    def ops(self) -> tuple[str, ...]:
        """The op chain without loads, e.g. ``('matmul', 'add', 'relu')`` (a raw block's
        is ``('inline_asm',)``)."""
        return tuple(n.op for n in self.nodes if n.op not in ("load", "asm_output"))

    @property
    def flops(self) -> int:
        total = 0
        for n in self.nodes:
            if n.op == "matmul":
                k = self.nodes[n.args[0]].shape[-2 if n.attr("transpose_a") else -1]
                total += 2 * math.prod(n.shape) * k
            elif n.op == "conv2d_nhwc":  # weights are [R*S*C, K]
                total += 2 * math.prod(n.shape) * self.nodes[n.args[1]].shape[0]
            elif n.op == "conv2d_nchw":  # weights are [K, C*R*S]
                total += 2 * math.prod(n.shape) * self.nodes[n.args[1]].shape[1]
            elif n.op != "load":
                total += math.prod(self.nodes[n.args[0]].shape if n.args else n.shape)
        return total

    def read_whole_by_matmul(self, i: int) -> bool:
        """Is input ``i`` read only whole (no view), and only as a matmul operand? Only
        such an input can be stored in fractal NZ."""
        spec = self.inputs[i]
        loads = {j for j, n in enumerate(self.nodes) if n.op == "load" and n.attr("input") == i}
        whole = len(spec.shape) == 2 and all(
            self.nodes[j].shape == spec.shape and self.nodes[j].attr("offset") == 0
            and tuple(self.nodes[j].attr("strides")) == (spec.shape[1], 1) for j in loads)
        readers = {n.op for n in self.nodes if loads & set(n.args)}
        return self.family == "matmul" and whole and readers == {"matmul"}

    def describe(self) -> str:
        ins = ", ".join(f"{s.dtype}{list(s.shape)}" for s in self.inputs)
        outs = ", ".join(f"{s.dtype}{list(s.shape)}" for s in self.output_specs)
        return f"{self.family} {'+'.join(self.ops)} ({ins}) -> {outs}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workload) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Workload<{self.describe()} key={self.key[:12]}>"


def workload_from_json(spec: str | dict[str, Any]) -> Workload:
    """The ``Workload`` whose ``to_json()`` is ``spec`` (the inverse of canonical JSON).

    Raises:
        ValueError: ``spec`` is not the JSON of a workload.
    """
    try:
        data = json.loads(spec) if isinstance(spec, str) else spec
        inputs = tuple(TensorSpec(tuple(int(d) for d in i["shape"]), str(i["dtype"]),
                                  str(i["layout"]), bool(i.get("const", False)))
                       for i in data["inputs"])
        nodes = tuple(WNode(str(n["op"]), tuple(int(a) for a in n["args"]), _attrs(n["attrs"]),
                            tuple(int(d) for d in n["shape"]), str(n["dtype"]))
                      for n in data["nodes"])
        wl = Workload(str(data["family"]), inputs, nodes,
                      tuple(int(o) for o in data["outputs"]), _attrs(data["attrs"]))
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"not a workload spec ({type(e).__name__}: {e})") from None
    problem = _structure_problem(wl)
    if problem is not None:
        raise ValueError(f"not a workload spec: {problem}")
    return wl


#: Element counts a spec may give (as ``pypto.spec`` accepts).
_MAX_ELEMENTS = 2**48


def _structure_problem(wl: Workload) -> str | None:
    """What makes ``wl`` no workload a trace could give (None if nothing): nodes that read
    later nodes or none, outputs or inputs out of range, unknown dtypes, bad shapes."""
    from pypto.ir.dtypes import BY_NAME

    if not wl.nodes or not wl.outputs:
        return "it has no nodes or no outputs"
    shapes = [("input", i, s.shape, s.dtype) for i, s in enumerate(wl.inputs)]
    shapes += [("node", i, n.shape, n.dtype) for i, n in enumerate(wl.nodes)]
    for kind, i, shape, dtype in shapes:
        if dtype not in BY_NAME:
            return f"{kind} {i} has dtype {dtype!r}"
        if any(d < 0 or d >= _MAX_ELEMENTS for d in shape) or math.prod(shape) >= _MAX_ELEMENTS:
            return f"{kind} {i} has shape {list(shape)}"
    for i, n in enumerate(wl.nodes):
        if any(a < 0 or a >= i for a in n.args):
            return f"node {i} ({n.op}) reads node(s) {list(n.args)}, not earlier ones"
        if n.op == "load":
            source = n.attr("input")
            if not isinstance(source, int) or not 0 <= source < len(wl.inputs):
                return f"node {i} loads input {source!r} of {len(wl.inputs)}"
    if any(o < 0 or o >= len(wl.nodes) for o in wl.outputs):
        return f"outputs {list(wl.outputs)} name nodes it does not have ({len(wl.nodes)})"
    return None


def _attrs(d: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple((str(k), _uncanon(v)) for k, v in sorted(d.items()))


def _uncanon(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"float"}:
            return float.fromhex(value["float"])
        raise ValueError(f"attribute value {value!r} is not canonical")
    if isinstance(value, list):
        return tuple(_uncanon(v) for v in value)
    return value
