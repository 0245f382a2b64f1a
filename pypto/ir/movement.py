"""Data movement workloads (``concatenate``, ``pad``): an output assembled from pieces,
each a block of the output copied from a strided view of an input or filled with a
constant. Schedule space and code generation both work from ``pieces(workload)``.

A piece is a box of the output (its ``dst_offset`` and the output's strides) and where
its elements come from (``src_offset`` and ``src_strides`` in the input ``source``
reads, or ``None``: the fill value). Dimensions of size 1 are dropped and adjacent
dimensions that are contiguous in both source and destination are merged, so a piece
is as few, as long rows as its layout allows: ``rows`` x ``cols``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pypto.ir.views import contiguous_strides
from pypto.ir.workload import WNode, Workload

MOVEMENT_OPS = frozenset({"concatenate", "pad"})
FAMILY = "movement"


@dataclass(frozen=True)
class Piece:
    source: int | None           # the workload input read, or None: filled with ``value``
    shape: tuple[int, ...]       # coalesced; the last dimension is the row
    src_offset: int
    src_strides: tuple[int, ...]
    dst_offset: int
    dst_strides: tuple[int, ...]

    @property
    def rows(self) -> int:
        return math.prod(self.shape[:-1])

    @property
    def cols(self) -> int:
        return self.shape[-1]


def coalesce(shape: tuple[int, ...], src: tuple[int, ...], dst: tuple[int, ...]
             ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """``shape`` with size-1 dimensions dropped and neighbours merged where both stride
    lists are contiguous across them (at least one dimension is kept)."""
    dims = [(d, s, t) for d, s, t in zip(shape, src, dst) if d != 1] or [(1, 1, 1)]
    out = [dims[0]]
    for d, s, t in dims[1:]:
        pd, ps, pt = out[-1]
        if ps == s * d and pt == t * d:
            out[-1] = (pd * d, s, t)
        else:
            out.append((d, s, t))
    return tuple(d for d, _, _ in out), tuple(s for _, s, _ in out), \
        tuple(t for _, _, t in out)


def movement_node(wl: Workload) -> WNode:
    return wl.nodes[wl.outputs[0]]


def fill_value(wl: Workload) -> float:
    return float(movement_node(wl).attr("value", 0.0))


def pieces(wl: Workload) -> tuple[Piece, ...]:
    """The pieces of a movement workload's output, disjoint and covering it."""
    node = movement_node(wl)
    out_strides = contiguous_strides(node.shape)
    loads = [wl.nodes[a] for a in node.args]
    raw: list[tuple[int | None, tuple[int, ...], int, tuple[int, ...], int]] = []
    if node.op == "concatenate":
        axis, start = node.attr("axis"), 0
        for ld in loads:
            raw.append((ld.attr("input"), ld.shape, ld.attr("offset"), ld.attr("strides"),
                        start * out_strides[axis]))
            start += ld.shape[axis]
    else:  # pad
        pads = node.attr("pads")
        ld = loads[0]
        inner = [b for b, _ in pads]
        raw.append((ld.attr("input"), ld.shape, ld.attr("offset"), ld.attr("strides"),
                    sum(b * s for b, s in zip(inner, out_strides))))
        for axis, (before, after) in enumerate(pads):
            for begin, size in ((0, before), (before + ld.shape[axis], after)):
                if size == 0:
                    continue
                shape = (*ld.shape[:axis], size, *node.shape[axis + 1:])
                offset = sum(b * s for b, s in zip(inner[:axis], out_strides)) + \
                    begin * out_strides[axis]
                raw.append((None, shape, 0, (0,) * len(shape), offset))
    out = []
    for source, shape, src_offset, src_strides, dst_offset in raw:
        if math.prod(shape) == 0:
            continue
        shp, src, dst = coalesce(shape, src_strides, out_strides)
        out.append(Piece(source, shp, src_offset, src, dst_offset, dst))
    return tuple(out)


def rows_and_cols(wl: Workload) -> tuple[int, int]:
    """The most rows of any piece and the longest row."""
    ps = pieces(wl)
    return max(p.rows for p in ps), max(p.cols for p in ps)


def has_fill(wl: Workload) -> bool:
    return any(p.source is None for p in pieces(wl))
