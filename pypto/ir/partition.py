"""Partition a traced graph into fused workloads.

Rules: a matmul (or conv2d) starts a workload and takes the elementwise ops that follow
it as an epilogue; elementwise ops and last-axis reductions that share a row space
(``[rows..., cols]`` and ``[rows..., 1]``) fuse into one vector workload; view ops
(transpose, slice, broadcast, reshape) fold into the loads of their consumers. A node
joins a producer's workload only if that cannot create a cycle between workloads.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

from pypto.errors import LayoutError, UnsupportedError
from pypto.ir.fusion import FORCED_ATTR, FusePolicy, check_forced
from pypto.ir.graph import ASM_OUTPUT, ELEMENTWISE, INLINE_ASM, REDUCTIONS, VIEW_OPS, Graph, Node
from pypto.ir.movement import FAMILY as MOVEMENT
from pypto.ir.movement import MOVEMENT_OPS
from pypto.ir.raw import raw_workload
from pypto.ir.views import View, contiguous_strides
from pypto.ir.workload import RAW, TensorSpec, WNode, Workload


@dataclass(frozen=True)
class Buffer:
    """A GM tensor of the compiled kernel: a kernel input, a constant or a result."""

    id: int
    shape: tuple[int, ...]
    dtype: str
    kind: str  # "in", "const", "tmp"
    name: str
    node: int


@dataclass(frozen=True)
class Step:
    workload: Workload
    inputs: tuple[int, ...]   # buffer ids, one per workload input
    outputs: tuple[int, ...]  # buffer ids, one per workload output


@dataclass(frozen=True)
class Plan:
    buffers: tuple[Buffer, ...]
    steps: tuple[Step, ...]
    inputs: tuple[int, ...]                      # buffer id per graph input
    outputs: tuple[tuple[int, tuple[int, ...]], ...]  # (buffer id, shape) per graph output


@dataclass
class _Group:
    id: int
    family: str
    space: tuple[int, ...]
    members: list[int] = field(default_factory=list)
    phase: dict[int, str] = field(default_factory=dict)
    deps: set[int] = field(default_factory=set)
    # member id -> (operand position -> View) for operands read from GM
    loads: dict[int, dict[int, View]] = field(default_factory=dict)


class _Partitioner:
    def __init__(self, graph: Graph, fuse: FusePolicy) -> None:
        self.graph = graph
        self.fuse = fuse
        self.nodes: dict[int, Node] = {n.id: n for n in graph.nodes}
        self.views: dict[int, View] = {}
        self.groups: list[_Group] = []
        self.group_of: dict[int, _Group] = {}
        self.next_id = len(graph.nodes)

    # -- views --------------------------------------------------------------------------
    def resolve_view(self, n: Node) -> View:
        src = self.views[n.inputs[0]]
        if n.op == "transpose":
            return src.transpose(n.attr("axes"))
        if n.op == "broadcast_to":
            return src.broadcast_to(n.shape)
        if n.op == "slice":
            return src.slice(n.attr("begin"), n.attr("end"), n.attr("step"))
        reshaped = src.reshape(n.shape)
        if reshaped is None:  # not expressible as a view: copy to a new buffer first
            copy = self.materialize(src, self.nodes[n.inputs[0]])
            reshaped = View.whole(copy, n.shape)
        return reshaped

    def materialize(self, view: View, like: Node) -> int:
        """A new ``copy`` node reading ``view``, in its own vector workload."""
        node = Node(self.next_id, "copy", (-1,), (), view.shape, like.dtype)
        self.next_id += 1
        self.nodes[node.id] = node
        space = view.shape or (1,)
        group = self.new_group("vector", space)
        self.add_member(group, node, "col", {0: view})
        self.views[node.id] = View.whole(node.id, view.shape)
        return node.id

    # -- groups -------------------------------------------------------------------------
    def new_group(self, family: str, space: tuple[int, ...]) -> _Group:
        g = _Group(len(self.groups), family, space)
        self.groups.append(g)
        return g

    def add_member(self, g: _Group, n: Node, phase: str, loads: dict[int, View]) -> None:
        g.members.append(n.id)
        g.phase[n.id] = phase
        g.loads[n.id] = loads
        self.group_of[n.id] = g
        for v in loads.values():
            h = self.group_of.get(v.base)
            if h is not None and h is not g:
                g.deps.add(h.id)

    def depends_on(self, h: _Group, g: _Group) -> bool:
        seen, todo = set(), [h.id]
        while todo:
            cur = todo.pop()
            if cur == g.id:
                return True
            if cur not in seen:
                seen.add(cur)
                todo.extend(self.groups[cur].deps)
        return False

    def in_group_operand(self, g: _Group, operand: int) -> int | None:
        """The member of ``g`` that ``operand`` is, unviewed, or None."""
        v = self.views[operand]
        if self.group_of.get(v.base) is g and v.offset == 0 and v.shape == \
                self.nodes[v.base].shape and v.strides == contiguous_strides(v.shape):
            return v.base
        return None

    def try_join(self, g: _Group, n: Node) -> bool:
        space = g.space
        row_shape = space[:-1] + (1,)
        if g.family in ("matmul", "conv2d"):
            if n.op not in ELEMENTWISE or n.shape != space:
                return False
            if self.fuse.epilogue_producers is not None and g.family not in \
                    self.fuse.epilogue_producers:
                return False
            phase = "col"
        elif g.family == "vector":
            if not self.fuse.vector_chains:
                return False
            if n.op in REDUCTIONS:
                m = self.in_group_operand(g, n.inputs[0])
                if m is None or g.phase[m] != "col" or n.attr("axis") != len(space) - 1:
                    return False
                phase = "row"
            elif n.shape == space:
                phase = "col"
            elif n.shape == row_shape:
                phase = "row"
            else:
                return False
        else:
            return False
        loads: dict[int, View] = {}
        for pos, operand in enumerate(n.inputs):
            m = self.in_group_operand(g, operand)
            if m is not None:
                mshape, mphase = self.nodes[m].shape, g.phase[m]
                if n.op in REDUCTIONS:
                    continue
                ok = (mphase == "col" and mshape == space and phase == "col") or \
                     (mphase == "row" and mshape == row_shape) or \
                     (mphase == "row" and g.family == "vector" and phase == "row"
                      and mshape == n.shape)
                if not ok:
                    return False
                continue
            v = self.views[operand]
            h = self.group_of.get(v.base)
            if h is g or (h is not None and self.depends_on(h, g)):
                return False
            loads[pos] = v
        self.add_member(g, n, phase, loads)
        return True

    def place(self, n: Node) -> None:
        if n.op == "matmul":
            g = self.new_group(n.op, n.shape)
            self.add_member(g, n, "col", {i: self.views[o] for i, o in enumerate(n.inputs)})
            return
        if n.op in ("conv2d", "conv2d_nhwc", "conv2d_nchw"):
            self.place_conv(n)
            return
        if n.op in ELEMENTWISE and self.join_conv_transposed(n):
            return
        candidates = []
        for operand in n.inputs:
            base = self.views[operand].base
            g = self.group_of.get(base)
            if g is not None and g not in candidates:
                candidates.append(g)
        for g in candidates:
            if self.try_join(g, n):
                return
        if n.op in REDUCTIONS:
            v = self.views[n.inputs[0]]
            axis = n.attr("axis")
            perm = tuple(i for i in range(len(v.shape)) if i != axis) + (axis,)
            v = v.transpose(perm)
            g = self.new_group("vector", v.shape)
            self.add_member(g, n, "row", {0: v})
            return
        space = n.shape or (1,)
        g = self.new_group("vector", space)
        self.add_member(g, n, "col", {i: self.views[o] for i, o in enumerate(n.inputs)})

    # -- conv2d --------------------------------------------------------------------------
    def place_conv(self, n: Node) -> None:
        """A ``conv2d_nhwc`` starts a conv2d workload. Operands whose last axis (C of the
        input, K of the weight matrix) is not contiguous are copied first: that copy is
        the layout conversion (NCHW -> NHWC, KCRS -> RSCK); weights whose matrix is the
        transpose of a row-major one (KRSC) are read as stored. ``conv2d_nchw`` reads
        its NCHW input and ``[K, C*R*S]`` weights as they lie."""
        if n.op == "conv2d":
            raise UnsupportedError(f"conv2d with groups={n.attr('groups')} (a grouped or "
                                   "depthwise convolution) has no NPU lowering: the NPU "
                                   "runs groups=1 as an implicit GEMM; run this kernel with "
                                   "pypto.Context(device_type='cpu')")
        loads = {}
        for i, o in enumerate(n.inputs):
            v = self.views[o]
            weights_as_stored = i == 1 and n.op == "conv2d_nhwc" and v.strides[-2] == 1
            if i < 2 and v.strides[-1] != 1 and v.shape[-1] > 1 and not weights_as_stored:
                copy = self.materialize(v, self.nodes[v.base])
                if i == 0:
                    self.nodes[copy] = replace(self.nodes[copy], layout="NHWC")
                v = self.views[copy]
            loads[i] = v
        g = self.new_group("conv2d", n.shape)
        self.add_member(g, n, "col", loads)

    def join_conv_transposed(self, n: Node) -> bool:
        """An elementwise op on a transposed view of a conv2d workload's result (how an
        NCHW caller sees the NHWC output) joins it as an epilogue computed in NHWC order;
        the op's own result is then the same transposed view of that."""
        for operand in n.inputs:
            v = self.views[operand]
            g = self.group_of.get(v.base)
            if g is None or g.family != "conv2d" or v.shape != n.shape or \
                    self.nodes[v.base].shape != g.space:
                continue
            whole = View.whole(v.base, g.space)
            perm = next((p for p in itertools.permutations(range(len(g.space)))
                         if whole.transpose(p) == v), None)
            if perm is None or perm == tuple(range(len(perm))):
                continue
            inverse = tuple(perm.index(i) for i in range(len(perm)))
            args = []
            for o in n.inputs:  # the operands as views in the conv's (NHWC) order
                self.views[self.next_id] = self.views[o].broadcast_to(n.shape).transpose(inverse)
                args.append(self.next_id)
                self.next_id += 1
            alt = Node(self.next_id, n.op, tuple(args), n.attrs, g.space, n.dtype, "NHWC")
            self.next_id += 1
            self.nodes[alt.id] = alt
            self.views[alt.id] = View.whole(alt.id, alt.shape)
            if not self.try_join(g, alt):
                return False
            self.views[n.id] = self.views[alt.id].transpose(perm)
            return True
        return False

    def place_raw(self, n: Node) -> None:
        """A raw block is a workload of its own, reading whole tensors (a view is copied
        to a tensor of its own first); its ``asm_output`` nodes join it."""
        loads = {}
        for i, o in enumerate(n.inputs):
            v = self.views[o]
            if not (v.is_contiguous() and v.offset == 0 and v.shape == self.nodes[v.base].shape):
                v = self.views[self.materialize(v, self.nodes[v.base])]
            loads[i] = v
        self.views[n.id] = View.whole(n.id, n.shape)
        self.add_member(self.new_group(RAW, ()), n, "col", loads)

    def live_nodes(self) -> set[int]:
        """Nodes the outputs and the raw blocks (which always run) depend on; the rest is
        dead code and is never lowered."""
        live = set()
        todo = list(self.graph.outputs) + [n.id for n in self.graph.nodes
                                           if n.op in (INLINE_ASM, ASM_OUTPUT)]
        while todo:
            i = todo.pop()
            if i not in live:
                live.add(i)
                todo.extend(self.nodes[i].inputs)
        return live

    def run(self) -> Plan:
        live = self.live_nodes()
        for n in self.graph.nodes:
            if n.id not in live and n.op not in ("input", "const"):
                continue
            if math.prod(n.shape) == 0:
                raise UnsupportedError(f"{n.op} produces an empty tensor {list(n.shape)}; "
                                       "empty tensors are not supported on the NPU")
            if n.op in ("input", "const"):
                self.views[n.id] = View.whole(n.id, n.shape)
            elif n.op in VIEW_OPS:
                self.views[n.id] = self.resolve_view(n)
            elif n.op == INLINE_ASM:
                self.place_raw(n)
            elif n.op in MOVEMENT_OPS:  # a data movement workload of its own
                self.views[n.id] = View.whole(n.id, n.shape)
                self.add_member(self.new_group(MOVEMENT, n.shape), n, "col",
                                {i: self.views[o] for i, o in enumerate(n.inputs)})
            elif n.op == ASM_OUTPUT:
                self.views[n.id] = View.whole(n.id, n.shape)
                self.add_member(self.group_of[n.inputs[0]], n, "col", {})
            elif n.op in ELEMENTWISE or n.op in REDUCTIONS or n.op in (
                    "matmul", "conv2d", "conv2d_nhwc", "conv2d_nchw"):
                self.views[n.id] = View.whole(n.id, n.shape)
                self.place(n)
            else:
                raise UnsupportedError(f"op {n.op!r} has no NPU lowering")
        outputs = []
        for o in self.graph.outputs:
            v = self.views[o]
            base = self.nodes[v.base]
            if base.op in ("input", "const") or not (
                    v.is_contiguous() and math.prod(v.shape) == math.prod(base.shape)):
                base_id = self.materialize(v, base)
            else:
                base_id = v.base
            outputs.append((base_id, v.shape))
        if self.fuse.forced:
            placed = {m: g.family for g in self.groups for m in g.members}
            check_forced(self.fuse, {i: n for i, n in self.nodes.items()
                                     if i in live or i in placed},
                         placed, {i: v.base for i, v in self.views.items()})
        return self.build(outputs)

    # -- workloads ----------------------------------------------------------------------
    def build(self, outputs: list[tuple[int, tuple[int, ...]]]) -> Plan:
        graph_out = {b for b, _ in outputs}
        used_outside: set[int] = set()
        for g in self.groups:
            for loads in g.loads.values():
                used_outside.update(v.base for v in loads.values())
        buffers: dict[int, Buffer] = {}

        def buffer_for(node_id: int) -> int:
            if node_id not in buffers:
                n = self.nodes[node_id]
                if n.op == "input":
                    kind, name = "in", self.graph.input_names[n.attr("index")]
                elif n.op == "const":
                    kind, name = "const", f"const{node_id}"
                else:
                    kind, name = "tmp", f"t{node_id}"
                buffers[node_id] = Buffer(len(buffers), n.shape, n.dtype.name, kind, name,
                                          node_id)
            return buffers[node_id].id

        for i in self.graph.inputs:
            buffer_for(i)
        steps = []
        for g in self._ordered_groups():
            if g.family == RAW:
                block, outs = self.nodes[g.members[0]], g.members[1:]
                in_nodes = [g.loads[block.id][i].base for i in range(len(block.inputs))]
                wl = raw_workload(block, [self.nodes[o] for o in outs],
                                  [self.nodes[b] for b in in_nodes])
                out_nodes = list(outs)
            else:
                wl, in_nodes, out_nodes = self._workload(g, graph_out | used_outside)
            check_nz_operands(wl)
            steps.append(Step(wl, tuple(buffer_for(b) for b in in_nodes),
                              tuple(buffer_for(o) for o in out_nodes)))
        by_id = sorted(buffers.values(), key=lambda b: b.id)
        return Plan(tuple(by_id), tuple(steps),
                    tuple(buffers[i].id for i in self.graph.inputs),
                    tuple((buffers[b].id, shape) for b, shape in outputs))

    def _ordered_groups(self) -> list[_Group]:
        done: set[int] = set()
        order: list[_Group] = []

        def visit(g: _Group) -> None:
            if g.id in done:
                return
            done.add(g.id)
            for d in sorted(g.deps):
                visit(self.groups[d])
            order.append(g)

        for g in self.groups:
            visit(g)
        return order

    def _workload(self, g: _Group, stored: set[int]) -> tuple[Workload, list[int], list[int]]:
        inputs: list[int] = []
        wnodes: list[WNode] = []
        local: dict[int, int] = {}
        load_index: dict[tuple, int] = {}

        def load(v: View, as_shape: tuple[int, ...] | None = None) -> int:
            if v.base not in inputs:
                inputs.append(v.base)
            key = (v.base, v.offset, v.shape, v.strides)
            if key not in load_index:
                attrs = {"input": inputs.index(v.base), "offset": v.offset, "strides": v.strides}
                load_index[key] = len(wnodes)
                wnodes.append(WNode("load", (), _attrs(attrs), v.shape,
                                    self.nodes[v.base].dtype.name))
            return load_index[key]

        for m in g.members:
            n = self.nodes[m]
            args = []
            attrs: dict[str, Any] = dict(n.attrs)
            loads = g.loads[m]
            if n.op == "matmul":
                a, ta = _canonical_operand(loads[0], bool(n.attr("transpose_a")), n.shape[:-2])
                b, tb = _canonical_operand(loads[1], bool(n.attr("transpose_b")), n.shape[:-2])
                args = [load(a), load(b)]
                attrs.update(transpose_a=ta, transpose_b=tb)
            else:
                for pos, operand in enumerate(n.inputs):
                    if pos in loads:
                        args.append(load(loads[pos]))
                    else:
                        args.append(local[self.in_group_operand(g, operand)])  # type: ignore[index]
                if n.op in REDUCTIONS:
                    attrs["axis"] = -1
            local[m] = len(wnodes)
            wnodes.append(WNode(n.op, tuple(args), _attrs(attrs), n.shape, n.dtype.name))
        members = set(g.members)
        outs = [m for m in g.members
                if m in stored or any(u not in members for u in self._users(m))]
        if g.family in ("matmul", "conv2d") and len(g.members) > 1:
            mm = g.members[0]
            if mm in outs and mm not in stored:
                outs.remove(mm)
        specs = tuple(TensorSpec(self.nodes[b].shape, self.nodes[b].dtype.name,
                                 self.nodes[b].layout, self.nodes[b].op == "const")
                      for b in inputs)
        attrs: dict[str, Any] = {"space": g.space}
        if self.fuse.forces(g.family, [self.nodes[m].op for m in g.members[1:]]):
            attrs[FORCED_ATTR[0]] = FORCED_ATTR[1]  # the space then offers it fused only
        wl = Workload(g.family, specs, tuple(wnodes), tuple(local[o] for o in outs),
                      _attrs(attrs))
        return wl, inputs, outs

    def _users(self, node_id: int) -> list[int]:
        if not hasattr(self, "_user_map"):
            self._user_map: dict[int, list[int]] = {}
            for g in self.groups:
                for m in g.members:
                    n = self.nodes[m]
                    for operand in n.inputs:
                        if operand >= 0:
                            self._user_map.setdefault(self.views[operand].base, []).append(m)
                    for v in g.loads[m].values():
                        self._user_map.setdefault(v.base, []).append(m)
        return self._user_map.get(node_id, [])


