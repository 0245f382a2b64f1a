"""The roofline bound: a time no schedule can beat, independent of the schedule.

``max(flops / cube peak, vector work / vector peak, compulsory GM bytes / DRAM
bandwidth)`` over all the cores the target has, plus the launch overhead. Compulsory
bytes count every input element a workload reads once and every output once.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from pypto.codegen.isa import REDUCE, VECTOR, Mem, Op
from pypto.codegen.program import Program
from pypto.ir.dtypes import BY_CODE, BY_NAME
from pypto.ir.workload import Workload
from pypto.targets import Target

_VECTOR_COST = {"copy": "copy", "cast": "cast", "relu": "relu", "exp": "exp", "log": "ln",
                "sqrt": "sqrt", "rsqrt": "rsqrt", "reciprocal": "recip", "gelu": "gelu",
                "sigmoid": "sigmoid", "tanh": "tanh", "abs": "abs", "neg": "neg", "add": "add",
                "sub": "sub", "mul": "mul", "div": "div", "maximum": "max", "minimum": "min",
                "add_scalar": "adds", "mul_scalar": "muls", "max_scalar": "maxs",
                "min_scalar": "mins", "sum": "redsum", "max": "redmax", "min": "redmin",
                "equal": "cmpeq", "not_equal": "cmpne", "less": "cmplt", "less_equal": "cmple",
                "greater": "cmpgt", "greater_equal": "cmpge", "where": "sel"}


def _bound(target: Target, cube_cycles: float, vector_cycles: float, gm_bytes: float) -> int:
    memory = gm_bytes / target.gm_bytes_per_cycle_chip
    return target.launch_overhead_cycles + math.ceil(max(cube_cycles, vector_cycles, memory))


#: Loads of one input whose elements number at most this are unioned exactly; past it
#: the largest load's footprint stands for them (still a lower bound).
UNION_LIMIT = 1 << 24


@functools.lru_cache(maxsize=256)
def compulsory_bytes(wl: Workload) -> tuple[int, int]:
    """``(input bytes, output bytes)`` that any program of ``wl`` must move: each input
    element read once (a broadcast input counts its own elements, not the broadcast
    shape's; elements that several loads of one input share, as the taps of a pooling
    window do, count once; input pixels no conv tap reads, as a stride longer than the
    kernel skips, do not count) and each output element written once."""
    sparse = {n.args[0]: _conv_input_used(wl.nodes[n.args[0]].shape, n)
              for n in wl.nodes if n.op in ("conv2d_nhwc", "conv2d_nchw")}
    by_input: dict[int, list] = {}
    for i, n in enumerate(wl.nodes):
        if n.op == "load":
            by_input.setdefault(n.attr("input"), []).append((i, n))
    reads = 0
    for loads in by_input.values():
        used = _union_elements([n for _, n in loads])
        used = min([used] + [sparse[i] for i, _ in loads if i in sparse])
        reads += used * BY_NAME[loads[0][1].dtype].itemsize
    writes = sum(math.prod(wl.nodes[o].shape) * BY_NAME[wl.nodes[o].dtype].itemsize
                 for o in wl.outputs)
    return reads, writes


def _conv_input_used(shape: tuple[int, ...], conv: Any) -> int:
    """Elements of a conv's NHWC (``conv2d_nchw``: NCHW) input that some tap reads: a
    stride longer than the (dilated) kernel skips whole rows and columns, which no
    program needs to fetch."""
    if conv.op == "conv2d_nchw":
        n, c, h, w = shape
    else:
        n, h, w, c = shape
    r, s = conv.attr("kernel")

    def used(size: int, taps: int, stride: int, pad: int, dilation: int, out: int) -> int:
        return len({o * stride - pad + t * dilation for o in range(out) for t in range(taps)}
                   & set(range(size)))

    oh, ow = conv.shape[2:] if conv.op == "conv2d_nchw" else conv.shape[1:3]
    (sh, sw), (ph, pw), (dh, dw) = conv.attr("stride"), conv.attr("padding"), conv.attr("dilation")
    return n * used(h, r, sh, ph, dh, oh) * used(w, s, sw, pw, dw, ow) * c


def _footprint(load) -> int:  # type: ignore[no-untyped-def]
    return math.prod(d for d, s in zip(load.shape, load.attr("strides")) if s != 0)


def _union_elements(loads: list) -> int:
    """How many distinct input elements ``loads`` (views of one input) read."""
    sizes = [_footprint(ld) for ld in loads]
    if len(loads) == 1:
        return sizes[0]
    if sum(sizes) > UNION_LIMIT:
        return max(sizes)
    index = []
    for ld in loads:
        flat = np.asarray(ld.attr("offset"), dtype=np.int64)
        for d, s in zip(ld.shape, ld.attr("strides")):
            if s != 0:
                flat = np.add.outer(flat, np.arange(d, dtype=np.int64) * s)
        index.append(flat.ravel())
    return int(np.unique(np.concatenate(index)).size)


@functools.lru_cache(maxsize=256)
def workload_bound(wl: Workload, target: Target) -> int:
    """The bound of ``wl`` on ``target`` in cycles (what ``efficiency`` divides).
    Workloads and targets hash by their content keys, so each pair is computed once."""
    cube = vector = 0.0
    for n in wl.nodes:
        if n.op == "matmul":
            a = wl.nodes[n.args[0]]
            fm, fk, fn = target.fractal(a.dtype)
            k = a.shape[-2] if n.attr("transpose_a") else a.shape[-1]
            macs_per_cycle = target.cube_cores * fm * fk * fn / target.fractal_passes(a.dtype)
            cube += math.prod(n.shape) * k / macs_per_cycle
        elif n.op == "conv2d_nhwc":  # implicit GEMM: [N*OH*OW, R*S*C/groups] x [.., K]
            x = wl.nodes[n.args[0]]
            fm, fk, fn = target.fractal(x.dtype)
            r, s = n.attr("kernel")
            macs_per_cycle = target.cube_cores * fm * fk * fn / target.fractal_passes(x.dtype)
            per_output = r * s * x.shape[-1] // n.attr("groups", 1)
            cube += math.prod(n.shape) * per_output / macs_per_cycle
        elif n.op == "conv2d_nchw":  # [K, C*R*S] x [C*R*S, N*OH*OW]
            w = wl.nodes[n.args[1]]
            fm, fk, fn = target.fractal(w.dtype)
            macs_per_cycle = target.cube_cores * fm * fk * fn / target.fractal_passes(w.dtype)
            cube += math.prod(n.shape) * w.shape[1] / macs_per_cycle
        elif n.op in _VECTOR_COST:
            src = wl.nodes[n.args[0]]
            elems = math.prod(src.shape if n.op in ("sum", "max", "min") else n.shape)
            isz = max(BY_NAME[n.dtype].itemsize, BY_NAME[src.dtype].itemsize)
            vector += elems * isz * target.vector_op_cost(_VECTOR_COST[n.op])
    vector /= target.vector_bytes_per_cycle * target.vector_cores
    return _bound(target, cube, vector, sum(compulsory_bytes(wl)))


def program_bound(program: Program, target: Target, gm_bytes: int | None = None) -> int:
    """A bound from the program alone (for hand-written programs): its MMAD and vector
    work and its tensors' sizes, or ``gm_bytes`` (a hand-written program need not touch
    all of its tensors: ``touched_gm_bytes``)."""
    import numpy as np

    cube = vector = 0.0
    isz = np.zeros(256)
    for code, dt in BY_CODE.items():
        isz[code] = dt.itemsize
    for stream in program.cores:
        # fields first, then the instructions wanted: the same values in the same order
        # (so the same sums) without copying whole records
        ops = stream["op"]
        present = np.bincount(ops, minlength=256)
        if present[Op.MMAD]:
            mmad = ops == int(Op.MMAD)
            sdtypes = stream["sdtype"][mmad]
            macs = (stream["a_rows"][mmad].astype(np.float64) * stream["a_cols"][mmad]
                    * stream["b_cols"][mmad])
            for code in np.unique(sdtypes):
                dtype = BY_CODE[int(code)].name
                fm, fk, fn = target.fractal(dtype)
                rate = target.cube_cores * fm * fk * fn / target.fractal_passes(dtype)
                cube += float(macs[sdtypes == code].sum()) / rate
        for op in VECTOR:
            if not present[op]:
                continue
            sel = ops == int(op)
            cols = stream["a_cols" if op in REDUCE else "d_cols"][sel]
            width = np.maximum(isz[stream["dtype"][sel]], isz[stream["sdtype"][sel]])
            cost = target.vector_op_cost(op.name[1:].lower())
            vector += float((stream["d_rows"][sel].astype(np.float64) * cols * width).sum()) * cost
    vector /= target.vector_bytes_per_cycle * target.vector_cores
    if gm_bytes is None:
        gm_bytes = sum(s.size * s.dtype.itemsize for s in program.symbols
                       if s.role in ("in", "out"))
    return _bound(target, cube, vector, gm_bytes)


#: Most pieces ``touched_gm_bytes`` lists before it gives up (and says 0).
TOUCH_LIMIT = 1 << 21


def touched_gm_bytes(program: Program) -> int:
    """The bytes of GM the program's instructions touch, each counted once (0 when that
    would take more than ``TOUCH_LIMIT`` pieces to work out: still a lower bound)."""
    import numpy as np

    pieces: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    count = 0
    for stream in program.cores:
        for prefix in ("d", "a", "b"):
            rows = stream[stream[f"{prefix}_mem"] == Mem.GM]
            for row in rows:
                addr, n, m = int(row[f"{prefix}_addr"]), int(row[f"{prefix}_rows"]), \
                    int(row[f"{prefix}_cols"])
                rs, cs = int(row[f"{prefix}_rs"]), int(row[f"{prefix}_cs"])
                count += n if abs(cs) <= 1 or m == 1 else n * m
                if count > TOUCH_LIMIT:
                    return 0
                starts = addr + rs * np.arange(n, dtype=np.int64)
                if m == 1 or cs == 0:
                    lo, length = starts, 1
                elif abs(cs) == 1:
                    lo, length = np.minimum(starts, starts + (m - 1) * cs), m
                else:
                    lo = (starts[:, None] + cs * np.arange(m, dtype=np.int64)).reshape(-1)
                    length = 1
                pieces.setdefault(int(row["gm"]), []).append((lo, lo + length))
    total = 0
    for sym, spans in pieces.items():
        lo = np.concatenate([a for a, _ in spans])
        hi = np.concatenate([b for _, b in spans])
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], hi[order]
        reach = np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(hi)[:-1]))
        elements = int(np.maximum(0, hi - np.maximum(lo, reach)).sum())
        total += elements * program.symbols[sym].dtype.itemsize
    return total
