"""The fast timing engine: ``simulate`` with the compiled core of ``_engine.pyx``.

It gives exactly the ``SimResult`` of ``pypto.sim.reference`` (the specification), only
faster. This module turns the target into small lookup tables (by opcode, dtype code and
data path) and hands the per-core ``INSTR`` arrays to the engine, which reads them in
place. ``_engine`` is imported on the first call, so importing ``pypto`` stays cheap.

Programs outside the range the engine computes exactly (invalid codes, a path or cube
dtype the target lacks, sizes whose products could overflow an ``int64`` or lose a bit
in a ``double``) are timed by the reference engine, which then also raises the errors
it defines.

Example:
    >>> import pypto
    >>> from pypto.sim import fast
    >>> from pypto.targets import load_target
    >>> k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    >>> p = k.lower(pypto.spec((64, 64), "float16"), pypto.spec((64, 64), "float16")).programs[0]
    >>> fast.simulate(p, load_target("ascend910b"), 0).cycles > 0
    True
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np

from pypto.codegen.isa import REDUCE, VECTOR, Mem, Op, Pipe
from pypto.codegen.program import Program
from pypto.errors import SimError
from pypto.frontend.dtypes import BY_CODE
from pypto.sim.result import TRACE, SimResult
from pypto.targets import Target

# Kinds of instruction, as _engine.pyx numbers them.
K_NOP, K_COPY, K_MMAD, K_SET, K_WAIT, K_BARRIER, K_VECTOR, K_REDUCE, K_SYNC_ALL = range(1, 10)
_KIND_OF = {Op.NOP: K_NOP, Op.COPY: K_COPY, Op.MMAD: K_MMAD, Op.SET_FLAG: K_SET,
            Op.WAIT_FLAG: K_WAIT, Op.BARRIER: K_BARRIER, Op.SYNC_ALL: K_SYNC_ALL}
# Symbols' base addresses above this are left to the reference (see _engine.pyx).
_MAX_GM_BYTES = 1 << 50


def _kinds() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint8)
    for op in Op:
        if op in _KIND_OF:
            table[op] = _KIND_OF[op]
        elif op in REDUCE:
            table[op] = K_REDUCE
        elif op in VECTOR:
            table[op] = K_VECTOR
    return table


@functools.lru_cache(maxsize=16)
def _tables(target: Target) -> tuple[tuple[np.ndarray, ...], tuple]:
    """The target as lookup tables for the engine; absent entries are 0 or -1."""
    from pypto.sim.reference import L2_WAYS, vector_cost_name

    vector_cost = np.full(256, -1.0)
    for op in VECTOR:
        if vector_cost_name(op) in target.vector_op_cycles:
            vector_cost[op] = target.vector_op_cost(vector_cost_name(op))
    itemsize = np.full(256, -1, dtype=np.int64)
    fractal = np.zeros((256, 4), dtype=np.int64)
    for code, dtype in BY_CODE.items():
        itemsize[code] = dtype.itemsize
        if dtype.name in target.fractals:
            fractal[code] = (*target.fractal(dtype.name), target.fractal_passes(dtype.name))
    n = len(Mem)
    path_ok = np.zeros(n * n, dtype=np.uint8)
    rate, row_cycles = np.ones(n * n), np.zeros(n * n)
    latency, min_burst = np.zeros(n * n, dtype=np.int64), np.zeros(n * n, dtype=np.int64)
    for src in Mem:
        for dst in Mem:
            if target.has_path(src.name, dst.name):
                path = target.path(src.name, dst.name)
                i = src * n + dst
                path_ok[i] = 1
                rate[i], row_cycles[i] = path.bytes_per_cycle, path.row_cycles
                latency[i], min_burst[i] = path.latency, path.min_burst
    line = target.l2_line_bytes
    scalars = (target.queue_depth, target.cube_issue_overhead, target.vector_issue_overhead,
               float(target.vector_bytes_per_cycle), float(target.l2_read_bytes_per_cycle),
               float(target.gm_bytes_per_cycle_chip), line, target.l2_hit_latency,
               target.l2_miss_latency, max(1, target.l2_bytes // (line * L2_WAYS)),
               target.sync_all_cycles)
    tables = (_kinds(), vector_cost, itemsize, fractal.reshape(-1), path_ok, rate, latency,
              min_burst, row_cycles)
    return tables, scalars


@functools.cache
def _engine() -> ModuleType:
    from pypto.sim import _engine as engine  # type: ignore[attr-defined]

    return engine


@functools.lru_cache(maxsize=16)
def _supported(target: Target) -> bool:
    """Whether the engine can time on ``target`` (a validated target always can; one
    built by hand may have a zero rate or a fractional latency, which the reference
    handles its own way)."""
    paths = target.paths.values()
    rates = [target.vector_bytes_per_cycle, target.l2_read_bytes_per_cycle,
             target.gm_bytes_per_cycle_chip, *(p.bytes_per_cycle for p in paths)]
    counts = [target.queue_depth, target.cube_issue_overhead, target.vector_issue_overhead,
              target.sync_all_cycles,
              target.l2_hit_latency, target.l2_miss_latency, target.l2_line_bytes,
              target.l2_bytes, *(p.latency for p in paths), *(p.min_burst for p in paths)]
    return (all(isinstance(c, int) and abs(c) < 2**40 for c in counts)
            and target.queue_depth >= 1 and target.l2_line_bytes >= 1 and target.l2_bytes >= 1
            and all(r > 0 for r in rates))


def simulate(program: Program, target: Target, bound_cycles: int,
             trace: bool = False, check: bool = False) -> SimResult:
    """Time ``program`` on ``target``: the same ``SimResult`` as
    ``pypto.sim.reference.simulate``, field for field. ``check`` first runs
    ``pypto.sim.check.check_program`` (in the engine's own pass over the program).

    Raises:
        SimError: a ``WAIT_FLAG`` whose ``SET_FLAG`` is not issued before it (deadlock);
            with ``check``, what check_program raises.
    """
    from pypto.sim import reference
    from pypto.sim.check import check_program, check_tables

    engine = _engine()
    bases = reference.symbol_bases(program)
    last = program.symbols[-1] if program.symbols else None
    if (last is not None and bases[-1] + last.size * last.dtype.itemsize >= _MAX_GM_BYTES) \
            or not _supported(target):
        if check:
            check_program(program, target)
        return reference.simulate(program, target, bound_cycles, trace=trace)
    tables, scalars = _tables(target)
    cores = [np.ascontiguousarray(c) for c in program.cores]
    n, total = len(cores), sum(len(c) for c in cores)
    core_cycles = np.zeros(n, dtype=np.int64)
    pipe_busy = np.zeros((n, len(Pipe)), dtype=np.int64)
    flag_wait = np.zeros((n, len(Pipe), len(Pipe)), dtype=np.int64)
    starved = np.zeros((n, len(Pipe)), dtype=np.int64)
    queue_stall = np.zeros((n, len(Pipe)), dtype=np.int64)
    path_bytes = np.zeros((len(Mem), len(Mem)), dtype=np.int64)
    records = np.empty(total, dtype=TRACE) if trace else None
    status, core, index, l2_hit, gm_read, gm_write = engine.run(
        cores, np.array(bases, dtype=np.int64), tables, scalars, records, core_cycles,
        pipe_busy, flag_wait, starved, queue_stall, path_bytes,
        check_tables(program, target) if check else None)
    if status == engine.CHECK_FAILED or (check and status == engine.USE_REFERENCE):
        check_program(program, target)      # raises what is wrong
    if status == engine.CHECK_FAILED:       # (not reached: the two checks agree)
        return simulate(program, target, bound_cycles, trace=trace)
    if status == engine.USE_REFERENCE:
        return reference.simulate(program, target, bound_cycles, trace=trace)
    if status == engine.DEADLOCK:
        raise _deadlock(program, core, index)
    cycles = target.launch_overhead_cycles + (int(core_cycles.max()) if n else 0)
    return SimResult(target.name, target.clock_ghz, cycles, core_cycles, pipe_busy, flag_wait,
                     starved, queue_stall, path_bytes, int(l2_hit), int(gm_read), int(gm_write),
                     bound_cycles, program.num_instructions, trace=records)


def _deadlock(program: Program, core: int, index: int) -> SimError:
    """The reference engine's deadlock error for instruction ``index`` of ``core``."""
    from pypto.codegen.asm import print_instruction

    row = program.cores[core][index].item()
    text = print_instruction(row, program.symbols).strip()
    src, dst, event = Pipe(row[2]).name, Pipe(row[1]).name, row[3]
    return SimError(f"{program.name}, core {core}, instruction {index} ({text}): deadlock: "
                    f"this WAIT_FLAG waits for a SET_FLAG {src}->{dst} event {event} that is "
                    "not issued before it")