def _attrs(d: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(d.items()))


def _canonical_operand(v: View, transposed: bool, batch: tuple[int, ...]) -> tuple[View, bool]:
    """Broadcast a matmul operand to the batch dims; a column-major operand is loaded as
    its row-major transpose with the transpose flag flipped (no gather needed)."""
    if len(v.shape) >= 2 and v.strides[-1] != 1 and v.strides[-2] == 1 and v.shape[-2] > 1:
        perm = tuple(range(len(v.shape) - 2)) + (len(v.shape) - 1, len(v.shape) - 2)
        v, transposed = v.transpose(perm), not transposed
    return v.broadcast_to(batch + v.shape[-2:]), transposed


def partition(graph: Graph, fuse: FusePolicy | None = None) -> Plan:
    """Split ``graph`` into workloads and the GM buffers that connect them."""
    return _Partitioner(graph, fuse or FusePolicy()).run()


def check_nz_operands(wl: Workload) -> None:
    """A tensor stored in fractal NZ can only be read whole, as an operand of a matmul
    (the only reader that loads it block by block)."""
    for i, spec in enumerate(wl.inputs):
        if spec.layout == "NZ" and not wl.read_whole_by_matmul(i):
            raise LayoutError(
                f"a {spec.dtype}{list(spec.shape)} tensor in layout 'NZ' (fractal) can only "
                "be an operand of pypto.matmul, read whole (use transpose_a/transpose_b "
                "instead of .T or slicing); pass it in layout 'ND' for other uses")
