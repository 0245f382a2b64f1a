"""Cost-model features of candidate schedules, computed without simulating.

``featurize(workload, schedules, target)`` returns one row per schedule, the columns
named by ``feature_names(family)``: a fixed list per op family, so a model trained on
one workload applies to another of its family. Each family contributes its features
through ``FAMILY_FEATURES`` (keyed like ``pypto.schedule_space.registry.FAMILIES``):

- the knob values (strings and bools as their choice index);
- tile bytes and fill ratios per memory role, counted with buffer depth;
- trip counts: blocks (work units), K chunks, MMADs or vector instructions per block;
- bytes per memory path (GM reads and writes, L1 to L0A/L0B, the accumulator drain),
  the GM traffic's reuse over the compulsory bytes, and arithmetic intensity;
- waves of blocks over the cores and the tail efficiency of the last wave;
- per-pipe analytic busy cycles (MTE2, MTE1, CUBE, FIX, VEC, MTE3) from the target's
  path rates, latencies and cube and vector rates, their max and sum, and an analytic
  estimate of the kernel's cycles (``est_cycles``) with ``prior`` = roofline bound /
  estimate, which ranks schedules on its own when a model has no data yet.

Everything is NumPy over columns of knob values, so thousands of candidates cost
milliseconds; every feature is finite (sizes are positive, ratios guarded).

Example:
    >>> import pypto
    >>> from pypto.cost_model.features import featurize, feature_names
    >>> c = pypto.kernel(pypto.matmul).lower(pypto.spec((256, 256), "float16"),
    ...                                      pypto.spec((256, 256), "float16"))
    >>> x = featurize(c.workloads[0], c.schedules, c.target)
    >>> x.shape == (1, len(feature_names("matmul")))
    True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from pypto.cost_model import movement_features
from pypto.errors import PyptoError
from pypto.ir.dtypes import BY_NAME

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.schedule_space.space import Space
    from pypto.targets import Target

#: Bump when a feature's definition or the column lists change: models trained on other
#: features are refused (``CostModelError``), not silently misread.
FEATURE_VERSION = "features-2"

Columns = dict[str, np.ndarray]

# -- shared parts ----------------------------------------------------------------------

PIPES = ("mte2", "mte1", "cube", "fix", "vec", "mte3")
COMMON = ("log_bound", "log_flops", "log_compulsory_bytes", "blocks", "log_blocks", "waves",
          "core_load", "tail_efficiency", "chip_utilization", "core_share", "pad_efficiency",
          "gm_read_bytes", "gm_write_bytes", "gm_reuse", "arith_intensity",
          *(f"busy_{p}" for p in PIPES), "busy_max", "busy_sum", "busy_balance",
          "bottleneck", "est_cycles", "log_est_cycles", "prior",
          # scale-free forms, so that one model ranks workloads of any size: busy cycles
          # over the roofline bound, each pipe's share of the busiest, and ratios to the
          # workload's default schedule (a fixed reference point of every workload)
          *(f"rel_busy_{p}" for p in PIPES), "rel_busy_max",
          *(f"pipe_share_{p}" for p in PIPES),
          "est_vs_default", "busy_max_vs_default", "gm_vs_default", "waves_vs_default")
REFERENCE = ("est_cycles", "busy_max", "gm_bytes", "waves")


@dataclass(frozen=True)
class FamilyFeatures:
    """One family's features: ``knobs`` (the axes it reads, in order), ``derived`` (its
    own columns) and ``compute(workload, knob columns, target) -> columns`` producing
    ``derived`` plus the per-block pipe busy cycles ``block_<pipe>`` and ``blocks``,
    ``cores``, ``depth``, ``pad_efficiency``, ``gm_read_bytes``, ``gm_write_bytes``;
    optionally ``core_load`` (blocks on the busiest core; default: whole waves),
    ``block_latency`` (a block's load latency, to be covered by ``depth`` blocks in
    flight) and ``launches`` (kernel launches; default 1)."""

    name: str
    knobs: tuple[str, ...]
    derived: tuple[str, ...]
    compute: Callable[[Workload, Columns, Target], Columns]

    @property
    def names(self) -> tuple[str, ...]:
        return (*(f"knob_{k}" for k in self.knobs), *self.derived, *COMMON)


def _isz(dtype: str) -> int:
    return BY_NAME[dtype].itemsize


def _ceil(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
    return np.ceil(np.asarray(a, dtype=np.float64) / b)


def _path(target: Target, src_role: str, dst_role: str) -> tuple[float, float, float]:
    """(bytes per cycle, latency, min burst) of a role-to-role path; a path the target
    lacks costs like the GM read (features stay defined on every target)."""
    src, dst = target.roles.get(src_role), target.roles.get(dst_role)
    if src is not None and dst is not None and target.has_path(src, dst):
        p = target.path(src, dst)
        return p.bytes_per_cycle, float(p.latency), float(p.min_burst)
    g = target.roles["global"]
    for (s, _d), p in target.paths.items():
        if s == g:
            return p.bytes_per_cycle, float(p.latency), float(p.min_burst)
    return 32.0, 1000.0, 512.0


def _capacity(target: Target, role: str) -> float:
    return float(target.role(role).capacity) if role in target.roles else 1.0


def _op_cost(target: Target, op: str) -> float:
    from pypto.sim.roofline import _VECTOR_COST

    try:
        return target.vector_op_cost(_VECTOR_COST.get(op, op))
    except PyptoError:
        return 1.0


#: grids of more blocks than this are loaded by an estimate instead of counted
EXACT_BLOCKS = 8192


def _core_load(cores: np.ndarray, batch: float, outer: np.ndarray, inner: np.ndarray,
               f_outer: np.ndarray, f_inner: np.ndarray, swizzle: np.ndarray,
               split: np.ndarray) -> np.ndarray:
    """Block-units of work on the busiest core when blocks go to ``cores`` round robin in
    the codegen's order (``pypto.codegen.pipeline.block_order``: per batch, groups of
    ``swizzle`` outer rows, inner fastest within a group, ``split`` K parts innermost).
    The last outer row is ``f_outer`` of a block, the last inner column ``f_inner``: 25
    blocks on 24 cores whose last block is half a block load the busiest core with 1.5
    blocks, not 2 (what ``waves`` alone would charge), and when the cores are a multiple
    of the inner count, the partial column always lands on the same cores.

    Per distinct grid, each core's count of blocks, of last-row, last-column and corner
    blocks is counted once (cached); a core's load is bilinear in the two fractions."""
    shape = np.stack([np.broadcast_to(np.asarray(v, dtype=np.float64), f_outer.shape)
                      for v in (cores, outer, inner, np.minimum(swizzle, outer), split)],
                     axis=1)
    uniq, inverse = np.unique(shape, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    load = np.empty(len(f_outer))
    for u, grid in enumerate(uniq):
        rows = np.flatnonzero(inverse == u)
        counts = _grid_counts(int(batch), *(int(v) for v in grid))
        if counts is None:
            load[rows] = _estimated_load(batch, *grid, f_outer[rows], f_inner[rows])
            continue
        n, a, b, ab = counts
        lo, li = 1.0 - f_outer[rows, None], 1.0 - f_inner[rows, None]
        load[rows] = np.max(n - lo * a - li * b + lo * li * ab, axis=1)
    return load


@functools.lru_cache(maxsize=4096)
def _grid_counts(batch: int, cores: int, outer: int, inner: int, swizzle: int,
                 split: int) -> tuple[np.ndarray, ...] | None:
    """Per core: blocks, last-row blocks, last-column blocks and corner blocks (None for
    grids over ``EXACT_BLOCKS``)."""
    total = batch * outer * inner * split
    if total > EXACT_BLOCKS:
        return None
    g = np.arange(total)
    rem = g // split % (outer * inner)
    start = rem // (swizzle * inner) * swizzle
    width = np.minimum(swizzle, outer - start)
    off = rem - start * inner
    last_o = (start + off % width) == outer - 1
    last_i = (off // width) == inner - 1
    core = g % cores
    return tuple(np.bincount(core, weights=w, minlength=cores) for w in (
        np.ones(total), last_o, last_i, last_o & last_i))


def _estimated_load(batch: float, cores: float, outer: float, inner: float, swizzle: float,
                    split: float, f_outer: np.ndarray, f_inner: np.ndarray) -> np.ndarray:
    """A large grid's busiest core: its share of whole waves at the average block, plus
    a whole block for the last wave (many waves: the tail is a small part)."""
    blocks = batch * outer * inner * split
    waves = math.ceil(blocks / cores)
    mean = (outer - 1 + f_outer) * (inner - 1 + f_inner) / (outer * inner)
    return (waves - 1) * mean + 1.0


def _burst(run_bytes: np.ndarray, min_burst: float) -> np.ndarray:
    """Bandwidth kept by DMA runs of ``run_bytes`` (shorter than the burst cost a burst)."""
    return np.minimum(1.0, np.maximum(run_bytes, 1.0) / max(min_burst, 1.0))


# -- cube families (matmul, conv2d as implicit GEMM) -----------------------------------

CUBE_DERIVED = ("m0", "n0", "l1_bytes", "l1_fill", "l0a_bytes", "l0a_fill", "l0b_bytes",
                "l0b_fill", "l0c_bytes", "l0c_fill", "ub_bytes", "ub_fill", "k_chunks",
                "k_steps", "mmads_per_block", "mmad_fractals", "l1_l0a_bytes",
                "l1_l0b_bytes", "drain_bytes", "a_run_bytes", "a_burst", "b_burst",
                "wave_working_set_l2", "l2_fit", "min_depth", "serial_share")


def _cube(target: Target, dtype: str, *, batch: float, m: float, n: float, k: float,
          c: Columns, pixels: np.ndarray, a_run: np.ndarray, a_dmas: np.ndarray,
          b_run: np.ndarray, epilogue_ops: Sequence[str], out_dtype: str) -> Columns:
    """Features of an implicit or explicit GEMM ``[m, k] x [k, n]`` (times ``batch``)
    with blocks of ``pixels`` rows (``m1`` rows of the accumulator)."""
    isz, out_isz, acc_isz = _isz(dtype), _isz(out_dtype), 4
    fm, fk, fn = target.fractal(dtype)
    passes = target.fractal_passes(dtype)
    m1, n1, k1, k0 = c["m1"], c["n1"], c["k1"], c["k0"]
    mp, np_ = c.get("m0_parts", np.ones_like(m1)), c.get("n0_parts", np.ones_like(m1))
    split = c.get("split_k", np.ones_like(m1))
    n_first = c.get("l0_order", np.zeros_like(m1)) == 0
    m0, n0 = m1 / mp, n1 / np_
    l1d, l0d, l0cd, ubd = c["l1_depth"], c["l0_depth"], c["l0c_depth"], c["ub_depth"]
    vec_epilogue = (len(epilogue_ops) > 0) & (c.get("epilogue", np.zeros_like(m1)) == 0)

    mb, nb = _ceil(m, pixels), _ceil(n, n1)
    chunks = _ceil(k, k1)
    part_chunks = _ceil(chunks, split)
    kp = np.minimum(k, part_chunks * k1)            # K extent one block reduces
    k_steps = _ceil(kp, k0)
    blocks = batch * mb * nb * split
    pad = (m / (mb * pixels)) * (pixels / m1) * (n / (nb * n1)) * (k / (chunks * k1))

    l1 = l1d * (m1 * k1 + k1 * n1) * isz
    l0a, l0b = l0d * m0 * k0 * isz, l0d * k0 * n0 * isz
    l0c = l0cd * m1 * n1 * acc_isz
    ub = np.where(vec_epilogue, ubd * m1 * n1 * (isz + 4) * max(1, len(epilogue_ops)), 0.0)
    ub = ub + np.where(split > 1, 16384.0, 0.0)

    gm_a, gm_b = pixels * kp * isz, kp * n1 * isz
    l0a_bytes = kp * m1 * isz * np.where(n_first, 1.0, np_)
    l0b_bytes = kp * n1 * isz * np.where(n_first, mp, 1.0)
    l0_loads = k_steps * np.where(n_first, mp + mp * np_, np_ + mp * np_)
    mmads = k_steps * mp * np_
    fractals = _ceil(m0, fm) * _ceil(k0, fk) * _ceil(n0, fn) * passes
    drain = m1 * n1 * acc_isz
    out_bytes = pixels * n1 * out_isz

    gm_rate, gm_lat, gm_burst = _path(target, "global", "stage")
    a_rate, a_lat, _ = _path(target, "stage", "left")
    b_rate, b_lat, _ = _path(target, "stage", "right")
    drain_dst = "vector" if len(epilogue_ops) else "global"
    d_rate, d_lat, _ = _path(target, "acc", drain_dst)
    acc, glob = target.roles.get("acc"), target.roles["global"]
    row_cycles = (target.path(acc, target.roles.get(drain_dst, glob)).row_cycles
                  if acc and target.has_path(acc, target.roles.get(drain_dst, glob)) else 0.0)
    o_rate, o_lat, _ = _path(target, "vector", "global")
    a_burst, b_burst = _burst(a_run, gm_burst), _burst(b_run, gm_burst)
    vec_cost = sum(_op_cost(target, op) for op in epilogue_ops)
    vrate = target.vector_bytes_per_cycle

    block = {
        "mte2": gm_a / (gm_rate * a_burst) + gm_b / (gm_rate * b_burst)
        + gm_lat * part_chunks * 0.1 + a_dmas * part_chunks * 2.0,
        "mte1": l0a_bytes / a_rate + l0b_bytes / b_rate + l0_loads * max(a_lat, b_lat),
        "cube": mmads * (fractals + target.cube_issue_overhead),
        "fix": drain / d_rate + d_lat + row_cycles * m1,
        "vec": np.where(vec_epilogue, m1 * n1 * 4 * vec_cost / vrate
                        + target.vector_issue_overhead * len(epilogue_ops) * mp, 0.0),
        "mte3": np.where(vec_epilogue, out_bytes / o_rate + o_lat, 0.0),
    }
    cores = c["cores"]
    f_m, f_n = (m - (mb - 1) * pixels) / pixels, (n - (nb - 1) * n1) / n1
    mn = c.get("block_order", np.zeros_like(m1)) == 0
    load = _core_load(np.maximum(cores, 1.0), batch, np.where(mn, mb, nb),
                      np.where(mn, nb, mb), np.where(mn, f_m, f_n), np.where(mn, f_n, f_m),
                      c.get("swizzle", np.ones_like(m1)), split)
    # a wave's distinct A rows and B columns (swizzle groups block rows), against L2
    sw = c.get("swizzle", np.ones_like(m1))
    rows_per_wave = np.minimum(mb, np.maximum(sw, cores / np.maximum(nb, 1)))
    cols_per_wave = np.minimum(nb, np.maximum(1.0, cores / rows_per_wave))
    wave_set = rows_per_wave * pixels * kp * isz + cols_per_wave * n1 * kp * isz
    min_depth = np.minimum(np.minimum(l1d, l0d), l0cd)
    return {
        "m0": m0, "n0": n0, "l1_bytes": l1, "l1_fill": l1 / _capacity(target, "stage"),
        "l0a_bytes": l0a, "l0a_fill": l0a / _capacity(target, "left"),
        "l0b_bytes": l0b, "l0b_fill": l0b / _capacity(target, "right"),
        "l0c_bytes": l0c, "l0c_fill": l0c / _capacity(target, "acc"),
        "ub_bytes": ub, "ub_fill": ub / _capacity(target, "vector"),
        "k_chunks": part_chunks, "k_steps": k_steps, "mmads_per_block": mmads,
        "mmad_fractals": fractals, "l1_l0a_bytes": l0a_bytes * blocks,
        "l1_l0b_bytes": l0b_bytes * blocks, "drain_bytes": drain * blocks,
        "a_run_bytes": a_run, "a_burst": a_burst, "b_burst": b_burst,
        "wave_working_set_l2": wave_set / target.l2_bytes,
        "l2_fit": (wave_set <= target.l2_bytes).astype(np.float64),
        "min_depth": min_depth, "serial_share": 1.0 / min_depth,
        "blocks": blocks, "cores": cores, "core_load": load, "depth": min_depth,
        "pad_efficiency": pad, "gm_read_bytes": blocks * (gm_a + gm_b),
        "gm_write_bytes": blocks * out_bytes * np.where(split > 1, 2.0, 1.0),
        **{f"block_{p}": v for p, v in block.items()},
    }


def _matmul(wl: Workload, c: Columns, target: Target) -> Columns:
    from pypto.schedule_space.matmul import shape_of

    sh = shape_of(wl)
    isz = _isz(sh.dtype)
    tail = [n.op for n in wl.nodes if n.op not in ("load", "matmul")]
    # A's rows are k1 long in GM (m1 long when A is transposed); NZ tiles are whole bursts
    a_run = np.where(c.get("a_layout", 0) == 1, 512.0,
                     (c["m1"] if sh.transpose_a else c["k1"]) * isz)
    b_run = np.where(c.get("b_layout", 0) == 1, 512.0,
                     (c["k1"] if sh.transpose_b else c["n1"]) * isz)
    a_dmas = np.where(c.get("a_layout", 0) == 1, 1.0, c["m1"] / 16.0)
    out = _cube(target, sh.dtype, batch=float(math.prod(sh.batch)), m=sh.m, n=sh.n, k=sh.k,
                c=c, pixels=c["m1"], a_run=a_run, a_dmas=a_dmas, b_run=b_run,
                epilogue_ops=tail, out_dtype=wl.nodes[wl.outputs[0]].dtype)
    return out


def _conv2d(wl: Workload, c: Columns, target: Target) -> Columns:
    from pypto.schedule_space.conv2d import CONV_OPS, shape_of

    sh = shape_of(wl)
    isz = _isz(sh.dtype)
    tail = [n.op for n in wl.nodes if n.op not in ("load", *CONV_OPS)]
    rb = c["row_block"]
    pixels = np.where(rb > 0, rb * sh.ow, c["m1"])
    rows = np.where(rb > 0, rb, _ceil(c["m1"], sh.ow) + 1)
    taps = np.maximum(1.0, c["k1"] / sh.c)           # taps one L1 load of A covers
    chan = np.minimum(c["k1"], sh.c)                 # channels of one tap per run
    filter_row = c.get("im2col", np.zeros_like(rb)) == 1
    if sh.stride[1] == 1:   # a row of pixels of one tap is one run when channels are whole
        tap_run = np.where(chan >= sh.c, np.minimum(pixels, sh.ow) * sh.c, chan)
        tap_dmas = np.where(chan >= sh.c, rows * taps, pixels * taps)
    else:
        tap_run, tap_dmas = chan, pixels * taps
    row_run = np.minimum(c["k1"], sh.s * sh.c)
    a_run = np.where(filter_row, row_run, tap_run) * isz
    a_dmas = np.where(filter_row, pixels * np.maximum(1.0, c["k1"] / (sh.s * sh.c)), tap_dmas)
    out = _cube(target, sh.dtype, batch=float(sh.groups), m=sh.m, n=sh.k, k=sh.red, c=c,
                pixels=pixels, a_run=a_run, a_dmas=a_dmas, b_run=c["n1"] * isz,
                epilogue_ops=tail, out_dtype=wl.nodes[wl.outputs[0]].dtype)
    out["im2col_dmas"] = a_dmas
    out["row_pixels_share"] = pixels / c["m1"]
    return out


# -- vector ------------------------------------------------------------------------------

VECTOR_DERIVED = ("tiles_r", "tiles_c", "tile_elems", "ub_bytes", "ub_fill", "chunked",
                  "crossing_bytes", "load_run_bytes", "load_burst", "vec_instructions", "row_share")


def _vector(wl: Workload, c: Columns, target: Target) -> Columns:
    from pypto.ir.split import crossing
    from pypto.schedule_space.chain import analyze, footprint

    chain = analyze(wl)
    tr, tc, depth, cores = c["tile_rows"], c["tile_cols"], c["depth"], c["cores"]
    inplace = c["inplace"]
    align = target.role("vector").alignment
    ub = np.zeros_like(tr)
    combos = np.stack([inplace, depth, tc, tr], axis=1)
    uniq, inverse = np.unique(combos, axis=0, return_inverse=True)
    chains = {False: chain, True: analyze(wl, inplace=True)}
    sizes = np.array([footprint(chains[bool(u[0])], int(u[3]), int(u[2]), int(u[1]), align)
                      for u in uniq], dtype=np.float64)
    ub = sizes[inverse.reshape(-1)]
    tiles_r, tiles_c = _ceil(chain.rows, tr), _ceil(chain.cols, tc)
    blocks = tiles_r * tiles_c
    elems = tr * tc
    loads = [v for v in chain.values if wl.nodes[v.node].op == "load"]
    in_bytes = sum(_isz(v.dtype) * (1 if v.row_bcast else 1) for v in loads) * elems
    out_isz = sum(_isz(wl.nodes[o].dtype) for o in wl.outputs)
    ops = [wl.nodes[v.node] for v in chain.values if wl.nodes[v.node].op != "load"]
    col_ops = [n for n, v in zip(ops, [v for v in chain.values
                                       if wl.nodes[v.node].op != "load"]) if v.phase == "col"]
    row_ops = [n for n in ops if n not in col_ops]
    col_work = sum(max(_isz(n.dtype), 2) * _op_cost(target, n.op) for n in col_ops)
    row_work = sum(4 * _op_cost(target, n.op) for n in row_ops)
    g_rate, g_lat, g_burst = _path(target, "global", "vector")
    o_rate, o_lat, _ = _path(target, "vector", "global")
    run = tc * 2.0
    burst = np.where(tc < chain.cols, _burst(run, g_burst), 1.0)
    vrate = target.vector_bytes_per_cycle
    instructions = len(ops) * np.where(tc < chain.cols, 2.0, 1.0)
    chunked = (tc < chain.cols).astype(np.float64)
    # split_at > 0: two passes, the head's values the tail reads go through GM between
    split = c.get("split_at", np.zeros_like(tr))
    two = (split > 0).astype(np.float64)
    cross = np.zeros_like(tr)
    for n in np.unique(split[split > 0]):
        cross[split == n] = sum(_isz(wl.nodes[i].dtype) for i in crossing(wl, int(n)))
    block = {
        "mte2": (in_bytes + cross * elems) / (g_rate * burst) + g_lat * len(loads) * 0.1,
        "mte1": np.zeros_like(tr), "cube": np.zeros_like(tr), "fix": np.zeros_like(tr),
        "vec": elems * col_work / vrate + tr * row_work / vrate
        + instructions * target.vector_issue_overhead * (1.0 + two),
        "mte3": elems * (out_isz + cross) / o_rate + o_lat * (1.0 + two),
    }
    pad = (chain.rows / (tiles_r * tr)) * (chain.cols / (tiles_c * tc))
    return {
        "tiles_r": tiles_r, "tiles_c": tiles_c, "tile_elems": elems, "ub_bytes": ub,
        "ub_fill": ub / _capacity(target, "vector"), "chunked": chunked,
        "load_run_bytes": run, "load_burst": burst, "vec_instructions": instructions,
        "row_share": tr / chain.rows,
        "blocks": blocks, "cores": cores, "depth": depth, "pad_efficiency": pad,
        "block_latency": g_lat * (1.0 + two), "launches": 1.0 + two,
        "crossing_bytes": cross, "gm_read_bytes": blocks * (in_bytes + cross * elems),
        "gm_write_bytes": blocks * elems * (out_isz + cross),
        **{f"block_{p}": v for p, v in block.items()},
    }


MATMUL_KNOBS = ("m1", "n1", "k1", "k0", "m0_parts", "n0_parts", "l1_depth", "l0_depth",
                "l0c_depth", "ub_depth", "split_k", "cores", "swizzle", "block_order",
                "l0_order", "epilogue", "a_layout", "b_layout")
CONV_KNOBS = ("row_block", "m1", "n1", "k1", "k0", "l1_depth", "l0_depth", "l0c_depth",
              "ub_depth", "cores", "block_order", "im2col")
VECTOR_KNOBS = ("tile_rows", "tile_cols", "depth", "cores", "inplace", "split_at")

FAMILY_FEATURES: Mapping[str, FamilyFeatures] = MappingProxyType({f.name: f for f in (
    FamilyFeatures("matmul", MATMUL_KNOBS, CUBE_DERIVED, _matmul),
    FamilyFeatures("conv2d", CONV_KNOBS, (*CUBE_DERIVED, "im2col_dmas", "row_pixels_share"),
                   _conv2d),
    FamilyFeatures("vector", VECTOR_KNOBS, VECTOR_DERIVED, _vector),
    FamilyFeatures("movement", movement_features.KNOBS, movement_features.DERIVED,
                   movement_features.compute),
)})


# -- the entry points ----------------------------------------------------------------------


def features_of(family: str) -> FamilyFeatures:
    """The feature record of op family ``family``."""
    try:
        return FAMILY_FEATURES[family]
    except KeyError:
        raise PyptoError(f"the cost model has no features for op family {family!r}; it "
                         f"knows {', '.join(FAMILY_FEATURES)}") from None


def feature_names(family: str) -> tuple[str, ...]:
    """The column names of ``featurize`` for ``family`` (stable within a version)."""
    return features_of(family).names


def knob_columns(space: Space, schedules: Sequence[Mapping[str, Any]]) -> Columns:
    """The schedules' knob values as float columns (strings and bools: choice index)."""
    out: Columns = {}
    for name, axis in space.axes.items():
        values = [s[name] for s in schedules]
        if all(isinstance(c, int) and not isinstance(c, bool) for c in axis.choices):
            out[name] = np.asarray(values, dtype=np.float64)
        else:
            codes = {(type(c), c): float(i) for i, c in enumerate(axis.choices)}
            out[name] = np.array([codes.get((type(v), v), -1.0) for v in values],
                                 dtype=np.float64)
    return out


def featurize(wl: Workload, schedules: Sequence[Mapping[str, Any]], target: Target,
              space: Space | None = None) -> np.ndarray:
    """Features of ``schedules`` (valid points of ``wl``'s space) on ``target``: an array
    of shape ``(len(schedules), len(feature_names(wl.family)))``, float64, finite."""
    from pypto.schedule_space import space_for

    space = space or space_for(wl, target)
    return featurize_columns(wl, knob_columns(space, schedules), target)


def featurize_columns(wl: Workload, knobs: Columns, target: Target) -> np.ndarray:
    """``featurize`` over knob columns (as ``knob_columns`` makes them)."""
    fam = features_of(wl.family)
    columns = _columns(wl, knobs, target)
    ref = _reference(wl, target)
    for name in REFERENCE:
        short = {"est_cycles": "est", "gm_bytes": "gm"}.get(name, name)
        columns[f"{short}_vs_default"] = (
            columns[name] / max(ref[name], 1e-9))
    n = len(columns["est_cycles"])
    out = np.empty((n, len(fam.names)), dtype=np.float64)
    for j, name in enumerate(fam.names):
        out[:, j] = columns[name]
    np.nan_to_num(out, copy=False, nan=0.0, posinf=1e30, neginf=-1e30)
    return out


def _reference(wl: Workload, target: Target) -> dict[str, float]:
    """The reference columns of ``wl``'s default schedule (cached per workload)."""
    key = (wl.key, target.key)
    hit = _REFERENCE_CACHE.get(key)
    if hit is None:
        from pypto.schedule_space import space_for

        space = space_for(wl, target)
        cols = _columns(wl, knob_columns(space, [space.default()]), target)
        hit = {name: float(cols[name][0]) for name in REFERENCE}
        if len(_REFERENCE_CACHE) > 1024:
            _REFERENCE_CACHE.clear()
        _REFERENCE_CACHE[key] = hit
    return hit


_REFERENCE_CACHE: dict[tuple[str, str], dict[str, float]] = {}


def _columns(wl: Workload, knobs: Columns, target: Target) -> Columns:
    from pypto.sim.roofline import workload_bound

    fam = features_of(wl.family)
    n = len(next(iter(knobs.values()))) if knobs else 0
    c = {k: np.asarray(v, dtype=np.float64) for k, v in knobs.items()}
    for k in fam.knobs:  # a knob this space lacks (no epilogue axis...) reads as 0
        c.setdefault(k, np.zeros(n))
    d = fam.compute(wl, c, target)
    bound = float(workload_bound(wl, target))
    flops, compulsory = _work(wl)
    blocks, cores = d["blocks"], np.maximum(d["cores"], 1.0)
    waves = _ceil(blocks, cores)
    all_cores = target.cube_cores if wl.family in ("matmul", "conv2d") else target.vector_cores
    load = d.get("core_load", waves)   # blocks on the busiest core, tail blocks partial
    busy = {p: load * d[f"block_{p}"] for p in PIPES}
    stack = np.stack([busy[p] for p in PIPES], axis=1)
    busy_max, busy_sum = stack.max(axis=1), stack.sum(axis=1)
    # pipes overlap as far as buffering lets them: single buffering serializes part
    overlap = busy_max + (busy_sum - busy_max) / np.maximum(d["depth"], 1.0) * 0.5
    if "block_latency" in d:
        # a block's round trip (its load's latency, then every pipe's work on it) is
        # covered by the blocks in flight: with GM latencies of ~1,400 cycles, small
        # vector tiles at depth 2 wait on their loads, at depth 4 on the vector unit
        trip = load * d["block_latency"] + busy_sum
        overlap = np.maximum(overlap, trip / np.maximum(d["depth"], 1.0))
    memory = (d["gm_read_bytes"] + d["gm_write_bytes"]) / target.gm_bytes_per_cycle_chip
    est = (target.launch_overhead_cycles * d.get("launches", 1.0)
           + np.maximum(overlap, memory * 0.25))
    gm_bytes = d["gm_read_bytes"] + d["gm_write_bytes"]
    common = {
        "log_bound": np.full(n, math.log2(max(bound, 1.0))),
        "log_flops": np.full(n, math.log2(max(flops, 1.0))),
        "log_compulsory_bytes": np.full(n, math.log2(max(compulsory, 1.0))),
        "blocks": blocks, "log_blocks": np.log2(np.maximum(blocks, 1.0)), "waves": waves,
        "core_load": load, "tail_efficiency": blocks / (waves * cores),
        "chip_utilization": blocks / (waves * all_cores),
        "core_share": cores / all_cores, "pad_efficiency": d["pad_efficiency"],
        "gm_read_bytes": d["gm_read_bytes"], "gm_write_bytes": d["gm_write_bytes"],
        "gm_reuse": gm_bytes / max(compulsory, 1.0),
        "arith_intensity": flops / np.maximum(gm_bytes, 1.0),
        **{f"busy_{p}": busy[p] for p in PIPES},
        "busy_max": busy_max, "busy_sum": busy_sum,
        "busy_balance": busy_max / np.maximum(busy_sum, 1.0),
        "bottleneck": stack.argmax(axis=1).astype(np.float64),
        "est_cycles": est, "log_est_cycles": np.log2(np.maximum(est, 1.0)),
        "prior": bound / np.maximum(est, 1.0),
        **{f"rel_busy_{p}": busy[p] / bound for p in PIPES},
        "rel_busy_max": busy_max / bound,
        **{f"pipe_share_{p}": busy[p] / np.maximum(busy_max, 1.0) for p in PIPES},
        "gm_bytes": gm_bytes,
    }
    return {**{f"knob_{k}": c[k] for k in fam.knobs}, **d, **common}


def _work(wl: Workload) -> tuple[float, float]:
    """(flops, compulsory GM bytes) of ``wl``: each input read once, each output once."""
    flops = 0.0
    nbytes = 0.0
    for node in wl.nodes:
        if node.op == "load":
            nbytes += math.prod(d for d, s in zip(node.shape, node.attr("strides") or ())
                                if s != 0) * _isz(node.dtype)
        elif node.op == "matmul":
            a = wl.nodes[node.args[0]]
            k = a.shape[-2] if node.attr("transpose_a") else a.shape[-1]
            flops += 2.0 * math.prod(node.shape) * k
        elif node.op in ("conv2d_nhwc", "conv2d_nchw"):
            x = wl.nodes[node.args[0]]
            r, s = node.attr("kernel")
            channels = x.shape[1] if node.op == "conv2d_nchw" else x.shape[-1]
            flops += 2.0 * math.prod(node.shape) * r * s * channels / node.attr("groups", 1)
        else:
            flops += float(math.prod(node.shape))
    for o in wl.outputs:
        nbytes += math.prod(wl.nodes[o].shape) * _isz(wl.nodes[o].dtype)
    return flops, nbytes
