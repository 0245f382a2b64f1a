"""Cost-model features of data movement workloads (``concatenate``, ``pad``), the
``movement`` record of ``pypto.cost_model.features.FAMILY_FEATURES``: tile bytes and
UB fill, DMA row length and its burst efficiency, tiles (blocks) and the analytic busy
cycles of the two DMA pipes per tile (MTE2 loads the pieces that have a source, MTE3
stores every piece)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from pypto.ir.movement import pieces
from pypto.schedule_space.movement import itemsize, tile_bytes, units

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.targets import Target

Columns = dict[str, np.ndarray]

KNOBS = ("tile_rows", "tile_cols", "depth", "cores")
DERIVED = ("tile_bytes", "ub_fill", "row_bytes", "dma_burst", "fill_share", "pieces")


def _rate(target: Target, src_role: str, dst_role: str) -> tuple[float, float, float]:
    """(bytes per cycle, latency, min burst) of a role-to-role path of ``target``."""
    src, dst = target.roles.get(src_role), target.roles.get(dst_role)
    if src is not None and dst is not None and target.has_path(src, dst):
        p = target.path(src, dst)
        return p.bytes_per_cycle, float(p.latency), float(p.min_burst)
    return 32.0, 1000.0, 512.0


def compute(wl: Workload, c: Columns, target: Target) -> Columns:
    """The ``movement`` columns for knob columns ``c`` (one row per schedule)."""
    ps = pieces(wl)
    isz = itemsize(wl)
    align = target.role("vector").alignment
    capacity = float(target.role("vector").capacity)
    total = sum(p.rows * p.cols for p in ps)
    loaded = sum(p.rows * p.cols for p in ps if p.source is not None)
    g_rate, g_lat, g_burst = _rate(target, "global", "vector")
    o_rate, o_lat, o_burst = _rate(target, "vector", "global")
    n = len(c["tile_rows"])
    cols: dict[str, list[float]] = {k: [] for k in (
        "tile_bytes", "row_bytes", "dma_burst", "blocks", "pad_efficiency")}
    for tr, tc in zip(c["tile_rows"].astype(int), c["tile_cols"].astype(int)):
        blocks = units(wl, int(tr), int(tc))
        row_bytes = min(int(tc), max(p.cols for p in ps)) * isz
        covered = sum(math.ceil(p.rows / tr) * min(int(tr), p.rows)
                      * math.ceil(p.cols / tc) * min(int(tc), p.cols) for p in ps)
        cols["tile_bytes"].append(float(tile_bytes(wl, int(tr), int(tc), align)))
        cols["row_bytes"].append(float(row_bytes))
        cols["dma_burst"].append(min(1.0, row_bytes / max(min(g_burst, o_burst), 1.0)))
        cols["blocks"].append(float(blocks))
        cols["pad_efficiency"].append(total / max(covered, 1))
    out = {k: np.asarray(v, dtype=np.float64) for k, v in cols.items()}
    blocks = np.maximum(out["blocks"], 1.0)
    burst = np.maximum(out["dma_burst"], 1e-3)
    in_bytes, out_bytes = loaded * isz / blocks, total * isz / blocks
    zeros = np.zeros(n)
    return {
        "tile_bytes": out["tile_bytes"],
        "ub_fill": out["tile_bytes"] * c["depth"] / capacity,
        "row_bytes": out["row_bytes"], "dma_burst": out["dma_burst"],
        "fill_share": np.full(n, 1.0 - loaded / max(total, 1)),
        "pieces": np.full(n, float(len(ps))),
        "blocks": out["blocks"], "cores": c["cores"], "depth": c["depth"],
        "pad_efficiency": out["pad_efficiency"],
        "gm_read_bytes": np.full(n, float(loaded * isz)),
        "gm_write_bytes": np.full(n, float(total * isz)),
        "block_mte2": in_bytes / (g_rate * burst) + g_lat * (loaded > 0),
        "block_mte1": zeros, "block_cube": zeros, "block_fix": zeros,
        "block_vec": np.full(n, float(target.vector_issue_overhead)) / blocks,
        "block_mte3": out_bytes / (o_rate * burst) + o_lat,
    }
