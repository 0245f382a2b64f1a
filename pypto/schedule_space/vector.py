"""Vector workloads (elementwise chains, last-axis reductions, softmax, layernorm): the
space, the default tiling and the work units (the chain analysis and the UB bytes of a
tiling are ``chain``'s).

Knobs: ``tile_rows`` x ``tile_cols`` per tile, ``depth`` UB slots per value (2 =
double buffering), ``cores``, and ``inplace`` (an elementwise op overwrites its operand's
buffer when nothing else reads it: less UB, but one buffer then lives through load,
compute and store, so ``inplace`` with ``depth=1`` serializes the three stages).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pypto.errors import UnsupportedError
from pypto.ir.dtypes import BY_NAME
from pypto.schedule_space import fusion
from pypto.schedule_space.chain import Chain, analyze, footprint
from pypto.schedule_space.common import MAX_DEPTH, core_choice, core_choices
from pypto.schedule_space.memory import RoleUse, memory_constraints
from pypto.schedule_space.memory import footprints as role_footprints
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Axis, Constraint, Space

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.targets import Target

MAX_TILE_ROWS = 4096
MIN_CHUNK = 32  # the narrowest column chunk of a split row
#: What a tile costs beyond its elements (a DMA's issue and latency tail, each op's issue),
#: as bytes of data: on ascend910b and ascend310, tiles of 128 elements run 3-7x slower
#: than tiles of 1,024-4,096 elements of the same elementwise chain, which are within
#: 2% of each other (``benchmarks/vector_default.py`` measures the rule that uses it).
TILE_OVERHEAD_BYTES = 2048


def default(wl: Workload, target: Target) -> Schedule:
    """Largest tiles that fit half of UB with double buffering, spread over the vector
    cores, then as many buffers (up to ``MAX_DEPTH``) as UB and each core's tiles allow.
    Rows too long for that: in-place ops, then single buffering, then rows split into
    column chunks (the largest power of two that fits; a chain whose reduction results
    are used on whole rows then runs as a multi-pass kernel, ``chain.stages``). A chain
    that does not reduce rows also splits them into column chunks when that balances
    the cores (too few rows for them, or rows that do not divide evenly:
    ``_spread_columns``)."""
    ub = target.role("vector")
    chains = {inplace: analyze(wl, inplace=inplace) for inplace in (False, True)}

    def buffering(tile_rows: int, tile_cols: int) -> tuple[int, bool] | None:
        for depth, inplace in ((2, False), (2, True), (1, True)):
            if footprint(chains[inplace], tile_rows, tile_cols, depth,
                         ub.alignment) <= ub.capacity:
                return depth, inplace
        return None

    depth, inplace = buffering(1, chains[False].cols) or (2, False)
    chain = chains[inplace]
    cores = target.vector_cores
    tile_cols = chain.cols
    per_core_rows = max(1, math.ceil(chain.rows / cores))
    if footprint(chain, 1, tile_cols, depth, ub.alignment) > ub.capacity:
        tile_cols = max(MIN_CHUNK, 1 << (chain.cols.bit_length() - 1))
        while tile_cols > MIN_CHUNK and footprint(chain, 1, tile_cols, depth,
                                                  ub.alignment) > ub.capacity:
            tile_cols //= 2
        if footprint(chain, 1, tile_cols, depth, ub.alignment) > ub.capacity:
            raise UnsupportedError(
                f"{wl.describe()}: even a chunk of {tile_cols} columns of one row (with "
                f"the values this chain keeps) needs more than the {ub.capacity} bytes "
                f"of {ub.name}; split the op into smaller ones")
    tile_rows = 1
    while tile_rows * 2 <= min(per_core_rows, MAX_TILE_ROWS) and footprint(
            chain, tile_rows * 2, tile_cols, depth, ub.alignment) <= ub.capacity // 2:
        tile_rows *= 2
    if not any(v.phase == "row" for v in chain.values):
        tile_cols = _spread_columns(chain, tile_rows, tile_cols, cores, target)
        depth, inplace = buffering(tile_rows, tile_cols) or (depth, inplace)
        chain = chains[inplace]
    tiles = units(chain, tile_rows, tile_cols)
    used = core_choice(min(cores, tiles), cores)
    # Two buffers hide a tile's load only when its compute takes as long as the load's
    # latency; a core with more tiles ahead keeps more loads in flight, as deep as UB
    # (and the tiles it has) allow.
    while depth < min(MAX_DEPTH, math.ceil(tiles / used)) and footprint(
            chain, tile_rows, tile_cols, depth + 1, ub.alignment) <= ub.capacity:
        depth += 1
    return Schedule(tile_rows=tile_rows, tile_cols=tile_cols, depth=depth, cores=used,
                    inplace=inplace, **fusion.neutral(wl))


def _spread_columns(chain: Chain, tile_rows: int, tile_cols: int, cores: int,
                    target: Target) -> int:
    """On a chain that does not reduce rows (its work units are tiles of rows and
    columns), the column chunk: ``tile_cols`` or the power-of-two chunk narrower than it
    (at least a DMA burst of the narrowest value) that gives the busiest core the least
    work, a tile's work being its elements plus a fixed cost per tile
    (``TILE_OVERHEAD_BYTES`` of the widest value); the widest on a tie (fewer
    instructions)."""
    burst = target.path(target.roles["global"], target.roles["vector"]).min_burst
    sizes = [BY_NAME[v.dtype].itemsize for v in chain.values]
    narrowest = max(MIN_CHUNK, 1 << max(0, (burst // min(sizes) - 1).bit_length()))
    overhead = TILE_OVERHEAD_BYTES // max(sizes)
    blocks = math.ceil(chain.rows / tile_rows)

    def busiest(width: int) -> tuple[int, int]:
        per_core = math.ceil(blocks * math.ceil(chain.cols / width) / cores)
        return per_core * (tile_rows * min(width, chain.cols) + overhead), -width

    widths = [tile_cols] + [1 << i for i in range(narrowest.bit_length() - 1,
                                                  tile_cols.bit_length())
                            if 1 << i < tile_cols]
    return min(widths, key=busiest)


def row_fits(wl: Workload, target: Target) -> bool:
    """Whether one whole row fits the vector memory double-buffered (in place or not).
    Only then does a chain that uses its reductions on whole rows keep them whole: its
    multi-pass chunkings (which re-read the row once per pass) join the space when rows
    are longer."""
    ub = target.role("vector")
    return any(footprint(analyze(wl, inplace=inplace), 1, analyze(wl).cols, 2, ub.alignment)
               <= ub.capacity for inplace in (False, True))


def complete(wl: Workload, s: Schedule) -> Schedule:
    """``s`` with ``inplace`` (neutral: False) and ``split_at`` (0) filled in when
    missing."""
    missing = {k: v for k, v in {"inplace": False, **fusion.neutral(wl)}.items()
               if k not in s}
    return s.replace(**missing) if missing else s


def units(chain: Chain, tile_rows: int, tile_cols: int) -> int:
    """Work units the cores share: row blocks times column chunks, or row blocks alone
    when the chain reduces (a core walks all chunks of its rows)."""
    blocks = math.ceil(chain.rows / tile_rows)
    reduces = any(v.phase == "row" for v in chain.values)
    return blocks if reduces else blocks * math.ceil(chain.cols / tile_cols)


def num_tiles(wl: Workload, s: Any) -> int:
    """Work units the cores share (``units``)."""
    return units(analyze(wl), s["tile_rows"], s["tile_cols"])


def memory_uses(wl: Workload, target: Target) -> list[RoleUse]:
    """UB: every value of the chain (``inplace`` decides which share a buffer); a chain
    split in two passes needs the larger pass's buffers (the passes reuse UB)."""
    from pypto.ir.split import split_workload

    align = target.role("vector").alignment
    parts = {0: (wl,)} | {n: (split_workload(wl, n).head, split_workload(wl, n).tail)
                          for n in fusion.split_points(wl)}
    chains = {(n, inplace): [analyze(p, inplace=inplace) for p in ps]
              for n, ps in parts.items() for inplace in (False, True)}

    known: dict[tuple, int] = {}  # the tuner's neighbour walks ask for the same points often

    def nbytes(k: Any) -> int:
        point = (k.get("split_at", 0), k["inplace"], k["tile_rows"], k["tile_cols"], k["depth"])
        if point not in known:
            known[point] = max(footprint(c, *point[2:], align) for c in chains[point[:2]])
        return known[point]

    def what(k: Any) -> str:
        split = f" (the larger pass of split_at={k['split_at']})" if k.get("split_at") else ""
        return f"tile_rows={k['tile_rows']} x tile_cols={k['tile_cols']} x " \
               f"depth={k['depth']}{split}"

    return [RoleUse("vector", ("split_at", "inplace", "depth", "tile_cols", "tile_rows"),
                    nbytes, what)]


