"""Lowering of data movement workloads (``concatenate``, ``pad``): each tile of each
piece (``pypto.ir.movement.pieces``) is a DMA from its source view into a UB slot and a
DMA from there to its box of the output; fill pieces store from one UB tile that the
vector unit filled once (``VDUP``) per core. Tiles are dealt round-robin to the cores;
synchronization comes from the sync pass (a load waits for the store that last read
its slot)."""

from __future__ import annotations

import numpy as np

from pypto.codegen.isa import Mem, Op
from pypto.codegen.memories import memory_map
from pypto.codegen.place import Arena
from pypto.codegen.program import Operand, StreamBuilder
from pypto.ir.dtypes import BY_NAME
from pypto.ir.movement import Piece, fill_value, has_fill, movement_node, pieces, rows_and_cols
from pypto.ir.workload import Workload
from pypto.schedule_space.common import round_up
from pypto.schedule_space.movement import tile_bytes
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target


def row_offsets(offset: int, shape: tuple[int, ...], strides: tuple[int, ...], r0: int,
                count: int) -> np.ndarray:
    """Element offsets of rows ``r0 .. r0 + count`` of a piece (its last axis is the row)."""
    rows = np.arange(r0, r0 + count, dtype=np.int64)
    if len(shape) == 1:
        return np.full(count, offset, dtype=np.int64)
    idx = np.unravel_index(rows, shape[:-1])
    return offset + sum(np.asarray(i, dtype=np.int64) * s for i, s in zip(idx, strides[:-1]))


def paired_runs(src: np.ndarray, dst: np.ndarray) -> list[tuple[int, int, int, int, int, int]]:
    """Split rows into runs whose source and destination offsets both step evenly:
    ``(first, count, src offset, src delta, dst offset, dst delta)``, one DMA pair each."""
    out, start, n = [], 0, len(src)
    while start < n:
        end = start + 1
        if end < n:
            ds, dd = src[end] - src[start], dst[end] - dst[start]
            while end + 1 < n and src[end + 1] - src[end] == ds and dst[end + 1] - dst[end] == dd:
                end += 1
            end += 1
        else:
            ds = dd = 0
        count = end - start
        out.append((start, count, int(src[start]), int(ds) if count > 1 else 0,
                    int(dst[start]), int(dd) if count > 1 else 0))
        start = end
    return out


def emit(wl: Workload, s: Schedule, target: Target, gm_in: dict[int, int],
         gm_out: dict[int, int]) -> list[StreamBuilder]:
    ub = target.role("vector")
    mem = memory_map(target).roles["vector"]
    arena = Arena(mem, ub.capacity, ub.alignment, ub.name)
    dt = BY_NAME[movement_node(wl).dtype]
    tr, tc = s["tile_rows"], s["tile_cols"]
    one = tile_bytes(wl, tr, tc, ub.alignment)
    slots = arena.alloc(one, s["depth"])
    fill = arena.alloc(one) if has_fill(wl) else None
    max_rows, max_cols = rows_and_cols(wl)
    pitch = round_up(min(tc, max_cols), max(1, ub.alignment // dt.itemsize))
    out_sym = gm_out[wl.outputs[0]]
    tiles = [(p, r0, min(tr, p.rows - r0), c0, min(tc, p.cols - c0))
             for p in pieces(wl) for r0 in range(0, p.rows, tr) for c0 in range(0, p.cols, tc)]
    streams = []
    for core in range(s["cores"]):
        sb = StreamBuilder(target)
        mine = tiles[core::s["cores"]]
        if fill is not None and any(p.source is None for p, *_ in mine):
            sb.emit(Op.VDUP, Operand(mem, fill.addr(0), min(tr, max_rows), min(tc, max_cols),
                                     pitch), dtype=dt, imm=fill_value(wl))
        slot = 0
        for piece, r0, rows, c0, cols in mine:
            base = fill.addr(0) if piece.source is None and fill is not None \
                else slots.addr(slot)
            runs = _runs(piece, r0, rows)
            if piece.source is not None:
                slot += 1
                cs = piece.src_strides[-1]
                for first, count, src, ds, _, _ in runs:
                    sb.emit(Op.COPY, Operand(mem, base + first * pitch * dt.itemsize, count,
                                             cols, pitch),
                            Operand(Mem.GM, src + c0 * cs, count, cols, ds, cs,
                                    gm=gm_in[piece.source]), dtype=dt)
            cs = piece.dst_strides[-1]
            for first, count, _, _, dst, dd in runs:
                sb.emit(Op.COPY, Operand(Mem.GM, dst + c0 * cs, count, cols, dd, cs, gm=out_sym),
                        Operand(mem, base + first * pitch * dt.itemsize, count, cols, pitch),
                        dtype=dt)
        streams.append(sb)
    return streams


def _runs(piece: Piece, r0: int, rows: int) -> list[tuple[int, int, int, int, int, int]]:
    src = row_offsets(piece.src_offset, piece.shape, piece.src_strides, r0, rows)
    dst = row_offsets(piece.dst_offset, piece.shape, piece.dst_strides, r0, rows)
    return paired_runs(src, dst)
