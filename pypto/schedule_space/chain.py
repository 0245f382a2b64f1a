"""Vector chains on UB (a vector workload, or a cube kernel's elementwise epilogue):
which values live in UB, in which phase, and the bytes a tiling places for them.

Row space: a vector workload's ``space`` ``S`` is viewed as ``R = prod(S[:-1])`` rows of
``C = S[-1]`` columns. Column-phase values are ``[rows, cols]`` tiles, row-phase values
(reduction results) ``[rows, 1]``. A tile covers ``tile_rows`` rows and ``tile_cols``
columns; reductions whose results feed back into column-phase values need whole rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pypto.ir.dtypes import BY_NAME
from pypto.schedule_space.common import round_up

if TYPE_CHECKING:
    from pypto.ir.workload import Workload

REDUCTIONS = frozenset({"sum", "max", "min"})  # last-axis reductions: row-phase results


@dataclass(frozen=True)
class ChainValue:
    """A value held in UB: a load or an op result."""

    node: int            # workload node index
    phase: str           # "col" or "row"
    row_bcast: bool      # one row serves the whole tile (all row strides 0)
    col_bcast: bool      # one column serves the whole tile (column stride 0)
    dtype: str
    accumulator: bool = False  # fp32/int32 running reduction over column chunks
    alias: int | None = None   # computed in place: shares this (root) value's UB slots


@dataclass(frozen=True)
class Chain:
    space: tuple[int, ...]
    rows: int
    cols: int
    values: tuple[ChainValue, ...]
    needs_full_rows: bool  # a reduction result is used by a column-phase op


def analyze(wl: Workload, space: tuple[int, ...] | None = None,
            skip: frozenset[int] = frozenset(), inplace: bool = False) -> Chain:
    """Phases and UB values of a workload's vector chain (``skip``: nodes not in UB,
    e.g. a matmul's operand loads)."""
    space = tuple(space or wl.attr("space"))
    rows, cols = math.prod(space[:-1]), space[-1]
    values: list[ChainValue] = []
    phase: dict[int, str] = {}
    for i, n in enumerate(wl.nodes):
        if i in skip:
            continue
        if n.op == "load":
            strides = _row_space_strides(n.shape, n.attr("strides"), space)
            full = any(u.op in REDUCTIONS for u in wl.nodes if i in u.args)
            rb = not full and all(s == 0 for s in strides[:-1])
            cb = not full and strides[-1] == 0
            values.append(ChainValue(i, "col", rb, cb, n.dtype))
            phase[i] = "load"
            continue
        if n.op in REDUCTIONS:
            phase[i] = "row"
        elif tuple(n.shape) == space or (cols == 1 and math.prod(n.shape) == rows):
            phase[i] = "col"
        else:
            phase[i] = "row"
        values.append(ChainValue(i, phase[i], False, False, n.dtype))
    needs_full = any(phase.get(i) == "col" and any(phase.get(a) == "row" for a in n.args)
                     for i, n in enumerate(wl.nodes))
    if inplace:
        values = _in_place(wl, values)
    return Chain(space, rows, cols, tuple(values), needs_full)


_IN_PLACE_OPS = frozenset({"copy", "relu", "exp", "log", "sqrt", "rsqrt", "reciprocal", "gelu",
                           "sigmoid", "tanh", "abs", "neg", "add", "sub", "mul", "div",
                           "maximum", "minimum", "add_scalar", "mul_scalar", "max_scalar",
                           "min_scalar"})


def _in_place(wl: Workload, values: list[ChainValue]) -> list[ChainValue]:
    """Let an elementwise op write over its first operand's buffer when nothing else
    reads that operand: less UB, hence bigger tiles (liveness within one tile)."""
    by_node = {v.node: v for v in values}
    users: dict[int, int] = {}
    for n in wl.nodes:
        for a in set(n.args):
            users[a] = users.get(a, 0) + 1
    outputs = set(wl.outputs)
    out = []
    for v in values:
        n = wl.nodes[v.node]
        src = by_node.get(n.args[0]) if n.args else None
        if (n.op in _IN_PLACE_OPS and src is not None and users.get(src.node) == 1
                and src.node not in outputs and src.phase == v.phase
                and not src.row_bcast and not src.col_bcast and src.dtype == v.dtype
                and wl.nodes[src.node].op != "matmul"):
            v = ChainValue(v.node, v.phase, False, False, v.dtype,
                           alias=src.alias if src.alias is not None else src.node)
        by_node[v.node] = v
        out.append(v)
    return out


def _row_space_strides(view_shape: tuple[int, ...], strides: tuple[int, ...],
                       space: tuple[int, ...]) -> tuple[int, ...]:
    """Strides of a view broadcast to ``space`` (0 where it broadcasts)."""
    pad = len(space) - len(view_shape)
    shape = (1,) * pad + tuple(view_shape)
    st = (0,) * pad + tuple(strides)
    return tuple(0 if d == 1 and s_d != 1 else s for d, s_d, s in zip(shape, space, st))


def value_bytes(v: ChainValue, tile_rows: int, tile_cols: int, align: int) -> int:
    """UB bytes of one slot of ``v`` (rows padded so each row starts aligned)."""
    isz = BY_NAME["float32" if v.accumulator else v.dtype].itemsize
    r = 1 if v.row_bcast else tile_rows
    if v.phase == "row" or v.col_bcast:
        return round_up(r * isz, align)
    return r * pitch(tile_cols, isz, align) * isz


def pitch(cols: int, itemsize: int, align: int) -> int:
    return round_up(cols, max(1, align // itemsize))


def chunked(chain: Chain, tile_cols: int) -> bool:
    return tile_cols < chain.cols


def stages(wl: Workload, chain: Chain) -> dict[int, int]:
    """The pass over a row's column chunks in which each UB value is first available,
    when rows are split into chunks (a multi-pass kernel).

    A reduction is complete only after a whole pass over the row, so a value that reads
    one is computed in a later pass: a load is stage 0, an op the latest stage of its
    operands, a reduction one more than its operand (it accumulates during that
    operand's pass and is final at its end). Softmax is three passes (max; exp and its
    sum; the quotient), each re-loading the row's chunks and recomputing what it needs.
    """
    in_ub = {v.node for v in chain.values}
    stage: dict[int, int] = {}
    for i, n in enumerate(wl.nodes):
        if i not in in_ub:
            continue
        s = max((stage[a] for a in n.args if a in stage), default=0)
        stage[i] = s + 1 if n.op in REDUCTIONS else s
    return stage


def footprint(chain: Chain, tile_rows: int, tile_cols: int, depth: int, align: int) -> int:
    """UB bytes the codegen places for this tiling (every value ``depth`` slots)."""
    total = sum(value_bytes(v, tile_rows, tile_cols, align) * depth for v in chain.values
                if v.alias is None)
    if chunked(chain, tile_cols):  # fp32 partial + accumulator per reduction
        reductions = sum(1 for v in chain.values if v.phase == "row")
        total += reductions * 2 * round_up(tile_rows * 4, align) * depth
    return total
