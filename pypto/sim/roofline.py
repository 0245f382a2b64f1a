"""The roofline bound: a time no schedule can beat, independent of the schedule.

``max(flops / cube peak, vector work / vector peak, compulsory GM bytes / DRAM
bandwidth)`` over all the cores the target has, plus the launch overhead. Compulsory
bytes count every input element a workload reads once and every output once.
"""

from __future__ import annotations

import functools
import math

from pypto.codegen.isa import REDUCE, VECTOR, Op
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


def compulsory_bytes(wl: Workload) -> tuple[int, int]:
    """``(input bytes, output bytes)`` that any program of ``wl`` must move: each input
    element read once (a broadcast input counts its own elements, not the broadcast
    shape's) and each output element written once."""
    reads = 0
    for n in wl.nodes:
        if n.op == "load":
            footprint = math.prod(d for d, s in zip(n.shape, n.attr("strides")) if s != 0)
            reads += footprint * BY_NAME[n.dtype].itemsize
    writes = sum(math.prod(wl.nodes[o].shape) * BY_NAME[wl.nodes[o].dtype].itemsize
                 for o in wl.outputs)
    return reads, writes


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
        elif n.op == "conv2d_nhwc":  # implicit GEMM: [N*OH*OW, R*S*C] x [R*S*C, K]
            x = wl.nodes[n.args[0]]
            fm, fk, fn = target.fractal(x.dtype)
            r, s = n.attr("kernel")
            macs_per_cycle = target.cube_cores * fm * fk * fn / target.fractal_passes(x.dtype)
            cube += math.prod(n.shape) * r * s * x.shape[-1] / macs_per_cycle
        elif n.op in _VECTOR_COST:
            src = wl.nodes[n.args[0]]
            elems = math.prod(src.shape if n.op in ("sum", "max", "min") else n.shape)
            isz = max(BY_NAME[n.dtype].itemsize, BY_NAME[src.dtype].itemsize)
            vector += elems * isz * target.vector_op_cost(_VECTOR_COST[n.op])
    vector /= target.vector_bytes_per_cycle * target.vector_cores
    return _bound(target, cube, vector, sum(compulsory_bytes(wl)))


def program_bound(program: Program, target: Target) -> int:
    """A bound from the program alone (for hand-written programs): its MMAD and vector
    work and its tensors' sizes."""
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
    gm = sum(s.size * s.dtype.itemsize for s in program.symbols if s.role in ("in", "out"))
    return _bound(target, cube, vector, gm)
