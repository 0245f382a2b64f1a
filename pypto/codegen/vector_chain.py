"""Emit one tile of a vector chain: DMA loads into UB, vector ops, DMA stores to GM.

Used for vector workloads and for matmul epilogues (where the matmul result arrives in
UB from the accumulator). Tiles live in the row space of ``chain.space`` (see
``pypto.schedule_space.chain``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pypto.codegen.isa import Mem, Op
from pypto.codegen.place import Arena, Slots, broadcast_strides, row_runs
from pypto.codegen.program import Operand, StreamBuilder
from pypto.ir.dtypes import BY_NAME, DType
from pypto.ir.workload import Workload
from pypto.schedule_space.chain import Chain, pitch, stages, value_bytes

UNARY_OPS = {"copy": Op.VCOPY, "cast": Op.VCAST, "relu": Op.VRELU, "exp": Op.VEXP,
             "log": Op.VLN, "sqrt": Op.VSQRT, "rsqrt": Op.VRSQRT, "reciprocal": Op.VRECIP,
             "gelu": Op.VGELU, "sigmoid": Op.VSIGMOID, "tanh": Op.VTANH, "abs": Op.VABS,
             "neg": Op.VNEG}
BINARY_OPS = {"add": Op.VADD, "sub": Op.VSUB, "mul": Op.VMUL, "div": Op.VDIV,
              "maximum": Op.VMAX, "minimum": Op.VMIN}
SCALAR_OPS = {"add_scalar": Op.VADDS, "mul_scalar": Op.VMULS, "max_scalar": Op.VMAXS,
              "min_scalar": Op.VMINS}
COMPARE_OPS = {"equal": Op.VCMPEQ, "not_equal": Op.VCMPNE, "less": Op.VCMPLT,
               "less_equal": Op.VCMPLE, "greater": Op.VCMPGT, "greater_equal": Op.VCMPGE}
REDUCE_OPS = {"sum": Op.VREDSUM, "max": Op.VREDMAX, "min": Op.VREDMIN}
COMBINE_OPS = {"sum": Op.VADD, "max": Op.VMAX, "min": Op.VMIN}


@dataclass
class Tile:
    r0: int
    rows: int
    c0: int
    cols: int


class ChainEmitter:
    """Places the chain's UB buffers once, then emits tiles into a ``StreamBuilder``."""

    def __init__(self, wl: Workload, chain: Chain, tile_rows: int, tile_cols: int, depth: int,
                 ub: Arena, gm_inputs: dict[int, int], gm_outputs: dict[int, int],
                 chunked: bool) -> None:
        self.wl, self.chain, self.chunked = wl, chain, chunked
        self.gm_inputs, self.gm_outputs = gm_inputs, gm_outputs
        self.values = {v.node: v for v in chain.values}
        self.slots: dict[int, Slots] = {}
        for v in chain.values:
            if v.alias is None:
                self.slots[v.node] = ub.alloc(value_bytes(v, tile_rows, tile_cols,
                                                          ub.alignment), depth)
            else:
                self.slots[v.node] = self.slots[v.alias]
        self.acc: dict[int, tuple[Slots, Slots]] = {}
        if chunked:
            for v in chain.values:
                if wl.nodes[v.node].op in REDUCE_OPS:
                    size = tile_rows * 4
                    self.acc[v.node] = (ub.alloc(size, depth), ub.alloc(size, depth))
        self.align = ub.alignment
        self.mem = ub.mem  # the target's vector memory (UB, NRAM, ...)

    # -- operands -------------------------------------------------------------------------
    def dtype(self, node: int) -> DType:
        return BY_NAME[self.wl.nodes[node].dtype]

    def operand(self, node: int, tile: Tile, slot: int) -> Operand:
        v = self.values[node]
        isz = self.dtype(node).itemsize
        rows = 1 if v.row_bcast else tile.rows
        if v.phase == "row" or v.col_bcast:
            return Operand(self.mem, self.slots[node].addr(slot), rows, 1, 1)
        p = pitch(tile.cols, isz, self.align)
        return Operand(self.mem, self.slots[node].addr(slot), rows, tile.cols, p)

    def _acc_operand(self, node: int, which: int, tile: Tile, slot: int) -> Operand:
        return Operand(self.mem, self.acc[node][which].addr(slot), tile.rows, 1, 1)

    # -- emission -------------------------------------------------------------------------
    def load(self, sb: StreamBuilder, node: int, tile: Tile, slot: int) -> None:
        n = self.wl.nodes[node]
        v = self.values[node]
        dst = self.operand(node, tile, slot)
        strides = broadcast_strides(n.shape, n.attr("strides"), self.chain.space)
        cs = strides[-1]
        col_off = tile.c0 * cs
        if v.row_bcast:
            runs = [(0, 1, row_runs(n.attr("offset"), strides, self.chain.space, tile.r0, 1)[0][2],
                     0)]
        else:
            runs = row_runs(n.attr("offset"), strides, self.chain.space, tile.r0, tile.rows)
        isz = self.dtype(node).itemsize
        for first, count, off, delta in runs:
            d = Operand(self.mem, dst.addr + first * dst.rs * isz, count, dst.cols, dst.rs)
            src = Operand(Mem.GM, off + col_off, count, dst.cols, delta, cs,
                          gm=self.gm_inputs[n.attr("input")])
            sb.emit(Op.COPY, d, src, dtype=self.dtype(node))

    def store(self, sb: StreamBuilder, node: int, tile: Tile, slot: int) -> None:
        n = self.wl.nodes[node]
        src = self.operand(node, tile, slot)
        sym = self.gm_outputs[node]
        if self.values[node].phase == "row":
            dst = Operand(Mem.GM, tile.r0, tile.rows, 1, 1, 1, gm=sym)
        else:
            cols = self.chain.cols
            dst = Operand(Mem.GM, tile.r0 * cols + tile.c0, tile.rows, tile.cols, cols, 1, gm=sym)
        sb.emit(Op.COPY, dst, src, dtype=BY_NAME[n.dtype])

    def compute(self, sb: StreamBuilder, node: int, tile: Tile, slot: int,
                row_slot: int, chunk: int, last_chunk: bool) -> None:
        n = self.wl.nodes[node]
        dt = self.dtype(node)
        d = self.operand(node, tile, row_slot if self.values[node].phase == "row" else slot)

        def arg(i: int) -> Operand:
            a = n.args[i]
            s = row_slot if self.values[a].phase == "row" else slot
            return self.operand(a, tile, s)

        if n.op in UNARY_OPS:
            sb.emit(UNARY_OPS[n.op], d, arg(0), dtype=dt, sdtype=self.dtype(n.args[0]))
        elif n.op in BINARY_OPS:
            sb.emit(BINARY_OPS[n.op], d, arg(0), arg(1), dtype=dt)
        elif n.op in COMPARE_OPS:
            sb.emit(COMPARE_OPS[n.op], d, arg(0), arg(1), dtype=dt, sdtype=self.dtype(n.args[0]))
        elif n.op == "where":  # the condition, cast to the result's dtype, then selected
            sb.emit(Op.VCAST, d, arg(0), dtype=dt, sdtype=self.dtype(n.args[0]))
            sb.emit(Op.VSEL, d, arg(1), arg(2), dtype=dt)
        elif n.op in SCALAR_OPS:
            sb.emit(SCALAR_OPS[n.op], d, arg(0), dtype=dt, imm=float(n.attr("value")))
        elif n.op in REDUCE_OPS:
            src_dt = self.dtype(n.args[0])
            if not self.chunked:
                sb.emit(REDUCE_OPS[n.op], d, arg(0), dtype=dt, sdtype=src_dt)
                return
            acc_dt = BY_NAME["float32" if dt.is_float else "int32"]
            acc = self._acc_operand(node, 0, tile, row_slot)
            if chunk == 0:
                sb.emit(REDUCE_OPS[n.op], acc, arg(0), dtype=acc_dt, sdtype=src_dt)
            else:
                part = self._acc_operand(node, 1, tile, row_slot)
                sb.emit(REDUCE_OPS[n.op], part, arg(0), dtype=acc_dt, sdtype=src_dt)
                sb.emit(COMBINE_OPS[n.op], acc, acc, part, dtype=acc_dt)
            if last_chunk:
                sb.emit(Op.VCAST if acc_dt != dt else Op.VCOPY, d, acc, dtype=dt, sdtype=acc_dt)
        else:  # pragma: no cover - the partitioner only forms chains of these ops
            raise AssertionError(f"no vector lowering for {n.op}")

    def emit_loads(self, sb: StreamBuilder, tile: Tile, slot: int) -> None:
        """Only the loads of a one-chunk tile (issued ahead: software pipelining)."""
        for i in range(len(self.wl.nodes)):
            if i in self.values and self.wl.nodes[i].op == "load":
                self.load(sb, i, tile, slot)

    def emit_tile(self, sb: StreamBuilder, row_tile: Tile, chunks: list[tuple[int, int]],
                  slot: int, row_slot: int, preset: frozenset[int] = frozenset(),
                  loaded: bool = False) -> int:
        """Emit all column chunks of one row block; returns the next chunk slot counter.

        ``preset`` nodes are already in UB (a matmul result); ``loaded``: the loads of
        this (one-chunk) tile were already emitted by ``emit_loads``."""
        if self.chunked and self.chain.needs_full_rows:
            return self.emit_passes(sb, row_tile, chunks, slot, row_slot)
        nodes = [i for i in range(len(self.wl.nodes)) if i in self.values]
        row_nodes = [i for i in nodes if self.values[i].phase == "row"
                     and self.wl.nodes[i].op not in REDUCE_OPS]
        outs = set(self.wl.outputs)
        for j, (c0, cols) in enumerate(chunks):
            tile = Tile(row_tile.r0, row_tile.rows, c0, cols)
            last = j == len(chunks) - 1
            for i in nodes:
                if i in preset:
                    continue
                op = self.wl.nodes[i].op
                if op == "load":
                    if not loaded:
                        self.load(sb, i, tile, slot)
                elif self.chunked and i in row_nodes:
                    continue
                else:
                    self.compute(sb, i, tile, slot, row_slot, j, last)
                    row_phase = self.values[i].phase == "row"
                    if i in outs and not (self.chunked and row_phase):
                        self.store(sb, i, tile, row_slot if row_phase else slot)
            if self.chunked and last:
                for i in row_nodes:
                    self.compute(sb, i, tile, slot, row_slot, j, last)
                for i in nodes:
                    if i in outs and self.values[i].phase == "row":
                        self.store(sb, i, tile, row_slot)
            slot += 1
        return slot

    def nodes(self) -> list[int]:
        """The chain's nodes that have values, in order."""
        return [i for i in range(len(self.wl.nodes)) if i in self.values]

    def passes(self) -> list[tuple[int, list[int], list[int], list[int], set[int]]]:
        """Per pass ``k`` of a multi-pass row block: the reductions it accumulates, the
        stage-0 row values it computes first (pass 0 only), the row values it completes
        last, and the column values it must (re)compute."""
        wl, values = self.wl, self.values
        stage = stages(wl, self.chain)
        nodes = self.nodes()
        col = {i for i in nodes if values[i].phase != "row"}
        rows = [i for i in nodes if values[i].phase == "row" and wl.nodes[i].op not in REDUCE_OPS]
        outs = set(wl.outputs)
        out = []
        for k in range(max(stage[i] for i in col) + 1):
            reductions = [i for i in nodes if wl.nodes[i].op in REDUCE_OPS and stage[i] == k + 1]
            first = [i for i in rows if stage[i] == 0] if k == 0 else []
            last = [i for i in rows if stage[i] == k + 1]
            wanted = {i for i in col if i in outs and stage[i] == k} | set(first)
            wanted |= {a for i in reductions + last for a in wl.nodes[i].args}
            out.append((k, reductions, first, last, self._closure(wanted, col | set(first))))
        return out

    def emit_passes(self, sb: StreamBuilder, row_tile: Tile, chunks: list[tuple[int, int]],
                    slot: int, row_slot: int) -> int:
        """A row block whose rows are split into column chunks although a row value is
        used on whole rows (softmax, layernorm over long rows): one pass over the chunks
        per stage (``chain.stages``). Pass ``k`` re-loads what it needs, recomputes the
        column values of stages up to ``k`` that feed its reductions or are outputs of
        stage ``k``, accumulates the reductions of stage ``k + 1`` and, at its last
        chunk, computes the row values those complete. Row values that need no
        reduction (stage 0) are computed at the first chunk of the first pass."""
        wl, stage, nodes = self.wl, stages(self.wl, self.chain), self.nodes()
        outs = set(wl.outputs)
        for k, reductions, first, last, needed in self.passes():
            for j, (c0, cols) in enumerate(chunks):
                tile = Tile(row_tile.r0, row_tile.rows, c0, cols)
                for i in nodes:
                    if i in reductions:
                        self.compute(sb, i, tile, slot, row_slot, j, j == len(chunks) - 1)
                    elif i in first:
                        if j == 0:
                            self._compute_row(sb, i, tile, slot, row_slot, outs)
                    elif i not in needed:
                        continue
                    elif wl.nodes[i].op == "load":
                        self.load(sb, i, tile, slot)
                    else:
                        self.compute(sb, i, tile, slot, row_slot, j, False)
                        if i in outs and stage[i] == k:
                            self.store(sb, i, tile, slot)
                if j == len(chunks) - 1:  # the row values this pass completed
                    for i in nodes:
                        if i in reductions and i in outs:
                            self.store(sb, i, tile, row_slot)
                        elif i in last:
                            self._compute_row(sb, i, tile, slot, row_slot, outs)
                slot += 1
        return slot

    def _compute_row(self, sb: StreamBuilder, node: int, tile: Tile, slot: int, row_slot: int,
                     outs: set[int]) -> None:
        self.compute(sb, node, tile, slot, row_slot, 0, True)
        if node in outs:
            self.store(sb, node, tile, row_slot)

    def _closure(self, wanted: set[int], computable: set[int]) -> set[int]:
        """``wanted`` and the values among ``computable`` they are computed from."""
        needed, todo = set(), list(wanted)
        while todo:
            i = todo.pop()
            if i in needed or i not in computable:
                continue
            needed.add(i)
            todo.extend(self.wl.nodes[i].args)
        return needed
