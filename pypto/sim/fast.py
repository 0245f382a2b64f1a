"""The fast timing engine: ``simulate`` with the compiled core of ``_engine.pyx``.

It gives exactly the ``SimResult`` of ``pypto.sim.reference`` (the specification), only
faster. This module turns the target into small lookup tables (by opcode, dtype code and
data path, once per target) and hands the per-core ``INSTR`` arrays to the engine,
which reads them in place; what it prepares of a program (contiguous streams, symbol
bases) is kept for the program's next simulation. ``_engine`` is imported on the first
call, so importing ``pypto`` stays cheap.

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
import weakref
from types import ModuleType

import numpy as np

from pypto.codegen.isa import REDUCE, SCALAR_OPS, VECTOR, Mem, Op, Pipe
from pypto.codegen.memories import memory_map
from pypto.codegen.program import Program
from pypto.errors import SimError
from pypto.ir.dtypes import BY_CODE
from pypto.sim.result import TRACE, SimResult, target_facts
from pypto.targets import Target

# The engine's kind of instruction (``_engine.KINDS``) of the opcodes that have their own.
_KIND_OF = {Op.NOP: "NOP", Op.COPY: "COPY", Op.VLD: "COPY", Op.VST: "COPY", Op.MMAD: "MMAD",
            Op.SET_FLAG: "SET", Op.WAIT_FLAG: "WAIT", Op.BARRIER: "BARRIER",
            Op.SYNC_ALL: "SYNC_ALL", **{op: "SCALAR" for op in SCALAR_OPS}}
# Symbols' base addresses above this are left to the reference (see _engine.pyx).
_MAX_GM_BYTES = 1 << 50


def _kinds() -> np.ndarray:
    """The engine's instruction kind by opcode (0: invalid)."""
    kinds = _engine().KINDS
    table = np.zeros(256, dtype=np.uint8)
    for op in Op:
        if op in _KIND_OF:
            table[op] = kinds[_KIND_OF[op]]
        elif op in REDUCE:
            table[op] = kinds["REDUCE"]
        elif op in VECTOR:
            table[op] = kinds["VECTOR"]
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
    names = memory_map(target).names
    for src in names:
        for dst in names:
            if target.has_path(names[src], names[dst]):
                path = target.path(names[src], names[dst])
                i = src * n + dst
                path_ok[i] = 1
                rate[i], row_cycles[i] = path.bytes_per_cycle, path.row_cycles
                latency[i], min_burst[i] = path.latency, path.min_burst
    line = target.l2_line_bytes
    scalars = (target.queue_depth, target.cube_issue_overhead, target.vector_issue_overhead,
               float(target.vector_bytes_per_cycle), float(target.l2_read_bytes_per_cycle),
               float(target.dram_bytes_per_cycle), line, target.l2_hit_latency,
               target.l2_miss_latency, max(1, target.l2_bytes // (line * L2_WAYS)),
               target.sync_all_cycles, target.scalar_op_cycles)
    tables = (_kinds(), vector_cost, itemsize, fractal.reshape(-1), path_ok, rate, latency,
              min_burst, row_cycles)
    return tables, scalars


@functools.lru_cache(maxsize=16)
def _engine_tables(target: Target) -> object:
    """``_tables`` and the target's part of check_program's tables, as the engine's
    ``Tables`` (built once per target)."""
    from pypto.sim.check import _ITEMSIZE, _STRICT, _memories

    tables, scalars = _tables(target)
    capacity, alignment = _memories(target)
    return _engine().Tables(tables, scalars, (capacity, alignment, _ITEMSIZE, _STRICT))


class _Prepared:
    """What the engine needs of one program besides the target, kept for the next
    simulation of the same program (a tuner simulates each program once, a benchmark
    many times): its C-contiguous streams, symbol bases and sizes."""

    __slots__ = ("program", "cores", "bases", "sizes", "fits", "instructions")

    def __init__(self, program: Program) -> None:
        from pypto.sim import reference

        self.program = weakref.ref(program)
        self.cores = [np.ascontiguousarray(c) for c in program.cores]
        self.instructions = program.num_instructions
        bases = reference.symbol_bases(program)
        self.bases = np.array(bases, dtype=np.int64)
        self.sizes = np.array([s.size for s in program.symbols] or [0], dtype=np.int64)
        last = program.symbols[-1] if program.symbols else None
        self.fits = last is None or bases[-1] + last.size * last.dtype.itemsize < _MAX_GM_BYTES


# By id(program); an entry is used only while its program is alive (ids are reused).
_prepared: dict[int, _Prepared] = {}
_PREPARED_MAX = 8


def _prepare(program: Program) -> _Prepared:
    entry = _prepared.get(id(program))
    if entry is not None and entry.program() is program \
            and all(a is b for a, b in zip(entry.cores, program.cores)):
        return entry
    entry = _Prepared(program)
    if len(_prepared) >= _PREPARED_MAX:
        _prepared.pop(next(iter(_prepared)))
    _prepared[id(program)] = entry
    return entry


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
             target.dram_bytes_per_cycle, *(p.bytes_per_cycle for p in paths)]
    counts = [target.queue_depth, target.cube_issue_overhead, target.vector_issue_overhead,
              target.sync_all_cycles, target.scalar_op_cycles,
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
    if check:  # what the engine's own pass does not check
        from pypto.sim.check import check_gm_dtypes, check_work

        check_gm_dtypes(program, target)
        check_work(program, target)
    prepared = _prepare(program)
    if not prepared.fits or not _supported(target):
        if check:
            _check(program, target)
        return _reference(program, target, bound_cycles, trace)
    engine = _engine()
    records = np.empty(prepared.instructions, dtype=TRACE) if trace else None
    (status, core, index, l2_hit, gm_read, gm_write, dram_read, dram_write, longest,
     core_cycles, pipe_busy, flag_wait, starved, queue_stall, path_bytes) = engine.run(
        prepared.cores, prepared.bases, _engine_tables(target), records,
        prepared.sizes if check else None)
    if status == engine.CHECK_FAILED or (check and status == engine.USE_REFERENCE):
        _check(program, target)             # raises what is wrong
    if status == engine.USE_REFERENCE:
        return _reference(program, target, bound_cycles, trace)
    if status == engine.DEADLOCK:
        raise _deadlock(program, target, core, index)
    memories, copy_pipes = target_facts(target)
    return SimResult(target.name, target.clock_ghz, target.launch_overhead_cycles + longest,
                     core_cycles, pipe_busy, flag_wait, starved, queue_stall, path_bytes,
                     l2_hit, gm_read, gm_write, dram_read, dram_write, bound_cycles,
                     prepared.instructions,
                     trace=records, memories=memories, copy_pipes=copy_pipes)


def _reference(program: Program, target: Target, bound_cycles: int, trace: bool) -> SimResult:
    from pypto.sim import reference

    return reference.simulate(program, target, bound_cycles, trace=trace)


def _check(program: Program, target: Target) -> None:
    from pypto.sim.check import check_program

    check_program(program, target)


def _deadlock(program: Program, target: Target, core: int, index: int) -> SimError:
    """The reference engine's deadlock error for instruction ``index`` of ``core``."""
    from pypto.codegen.asm import print_instruction

    row = program.cores[core][index].item()
    text = print_instruction(row, program.symbols, target).strip()
    src, dst, event = Pipe(row[2]).name, Pipe(row[1]).name, row[3]
    return SimError(f"{program.where(core, index)} ({text}): deadlock: "
                    f"this WAIT_FLAG waits for a SET_FLAG {src}->{dst} event {event} that is "
                    "not issued before it")
