"""Vector workloads (elementwise chains, last-axis reductions, softmax, layernorm):
the chain analysis, the UB footprint of a tiling, the default tiling and validation.

Knobs: ``tile_rows`` x ``tile_cols`` per tile, ``depth`` UB slots per value (2 =
double buffering), ``cores``, and ``inplace`` (an elementwise op overwrites its operand's
buffer when nothing else reads it: less UB, but one buffer then lives through load,
compute and store, so ``inplace`` with ``depth=1`` serializes the three stages).

Row space: a vector workload's ``space`` ``S`` is viewed as ``R = prod(S[:-1])`` rows of
``C = S[-1]`` columns. Column-phase values are ``[rows, cols]`` tiles, row-phase values
(reduction results) ``[rows, 1]``. A tile covers ``tile_rows`` rows and ``tile_cols``
columns; reductions whose results feed back into column-phase values need whole rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pypto.ir.dtypes import BY_NAME
from pypto.ir.workload import Workload
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Axis, Constraint, Space

if TYPE_CHECKING:
    from pypto.targets import Target

MAX_DEPTH = 4
MAX_TILE_ROWS = 4096


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


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
            full = any(u.op in ("sum", "max", "min") for u in wl.nodes if i in u.args)
            rb = not full and all(s == 0 for s in strides[:-1])
            cb = not full and strides[-1] == 0
            values.append(ChainValue(i, "col", rb, cb, n.dtype))
            phase[i] = "load"
            continue
        if n.op in ("sum", "max", "min"):
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


def footprint(chain: Chain, tile_rows: int, tile_cols: int, depth: int, align: int) -> int:
    """UB bytes the codegen places for this tiling (every value ``depth`` slots)."""
    total = sum(value_bytes(v, tile_rows, tile_cols, align) * depth for v in chain.values
                if v.alias is None)
    if chunked(chain, tile_cols):  # fp32 partial + accumulator per reduction
        reductions = sum(1 for v in chain.values if v.phase == "row")
        total += reductions * 2 * round_up(tile_rows * 4, align) * depth
    return total


def default(wl: Workload, target: Target) -> Schedule:
    """Largest tiles that fit UB with double buffering, spread over the vector cores.
    Rows too long for that: in-place ops, then single buffering, then (when the chain
    allows) split rows into column chunks; a row that fits in no way is an error."""
    ub = target.role("vector")
    depth, inplace = 2, False
    chain = analyze(wl)
    for depth, inplace in ((2, False), (2, True), (1, True)):
        chain = analyze(wl, inplace=inplace)
        if footprint(chain, 1, chain.cols, depth, ub.alignment) <= ub.capacity:
            break
    else:
        depth, inplace, chain = 2, False, analyze(wl)
    cores = target.vector_cores
    tile_cols = chain.cols
    per_core_rows = max(1, math.ceil(chain.rows / cores))
    if footprint(chain, 1, tile_cols, depth, ub.alignment) > ub.capacity:
        if chain.needs_full_rows:
            from pypto.errors import UnsupportedError

            raise UnsupportedError(
                f"{wl.describe()}: one row of {chain.cols} elements (with the values this "
                f"chain keeps per row) needs more than the {ub.capacity} bytes of "
                f"{ub.name}, and a reduction result is used on whole rows, so rows cannot "
                "be split; reduce over a shorter axis or split the op")
        else:
            tile_cols = max(32, 1 << (chain.cols.bit_length() - 1))
            while tile_cols > 32 and footprint(chain, 1, tile_cols, depth,
                                               ub.alignment) > ub.capacity:
                tile_cols //= 2
    tile_rows = 1
    while tile_rows * 2 <= min(per_core_rows, MAX_TILE_ROWS) and footprint(
            chain, tile_rows * 2, tile_cols, depth, ub.alignment) <= ub.capacity // 2:
        tile_rows *= 2
    tiles = math.ceil(chain.rows / tile_rows) * math.ceil(chain.cols / tile_cols)
    from pypto.schedule_space.matmul import core_choice

    return Schedule(tile_rows=tile_rows, tile_cols=tile_cols, depth=depth,
                    cores=core_choice(min(cores, tiles), cores), inplace=inplace)


def complete(wl: Workload, s: Schedule) -> Schedule:
    """``s`` with ``inplace`` (neutral: False) filled in when missing."""
    return s if "inplace" in s else s.replace(inplace=False)


def violations(wl: Workload, s: Schedule, target: Target) -> list[str]:
    out = _require(s, ("tile_rows", "tile_cols", "depth", "cores"))
    if out:
        return out
    inplace = s.get("inplace", False)
    if not isinstance(inplace, bool):
        out.append(f"inplace={inplace!r} must be true or false")
        inplace = False
    if "inplace" not in s:
        out.append("missing knob 'inplace' (true or false)")
    chain = analyze(wl, inplace=inplace)
    ub = target.role("vector")
    if not 1 <= s["tile_rows"]:
        out.append(f"tile_rows={s['tile_rows']} must be >= 1")
    if not 1 <= s["tile_cols"] <= chain.cols:
        out.append(f"tile_cols={s['tile_cols']} must be in 1..{chain.cols} (the row length)")
    elif s["tile_cols"] < chain.cols and chain.needs_full_rows:
        out.append(f"tile_cols={s['tile_cols']}: this chain uses a reduction result on whole "
                   f"rows, so tile_cols must be the row length {chain.cols}")
    if not 1 <= s["depth"] <= MAX_DEPTH:
        out.append(f"depth={s['depth']} must be in 1..{MAX_DEPTH}")
    if not 1 <= s["cores"] <= target.vector_cores:
        out.append(f"cores={s['cores']} must be in 1..{target.vector_cores} "
                   f"({target.name} has {target.vector_cores} vector cores)")
    if not out:
        need = footprint(chain, s["tile_rows"], s["tile_cols"], s["depth"], ub.alignment)
        if need > ub.capacity:
            out.append(f"UB: {need} bytes needed for tile_rows={s['tile_rows']}, "
                       f"tile_cols={s['tile_cols']}, depth={s['depth']} but {ub.name} holds "
                       f"{ub.capacity}")
    return out


def _require(s: Schedule, knobs: tuple[str, ...]) -> list[str]:
    out = [f"missing knob {k!r}" for k in knobs if k not in s]
    out += [f"{k}={s[k]!r} must be an int" for k in knobs if k in s and
            (not isinstance(s[k], int) or isinstance(s[k], bool))]
    return out


def space(wl: Workload, target: Target) -> Space:
    """The vector schedule space: tile shape, buffers, cores, in-place."""
    chain = analyze(wl)
    ub = target.role("vector")
    rows = tuple(sorted({1 << i for i in range(chain.rows.bit_length())
                         if 1 << i <= MAX_TILE_ROWS}
                        | ({chain.rows} if chain.rows <= MAX_TILE_ROWS else set())))
    cols = {chain.cols}
    if not chain.needs_full_rows:
        cols |= {1 << i for i in range(5, chain.cols.bit_length()) if 1 << i < chain.cols}
    from pypto.schedule_space.matmul import CORE_GRID

    cores = tuple(sorted({c for c in CORE_GRID if c <= target.vector_cores}
                         | {target.vector_cores}))
    axes = [
        Axis("inplace", (False, True), "elementwise ops overwrite their operand's buffer"),
        Axis("depth", tuple(range(1, MAX_DEPTH + 1)), "UB slots per value (2: ping-pong)"),
        Axis("tile_cols", tuple(sorted(cols)), "columns per tile (the row length unless "
                                               "a long row is split)"),
        Axis("tile_rows", rows, "rows per tile"),
        Axis("cores", cores, "vector cores sharing the tiles"),
    ]

    def fits(k: dict[str, Any]) -> list[str]:
        c = analyze(wl, inplace=k["inplace"])
        need = footprint(c, k["tile_rows"], k["tile_cols"], k["depth"], ub.alignment)
        return [] if need <= ub.capacity else [
            f"{ub.name}: tile_rows={k['tile_rows']} x tile_cols={k['tile_cols']} x depth="
            f"{k['depth']} needs {need} bytes but {ub.name} holds {ub.capacity}"]

    def core_count(k: dict[str, Any]) -> list[str]:
        tiles = math.ceil(chain.rows / k["tile_rows"]) * math.ceil(chain.cols / k["tile_cols"])
        return [] if k["cores"] <= tiles else [
            f"cores={k['cores']} exceeds the {tiles} tiles"]

    analyze_cache = {False: analyze(wl, inplace=False), True: analyze(wl, inplace=True)}

    def fits_cached(k: dict[str, Any]) -> list[str]:
        c = analyze_cache[k["inplace"]]
        need = footprint(c, k["tile_rows"], k["tile_cols"], k["depth"], ub.alignment)
        return [] if need <= ub.capacity else fits(k)

    return Space(wl, target, axes, [
        Constraint(("inplace", "depth", "tile_cols", "tile_rows"), fits_cached),
        Constraint(("tile_cols", "tile_rows", "cores"), core_count)],
        lambda: default(wl, target))
