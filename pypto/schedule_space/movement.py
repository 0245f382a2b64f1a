"""Data movement workloads (``concatenate``, ``pad``; ``pypto.ir.movement``): every piece
of the output goes GM -> UB -> GM in tiles of ``tile_rows`` x ``tile_cols`` (a fill
piece is stored from one UB tile the vector unit filled once), tiles dealt round-robin
to ``cores`` vector cores, ``depth`` UB slots rotating so that the load of one tile
overlaps the store of the previous.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pypto.ir.dtypes import BY_NAME
from pypto.ir.movement import has_fill, movement_node, pieces, rows_and_cols
from pypto.schedule_space.common import MAX_DEPTH, core_choice, core_choices, round_up
from pypto.schedule_space.memory import RoleUse, memory_constraints
from pypto.schedule_space.memory import footprints as role_footprints
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Axis, Constraint, Space

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.targets import Target

MAX_TILE_ROWS = 4096
MIN_CHUNK = 32  # the narrowest column chunk of a split row


def itemsize(wl: Workload) -> int:
    return BY_NAME[movement_node(wl).dtype].itemsize


def tile_bytes(wl: Workload, tile_rows: int, tile_cols: int, align: int) -> int:
    """One UB tile: ``tile_rows`` rows at a pitch of ``tile_cols`` rounded to the
    alignment (never more rows or columns than a piece has)."""
    rows, cols = rows_and_cols(wl)
    isz = itemsize(wl)
    pitch = round_up(min(tile_cols, cols), max(1, align // isz))
    return round_up(min(tile_rows, rows) * pitch * isz, align)


def ub_bytes(wl: Workload, k: Any, align: int) -> int:
    one = tile_bytes(wl, k["tile_rows"], k["tile_cols"], align)
    return one * k["depth"] + (one if has_fill(wl) else 0)


def units(wl: Workload, tile_rows: int, tile_cols: int) -> int:
    """Tiles over all pieces: what the cores share."""
    return sum(math.ceil(p.rows / tile_rows) * math.ceil(p.cols / tile_cols)
               for p in pieces(wl))


def num_tiles(wl: Workload, s: Any) -> int:
    return units(wl, s["tile_rows"], s["tile_cols"])


def memory_uses(wl: Workload, target: Target) -> list[RoleUse]:
    align = target.role("vector").alignment
    return [RoleUse("vector", ("depth", "tile_cols", "tile_rows"),
                    lambda k: ub_bytes(wl, k, align),
                    lambda k: f"tile_rows={k['tile_rows']} x tile_cols={k['tile_cols']} x "
                              f"depth={k['depth']}" + (" (+ the fill tile)"
                                                       if has_fill(wl) else ""))]


def footprints(wl: Workload, s: Any, target: Target) -> dict[str, int]:
    return role_footprints(memory_uses(wl, target), s)


def _axes_choices(wl: Workload) -> tuple[tuple[int, ...], tuple[int, ...]]:
    rows, cols = rows_and_cols(wl)
    row_choices = {1 << i for i in range(rows.bit_length()) if 1 << i <= MAX_TILE_ROWS}
    if rows <= MAX_TILE_ROWS:
        row_choices.add(rows)
    col_choices = {cols} | {1 << i for i in range(MIN_CHUNK.bit_length() - 1,
                                                  cols.bit_length()) if 1 << i < cols}
    return tuple(sorted(row_choices)), tuple(sorted(col_choices))


def build_space(wl: Workload, target: Target) -> Space:
    """Tile rows and columns, UB slots, vector cores."""
    rows, cols = _axes_choices(wl)
    axes = [
        Axis("depth", tuple(range(1, MAX_DEPTH + 1)), "UB slots (2: a load overlaps a store)"),
        Axis("tile_cols", cols, "columns per tile (a piece's row, or chunks of it)"),
        Axis("tile_rows", rows, "rows per tile"),
        Axis("cores", core_choices(target.vector_cores), "vector cores sharing the tiles"),
    ]

    def core_count(k: dict[str, Any]) -> list[str]:
        tiles = units(wl, k["tile_rows"], k["tile_cols"])
        return [] if k["cores"] <= tiles else [f"cores={k['cores']} exceeds the {tiles} tiles"]

    constraints = memory_constraints(target, memory_uses(wl, target), [a.name for a in axes])
    constraints.append(Constraint(("tile_cols", "tile_rows", "cores"), core_count))
    return Space(wl, target, axes, constraints, lambda: default(wl, target))


def default(wl: Workload, target: Target) -> Schedule:
    """Whole rows (the longest chunk that fits otherwise), double buffered, the most
    rows (a power of two) that fit half of UB and do not pass the rows per core of an
    even spread over the vector cores."""
    ub = target.role("vector")
    rows, cols = _axes_choices(wl)
    depth = 2
    tile_cols = next((c for c in reversed(cols)
                      if ub_bytes(wl, {"tile_rows": 1, "tile_cols": c, "depth": depth},
                                  ub.alignment) <= ub.capacity), cols[0])
    per_core = max(1, math.ceil(rows_and_cols(wl)[0] / target.vector_cores))
    tile_rows = rows[0]
    for r in rows:
        k = {"tile_rows": r, "tile_cols": tile_cols, "depth": depth}
        if r > per_core or ub_bytes(wl, k, ub.alignment) > ub.capacity // 2:
            break
        tile_rows = r
    tiles = units(wl, tile_rows, tile_cols)
    return Schedule(depth=depth, tile_cols=tile_cols, tile_rows=tile_rows,
                    cores=core_choice(min(target.vector_cores, tiles), target.vector_cores))


def complete(wl: Workload, s: Schedule) -> Schedule:
    """Nothing was added to this space after its first records."""
    return s