def footprints(wl: Workload, s: Any, target: Target) -> dict[str, int]:
    """Bytes per memory role under ``s``."""
    return role_footprints(memory_uses(wl, target), s)


def tile_widths(wl: Workload, target: Target) -> set[int]:
    """The ``tile_cols`` a chain takes: its whole row, and power-of-two chunks of it when
    the chain has no whole-row reduction or a whole row does not fit UB."""
    chain = analyze(wl)
    cols = {chain.cols}
    if not chain.needs_full_rows or not row_fits(wl, target):
        cols |= {1 << i for i in range(MIN_CHUNK.bit_length() - 1, chain.cols.bit_length())
                 if 1 << i < chain.cols}
    return cols


def build_space(wl: Workload, target: Target) -> Space:
    """The vector schedule space: tile shape, buffers, cores, in-place."""
    chain = analyze(wl)
    rows = tuple(sorted({1 << i for i in range(chain.rows.bit_length())
                         if 1 << i <= MAX_TILE_ROWS}
                        | ({chain.rows} if chain.rows <= MAX_TILE_ROWS else set())))
    cols = tile_widths(wl, target)
    axes = [
        *fusion.axes(wl, target),
        Axis("inplace", (False, True), "elementwise ops overwrite their operand's buffer"),
        Axis("depth", tuple(range(1, MAX_DEPTH + 1)), "UB slots per value (2: ping-pong)"),
        Axis("tile_cols", tuple(sorted(cols)), "columns per tile (the row length, or "
                                               "chunks of a split row: a reduction used "
                                               "on whole rows then takes several passes)"),
        Axis("tile_rows", rows, "rows per tile"),
        Axis("cores", core_choices(target.vector_cores), "vector cores sharing the tiles"),
    ]

    def core_count(k: dict[str, Any]) -> list[str]:
        tiles = units(chain, k["tile_rows"], k["tile_cols"])
        return [] if k["cores"] <= tiles else [
            f"cores={k['cores']} exceeds the {tiles} tiles"]

    constraints = memory_constraints(target, memory_uses(wl, target), [a.name for a in axes])
    constraints.append(Constraint(("tile_cols", "tile_rows", "cores"), core_count))
    if any(axis.name == "split_at" and len(axis.choices) > 1 for axis in axes):
        constraints.append(_pass_chunks(wl, target))
    return Space(wl, target, axes, constraints, lambda: default(wl, target))


def _pass_chunks(wl: Workload, target: Target) -> Constraint:
    """With the chain split in two passes, each pass takes the schedule's ``tile_cols``:
    it must be one its own space offers (a pass whose whole rows fit keeps them whole)."""
    from pypto.ir.split import split_workload

    widths = {}
    for n in fusion.split_points(wl):
        parts = split_workload(wl, n)
        widths[n] = tile_widths(parts.head, target) & tile_widths(parts.tail, target)

    def check(k: Any) -> list[str]:
        n = k["split_at"]
        if n == 0 or k["tile_cols"] in widths[n]:
            return []
        return [f"tile_cols={k['tile_cols']} is not a width both passes of split_at={n} "
                f"take (they take {sorted(widths[n])})"]

    return Constraint(("split_at", "tile_cols"), check)
