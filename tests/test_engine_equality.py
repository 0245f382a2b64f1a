"""The Cython timing engine (``pypto.sim.fast``) gives exactly the reference engine's
results (``pypto.sim.reference``, the specification): on programs from codegen with
random shapes and schedules, on random hand-built instruction streams, on deadlocks and
on programs only the reference handles. Every simulated program also meets the timing
invariants."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto import native
from pypto.codegen.isa import (
    BINARY,
    F_TRANSPOSE,
    INSTR,
    REDUCE,
    SCALAR_IMM,
    UNARY,
    VECTOR_REGISTER_BYTES,
    Mem,
    Op,
    Pipe,
)
from pypto.codegen.memories import memory_map
from pypto.codegen.program import Operand, Program, StreamBuilder, Symbol
from pypto.codegen.sync import insert_sync
from pypto.errors import SimError
from pypto.ir.dtypes import float16, float32, int8, int32
from pypto.sim import check, fast, reference, timing
from pypto.sim.hazards import find_hazards
from pypto.sim.result import TRACE, SimResult
from pypto.sim.roofline import program_bound, workload_bound
from pypto.sim.scalar import issue
from pypto.targets import Target, load_target
from tests.strategies import broadcastable_to, random_schedule
from tests.test_asm import programs as wild_programs

# Lowering warns when no tuned schedule is stored; defaults are what these tests want.
pytestmark = pytest.mark.filterwarnings("ignore:.*no tuned schedule")

SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _stress_target() -> Target:
    """ascend910b with a 2-set L2 (evictions), 2-deep queues (queue stalls), a slow DRAM,
    fractional rates and per-row costs on every path: every rule gets exercised."""
    data = load_target("ascend910b").to_dict()
    data["target"]["name"] = "stress"
    data["l2"].update(bytes=16384, read_bytes_per_cycle=37.3, hit_latency=7, miss_latency=90)
    data["sync"]["queue_depth"] = 2
    data["gm"].update(chip_bytes_per_cycle=11.7, sustained_fraction=0.73)
    data["vector"]["bytes_per_cycle"] = 96.5
    for i, path in enumerate(data["paths"].values()):
        path.update(bytes_per_cycle=path["bytes_per_cycle"] / 3.1, row_cycles=0.37 * (i % 3),
                    min_burst=64 if i % 2 else 512)
    return Target.from_dict(data, "engine stress target")


TARGETS = {name: load_target(name) for name in ("ascend910b", "ascend310")}
ALL_TARGETS = {**TARGETS, "stress": _stress_target()}


def check_same(program: Program, target: Target, bound: int) -> SimResult:
    """Both engines agree (with and without a trace); the invariants hold."""
    want = reference.simulate(program, target, bound, trace=True)
    got = fast.simulate(program, target, bound, trace=True)
    assert got.trace is not None and want.trace is not None and got.trace.dtype == TRACE
    assert got.same_timing(want), _difference(got, want)
    assert np.array_equal(got.trace, want.trace)
    for name in ("cycles", "l2_hit_bytes", "gm_read_bytes", "gm_write_bytes",
                 "dram_read_bytes", "dram_write_bytes"):
        assert type(getattr(got, name)) is int, name
    plain = fast.simulate(program, target, bound)
    assert plain.trace is None and plain.same_timing(want)
    again = fast.simulate(program, target, bound, trace=True)
    assert again.trace is not None and np.array_equal(again.trace, got.trace)
    assert again.same_timing(got)  # deterministic
    assert got.cycles >= bound
    assert (got.pipe_busy <= got.cycles).all()
    return got


def _difference(got: SimResult, want: SimResult) -> str:
    fields = ("cycles", "core_cycles", "pipe_busy", "flag_wait", "starved", "queue_stall",
              "path_bytes", "l2_hit_bytes", "gm_read_bytes", "gm_write_bytes",
              "dram_read_bytes", "dram_write_bytes")
    return "; ".join(f"{f}: {getattr(got, f)} != {getattr(want, f)}" for f in fields
                     if not np.array_equal(getattr(got, f), getattr(want, f)))


# -- programs from codegen --------------------------------------------------------------


def check_compiled(data: st.DataObject, fn: Callable[..., Any], *specs: Any, target: str) -> None:
    """Both engines agree on ``fn``'s programs, default and randomly scheduled."""
    compiled = pypto.kernel(fn).lower(*specs, target=TARGETS[target])
    if data.draw(st.booleans(), label="random schedule"):
        for i, wl in enumerate(compiled.workloads):
            compiled = compiled.with_schedule(i, data.draw(random_schedule(wl, compiled.target)))
    for wl, program in zip(compiled.workloads, compiled.programs):
        result = check_same(program, compiled.target, workload_bound(wl, compiled.target))
        assert result.trace is not None and find_hazards(program, result.trace) == []


targets = st.sampled_from(sorted(TARGETS))


@SETTINGS
@given(st.data(), st.integers(1, 150), st.integers(1, 150), st.integers(1, 200),
       st.sampled_from(["float16", "float32", "int8"]), st.booleans(), st.booleans(), targets)
def test_matmul(data, m, n, k, dtype, ta, tb, target):
    a = pypto.spec((k, m) if ta else (m, k), dtype)
    b = pypto.spec((n, k) if tb else (k, n), dtype)
    check_compiled(data, lambda x, y: pypto.matmul(x, y, transpose_a=ta, transpose_b=tb), a, b,
                   target=target)


@SETTINGS
@given(st.data(), st.integers(1, 3), st.integers(1, 40), st.integers(1, 40), st.integers(1, 40),
       st.booleans(), targets)
def test_batched_matmul_with_epilogue(data, batch, m, n, k, relu, target):
    a, b = pypto.spec((batch, m, k), "float16"), pypto.spec((k, n), "float16")

    def fn(x: Any, y: Any) -> Any:
        out = pypto.matmul(x, y)
        return pypto.relu(out) * 0.5 if relu else out

    check_compiled(data, fn, a, b, target=target)


@SETTINGS
@given(st.data(), st.lists(st.integers(1, 48), min_size=1, max_size=3).map(tuple),
       st.sampled_from(["float16", "float32"]),
       st.lists(st.sampled_from(["exp", "relu", "tanh", "neg", "sigmoid"]), min_size=1,
                max_size=3), targets)
def test_elementwise_chains_with_broadcasting(data, shape, dtype, unary, target):
    other = data.draw(broadcastable_to(shape))

    def fn(x: Any, y: Any) -> Any:
        v = x
        for name in unary:
            v = getattr(pypto, name)(v) + y
        return v * 2.0 - x

    check_compiled(data, fn, pypto.spec(shape, dtype), pypto.spec(other, dtype), target=target)


@SETTINGS
@given(st.data(), st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple),
       st.sampled_from(["sum", "max", "mean"]), st.sampled_from(["float16", "float32"]),
       st.booleans(), targets)
def test_reductions(data, shape, op, dtype, keepdims, target):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    check_compiled(data, lambda a: getattr(pypto, op)(a, axis=axis, keepdims=keepdims),
                   pypto.spec(shape, dtype), target=target)


@SETTINGS
@given(st.data(), st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple),
       st.sampled_from(["float16", "float32"]), targets)
def test_softmax_and_layernorm(data, shape, dtype, target):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    specs = (pypto.spec(shape, dtype), pypto.spec(shape[-1:], dtype),
             pypto.spec(shape[-1:], dtype))
    check_compiled(data, lambda a, g, b: (pypto.softmax(a, axis=axis), pypto.layernorm(a, g, b)),
                   *specs, target=target)


@SETTINGS
@given(st.data(), st.integers(1, 96), st.integers(1, 1300),
       st.sampled_from(["ascend910b", "ascend310", "mlu370"]))
def test_unaligned_row_pitches(data, rows, cols, target_name):
    """Rows whose pitch is not a whole number of L2 lines share lines with their
    neighbours: each missed line costs DRAM a whole line, once, in both engines (issue
    12 item 1), under random schedules on every target."""
    target = load_target(target_name)
    compiled = pypto.kernel(lambda a, b: a + b).lower(
        pypto.spec((rows, cols), "float16"), pypto.spec((rows, cols), "float16"),
        target=target)
    compiled = compiled.with_schedule(
        0, data.draw(random_schedule(compiled.workloads[0], target)))
    wl, program = compiled.workloads[0], compiled.programs[0]
    got = check_same(program, target, workload_bound(wl, target))
    line, tensor = target.l2_line_bytes, rows * cols * 2
    assert got.dram_read_bytes % line == 0
    assert got.dram_read_bytes >= 2 * -(-tensor // line) * line   # cold L2: every line


def test_default_gemm_1024_on_both_targets():
    for target in TARGETS.values():
        compiled = pypto.kernel(lambda a, b: pypto.matmul(a, b)).lower(
            pypto.spec((1024, 1024), "float16"), pypto.spec((1024, 1024), "float16"),
            target=target)
        check_same(compiled.programs[0], target, workload_bound(compiled.workloads[0], target))


# -- random hand-built instruction streams ----------------------------------------------

# Per-core capacities both packaged targets have (timing does not check them; the sync
# pass and the hazard check use the addresses).
CAPACITY = {Mem.STAGE: 1 << 19, Mem.LEFT: 1 << 16, Mem.RIGHT: 1 << 16, Mem.ACC: 1 << 17,
            Mem.VECTOR: 3 << 16, Mem.REGISTERS: 1 << 13}
DTYPES = (float16, float32, int8, int32)
# the Ascend-class paths (both targets these random streams run on have them)
COPY_PATHS = sorted(memory_map(TARGETS["ascend910b"]).copy_pipes)
assert COPY_PATHS == sorted(memory_map(TARGETS["ascend310"]).copy_pipes)
VECTOR_OPS = sorted(BINARY | SCALAR_IMM | UNARY | REDUCE | {Op.VDUP})


@st.composite
def on_chip(draw: st.DrawFn, mem: Mem, rows: int, cols: int, isz: int) -> Operand:
    """A region of ``mem``: contiguous rows, padded rows, element-strided or broadcast."""
    rs = draw(st.sampled_from([cols, cols + draw(st.integers(1, 9)), 0, 1]))
    cs = draw(st.sampled_from([1, 1, 1, 2, 3, 0]))
    span = ((rows - 1) * max(rs, 0) + (cols - 1) * cs + 1) * isz
    top = max(0, CAPACITY[mem] - span) // 32
    return Operand(mem, 32 * draw(st.integers(0, top)), rows, cols, rs, cs)


@st.composite
def gm_operand(draw: st.DrawFn, symbols: list[Symbol], rows: int, cols: int) -> Operand:
    """A region of a GM tensor: any strides (0 broadcasts), odd offsets; sometimes the
    builder's default ``gm=-1`` (the reference indexes the last symbol) or a negative
    offset (negative lines)."""
    index = draw(st.integers(-1, len(symbols) - 1))
    size = symbols[index].size
    rs = draw(st.sampled_from([cols, 0, cols + draw(st.integers(1, 40)), 1, 2 * cols,
                               draw(st.integers(1, 300))]))
    cs = draw(st.sampled_from([1, 1, 0, 2, 3, draw(st.integers(4, 70))]))
    addr = draw(st.one_of(st.integers(0, size), st.integers(-600, -1)))
    return Operand(Mem.GM, addr, rows, cols, rs, cs, gm=index)


@st.composite
def instruction(draw: st.DrawFn, b: StreamBuilder, symbols: list[Symbol]) -> None:
    kind = draw(st.sampled_from(["copy"] * 5 + ["mmad"] * 2 + ["vector"] * 3 +
                                ["barrier", "nop"]))
    if kind == "barrier":
        b.emit(Op.BARRIER)
    elif kind == "nop":
        b.emit(Op.NOP)
    elif kind == "copy":
        src, dst = draw(st.sampled_from(COPY_PATHS))
        dtype = draw(st.sampled_from(DTYPES))
        # mostly a plain copy; sometimes a converting one (as FIX drains fp32 to fp16)
        sdtype = draw(st.sampled_from([dtype, dtype, *DTYPES]))
        rows, cols = draw(st.integers(1, 24)), draw(st.integers(1, 80))
        flags = F_TRANSPOSE if src != Mem.GM and dst != Mem.GM and draw(st.booleans()) else 0
        srows, scols = (cols, rows) if flags else (rows, cols)
        a = draw(gm_operand(symbols, srows, scols) if src == Mem.GM
                 else on_chip(src, srows, scols, sdtype.itemsize))
        d = draw(gm_operand(symbols, rows, cols) if dst == Mem.GM
                 else on_chip(dst, rows, cols, dtype.itemsize))
        b.emit(Op.COPY, d, a, dtype=dtype, sdtype=sdtype, flags=flags)
    elif kind == "mmad":
        sdtype = draw(st.sampled_from([float16, float32, int8]))
        m, k, n = (draw(st.integers(1, 64)) for _ in range(3))
        b.emit(Op.MMAD, draw(on_chip(Mem.ACC, m, n, 4)), draw(on_chip(Mem.LEFT, m, k, 2)),
               draw(on_chip(Mem.RIGHT, k, n, 2)), dtype=int32 if sdtype == int8 else float32,
               sdtype=sdtype, flags=draw(st.sampled_from([0, 2])))
    else:
        op = draw(st.sampled_from(VECTOR_OPS))
        dtype, sdtype = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(DTYPES))
        rows, cols = draw(st.integers(1, 16)), draw(st.integers(1, 200))
        d = draw(on_chip(Mem.VECTOR, rows, 1 if op in REDUCE else cols, dtype.itemsize))
        srcs = [draw(on_chip(Mem.VECTOR, rows, cols, sdtype.itemsize))
                for _ in range(2 if op in BINARY else 0 if op == Op.VDUP else 1)]
        b.emit(op, d, *srcs, dtype=dtype, sdtype=sdtype, imm=1.5)


@st.composite
def core_stream(draw: st.DrawFn, symbols: list[Symbol], event_ids: int,
                sync_alls: int = 0) -> np.ndarray:
    """A random stream with flags from the sync pass, extra SET/WAIT pairs and
    ``sync_alls`` SYNC_ALLs anywhere (every core of a program gets as many)."""
    b = StreamBuilder()
    for _ in range(draw(st.integers(0, 40))):
        draw(instruction(b, symbols))
    rows = insert_sync(b.rows, event_ids)
    # extra SET/WAIT pairs, the set first: several may be pending on one key at a time
    for _ in range(draw(st.integers(0, 4))):
        src, dst = draw(st.sampled_from([(Pipe.MTE2, Pipe.VEC), (Pipe.VEC, Pipe.MTE3),
                                         (Pipe.MTE1, Pipe.CUBE), (Pipe.CUBE, Pipe.FIX)]))
        event = draw(st.integers(0, 2))
        i = draw(st.integers(0, len(rows)))
        j = draw(st.integers(i, len(rows)))
        flag = StreamBuilder()
        flag.emit(Op.SET_FLAG, pipe=src, pipe2=dst, event=event)
        flag.emit(Op.WAIT_FLAG, pipe=dst, pipe2=src, event=event)
        rows = rows[:i] + [flag.rows[0]] + rows[i:j] + [flag.rows[1]] + rows[j:]
    meet = StreamBuilder()
    meet.emit(Op.SYNC_ALL)
    for _ in range(sync_alls):
        i = draw(st.integers(0, len(rows)))
        rows = rows[:i] + meet.rows + rows[i:]
    return np.array(rows, dtype=INSTR) if rows else np.zeros(0, dtype=INSTR)


# How many times the cores of a random program meet at SYNC_ALL (often never).
MEETINGS = st.sampled_from([0, 0, 1, 2, 3])


@st.composite
def random_programs(draw: st.DrawFn, target: Target,
                    sync_alls: st.SearchStrategy[int] = MEETINGS) -> Program:
    symbols = [Symbol(f"t{i}", draw(st.sampled_from(DTYPES)),
                      (draw(st.integers(1, 64)), draw(st.integers(1, 3000))), "tmp")
               for i in range(draw(st.integers(1, 4)))]
    ncores = draw(st.integers(1, min(4, target.cube_cores)))
    meetings = draw(sync_alls)
    cores = tuple(draw(core_stream(symbols, target.event_ids, meetings))
                  for _ in range(ncores))
    return Program("random", target.name, tuple(symbols), cores)


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.sampled_from(sorted(ALL_TARGETS)))
def test_random_streams(data, target_name):
    target = ALL_TARGETS[target_name]
    program = data.draw(random_programs(target))
    check_same(program, target, program_bound(program, target))


@st.composite
def raw_stream(draw: st.DrawFn, symbols: list[Symbol], event_ids: int) -> np.ndarray:
    """A raw-mode stream: registers set up, then a loop (``BNE``/``BLT``) whose body loads
    vector registers from a register-based UB address, computes on them, stores them
    back and runs random instructions (flags from the sync pass), the address register
    stepping a register's width each time."""
    registers = memory_map(TARGETS["ascend910b"]).roles["registers"]
    dtype = draw(st.sampled_from(DTYPES))
    width = VECTOR_REGISTER_BYTES // dtype.itemsize
    iterations = draw(st.integers(1, 4))
    b = StreamBuilder()

    def q(n: int) -> Operand:
        return Operand(registers, n * VECTOR_REGISTER_BYTES, 1, width, width)

    def ub(offset: int) -> Operand:
        return Operand(Mem.VECTOR, offset, 1, width, width)

    for _ in range(draw(st.integers(0, 3))):
        load = draw(st.booleans())
        register, offset = q(draw(st.integers(0, 31))), 32 * draw(st.integers(0, 1000))
        if load:
            b.emit(Op.VLD, register, ub(offset), dtype=dtype, event=1)   # UB[R0+offset]
        else:
            b.emit(Op.VST, ub(offset), register, dtype=dtype, pipe2=1)
        op = draw(st.sampled_from(sorted(BINARY | UNARY)))
        b.emit(op, *[q(draw(st.integers(0, 31))) for _ in range(3 if op in BINARY else 2)],
               dtype=dtype)
        draw(instruction(b, symbols))
    body = insert_sync(b.rows, event_ids)
    scalar = StreamBuilder()

    def emit(op: Op, d: int, a: int, b: int, imm: int = 0) -> None:
        scalar.emit(op, *(Operand(Mem.NONE, r, 0, 0, 0, 0) for r in (d, a, b)), imm=imm)

    emit(Op.MOV, 0, -1, 0, 0)                   # R0: the address, from 0
    emit(Op.MOV, 1, -1, 0, iterations)          # R1: iterations left
    emit(Op.MOV, 2, -1, 0, 0)                   # R2: iterations done
    emit(Op.ADD, 0, 0, -1, VECTOR_REGISTER_BYTES)
    emit(Op.SUB, 1, 1, -1, 1)
    emit(Op.ADD, 2, 2, -1, 1)
    if draw(st.booleans()):
        emit(Op.BNE, 3, 1, -1, 0)               # while R1 != 0
    else:
        emit(Op.BLT, 3, 2, -1, iterations)      # while R2 < iterations
    rows = scalar.rows[:3] + body + scalar.rows[3:]
    return np.array(rows, dtype=INSTR)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.sampled_from(sorted(ALL_TARGETS)))
def test_random_raw_streams(data, target_name):
    """Raw mode: what the scalar unit issues (loops, register-based addresses, scalar
    instructions, loads and stores of vector registers) times alike in both engines."""
    target = ALL_TARGETS[target_name]
    symbols = [Symbol(f"t{i}", data.draw(st.sampled_from(DTYPES)),
                      (data.draw(st.integers(1, 64)), data.draw(st.integers(1, 3000))), "tmp")
               for i in range(data.draw(st.integers(1, 3)))]
    cores = tuple(data.draw(raw_stream(symbols, target.event_ids))
                  for _ in range(data.draw(st.integers(1, 3))))
    program = issue(Program("raw", target.name, tuple(symbols), cores))
    assert issue(program) is program        # what was issued issues as it is
    assert all(len(c) >= len(s) for c, s in zip(program.cores, cores))
    check_same(program, target, program_bound(program, target))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([(512, 8192), (512, 16384), (64, 3 * 1024), (100, 40000)]),
       st.lists(st.integers(-40, 400), max_size=400), st.randoms(use_true_random=False))
def test_l2_hits_and_victims_match_the_reference(geometry, lines, rng):
    """The engine's L2 (tags plus a recency order per set) hits exactly where
    ``reference.L2`` (tags plus access stamps) does, on line sequences with reuse,
    negative lines (tag -1 matches the reference's empty ways) and a few sets."""
    line_bytes, l2_bytes = geometry
    lines = lines + [rng.choice(lines) for _ in range(len(lines))] if lines else lines
    target = load_target("ascend910b").to_dict()
    target["l2"].update(line_bytes=line_bytes, bytes=l2_bytes)
    l2 = reference.L2(Target.from_dict(target))
    assert fast._engine()._l2_hits(line_bytes, l2_bytes, lines) == [l2.access(x) for x in lines]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([(512, 8192), (512, 16384), (64, 3 * 1024), (100, 40000)]),
       st.lists(st.lists(st.integers(0, 400), max_size=300), min_size=1, max_size=3),
       st.sampled_from([0, 1000, 2**32 - 300]), st.randoms(use_true_random=False))
def test_l2_line_table_hits_like_the_reference(geometry, runs, now, rng):
    """The engine's line-table L2 (a stamp per line, the lines of each set) hits exactly
    where ``reference.L2`` does, run after run on one buffer (stamps left by earlier
    runs count as absent), also when its stamps would wrap and the table is cleared."""
    line_bytes, l2_bytes = geometry
    runs = [r + [rng.choice(r) for _ in range(len(r))] if r else r for r in runs]
    target = load_target("ascend910b").to_dict()
    target["l2"].update(line_bytes=line_bytes, bytes=l2_bytes)
    want = []
    for lines in runs:
        l2 = reference.L2(Target.from_dict(target))
        want.append([l2.access(x) for x in lines])
    assert fast._engine()._l2_table_hits(line_bytes, l2_bytes, runs, now) == want


def _read_twice_program(lines: int, cores: int) -> Program:
    """Each core reads ``x`` (``lines`` rows of 512 B) twice."""
    symbols = (Symbol("x", float16, (lines, 256), "in"),)
    streams = []
    for _ in range(cores):
        b = StreamBuilder()
        for _ in range(2):
            b.emit(Op.COPY, Operand(Mem.VECTOR, 0, lines, 256, 256),
                   Operand(Mem.GM, 0, lines, 256, 256, gm=0), dtype=float16)
            b.emit(Op.BARRIER)
        streams.append(b)
    return _program(*streams, symbols=symbols)


def _four_set_target() -> Target:
    data = load_target("ascend910b").to_dict()
    data["l2"]["bytes"] = 4 * 16 * 512
    return Target.from_dict(data, "4-set L2")


@pytest.mark.parametrize("lines, all_hit", [(64, True), (65, False)])
def test_l2_without_evictions_and_with_them(lines, all_hit):
    """A 4-set L2 (64 lines): reading a tensor twice. Its 64 lines fit, so the engine
    keeps a bit per line (no set can ever evict) and the second pass hits throughout;
    one line more and the line table runs (the 17th line of set 0 evicts). Both engines
    agree either way, on one core and on two reading in turn."""
    target = _four_set_target()
    for cores in (1, 2):
        program = _read_twice_program(lines, cores)
        got = check_same(program, target, 0)
        second_pass = got.gm_read_bytes // (2 * cores)
        if cores == 1:
            assert (got.l2_hit_bytes == second_pass) is all_hit
            assert got.l2_hit_bytes <= second_pass


def test_l2_sets_where_the_lines_span_more_than_the_line_table(monkeypatch):
    """Lines more than TABLE_LINES apart (``y`` past an untouched 8 GiB tensor): the
    engine keeps the L2 by sets (tags and a recency order) and still agrees, timing the
    program itself. 17 lines of one set (of 512), read twice: every read misses."""
    data = load_target("ascend910b").to_dict()
    data["l2"]["bytes"] = 512 * 16 * 512
    target = Target.from_dict(data, "512-set L2")
    far = fast._engine().LIMITS["TABLE_LINES"]
    symbols = (Symbol("x", float16, (17 * 512, 256), "in"),
               Symbol("gap", float16, (far, 256), "tmp"), Symbol("y", float16, (1, 256), "in"))
    b = StreamBuilder()
    for _ in range(2):      # rows 512 lines apart: all in set 0
        b.emit(Op.COPY, Operand(Mem.VECTOR, 0, 17, 256, 512 * 256),
               Operand(Mem.GM, 0, 17, 256, 512 * 256, gm=0), dtype=float16)
        b.emit(Op.BARRIER)
    b.emit(Op.COPY, Operand(Mem.VECTOR, 0, 1, 256, 256), Operand(Mem.GM, 0, 1, 256, 256, gm=2),
           dtype=float16)
    program = _program(b, symbols=symbols)
    want = reference.simulate(program, target, 0, trace=True)
    monkeypatch.setattr(fast, "_reference", None)   # the engine must not hand it over
    got = fast.simulate(program, target, 0, trace=True)
    assert got.same_timing(want) and np.array_equal(got.trace, want.trace)
    assert got.dram_read_bytes == (2 * 17 + 1) * 512


def test_what_the_fast_engine_keeps_of_a_program_is_never_stale():
    """``fast`` keeps each program's prepared arrays for its next simulation: edits to
    the streams in place, non-contiguous streams and new programs are all seen."""
    target = TARGETS["ascend910b"]
    b = StreamBuilder()
    _copy_in(b)
    program = _program(b, symbols=SYMBOLS)
    first = check_same(program, target, 0)
    program.cores[0]["d_rows"][0] = program.cores[0]["a_rows"][0] = 32   # in place
    second = check_same(program, target, 0)
    assert second.gm_read_bytes == 2 * first.gm_read_bytes
    b2 = StreamBuilder()
    for _ in range(3):
        _copy_in(b2)
        b2.emit(Op.NOP)
    strided = Program("strided", target.name, SYMBOLS, (b2.array()[::2],))
    assert not strided.cores[0].flags.c_contiguous
    check_same(strided, target, 0)
    for rows in (8, 16, 24):                # new programs, ids possibly reused
        b3 = StreamBuilder()
        _copy_in(b3, rows)
        got = fast.simulate(_program(b3, symbols=SYMBOLS), target, 0)
        assert got.gm_read_bytes == rows * 64 * 2


# -- the static check: compiled and NumPy ------------------------------------------------


def _verdicts(program: Program, target: Target) -> tuple[bool, bool]:
    """(the compiled check passes, NumPy's check passes) for ``program``."""
    capacity, alignment = check._memories(target)
    sizes = np.array([s.size for s in program.symbols] or [0], dtype=np.int64)
    compiled = check._passes_compiled_check(program, capacity, alignment, sizes)
    try:
        check._check_with_numpy(program, target, capacity, alignment, sizes)
    except SimError:
        return compiled, False
    return compiled, True


CHECK_TARGETS = {**ALL_TARGETS, "mlu370": load_target("mlu370")}


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.sampled_from(sorted(CHECK_TARGETS)))
def test_compiled_check_agrees_with_numpy(data, target_name):
    """On random streams (odd and negative GM offsets, broadcast strides) and on the
    assembly tests' wild programs (any int64 field, any memory): the compiled check
    passes exactly the programs NumPy passes."""
    target = CHECK_TARGETS[target_name]
    program = data.draw(st.one_of(random_programs(ALL_TARGETS["ascend910b"]), wild_programs()))
    compiled, numpy = _verdicts(program, target)
    assert compiled == numpy


def test_compiled_check_sees_each_problem():
    """One bad operand, atomic flag or SYNC_ALL count in an otherwise good program fails
    both checks, with NumPy's message."""
    target = TARGETS["ascend910b"]

    def program(edit: Callable[[np.ndarray], None] | None = None, extra_sync: bool = False
                ) -> Program:
        a, b = StreamBuilder(), StreamBuilder()
        for builder in (a, b):
            _copy_in(builder)
            builder.emit(Op.VADD, *(Operand(Mem.VECTOR, 0, 16, 64, 64) for _ in range(3)),
                         dtype=float16)
            builder.emit(Op.SYNC_ALL)
        if extra_sync:
            b.emit(Op.SYNC_ALL)
        streams = [a.array(), b.array()]
        if edit is not None:
            edit(streams[1])
        return Program("edited", target.name, SYMBOLS, tuple(streams))

    assert _verdicts(program(), target) == (True, True)
    edits = {
        "empty shape": lambda s: s.__setitem__("d_rows", [0, 16, 0]),
        "outside its GM tensor": lambda s: s.__setitem__("a_addr", [4096 - 64 * 15, 0, 0]),
        "negative on-chip": lambda s: s.__setitem__("a_rs", [64, -64, 0]),
        "past the end": lambda s: s.__setitem__("b_addr", [0, 3 << 16, 0]),
        "not aligned": lambda s: s.__setitem__("d_addr", [0, 2, 0]),
        "names no declared": lambda s: s.__setitem__("gm", [1, -1, -1]),
        "COPY into GM": lambda s: s.__setitem__("flags", [8, 0, 0]),
    }
    for words, edit in edits.items():
        bad = program(edit)
        assert _verdicts(bad, target) == (False, False), words
        with pytest.raises(SimError, match=words) as checked:
            check.check_program(bad, target)
        for engine in ("cython", "reference"):    # the engine checks in its own pass
            with pytest.raises(SimError) as timed:
                timing.simulate(bad, target, bound_cycles=0, engine=engine)
            assert str(timed.value) == str(checked.value)
    assert _verdicts(program(extra_sync=True), target) == (False, False)
    with pytest.raises(SimError, match="core 1 has 2 SYNC_ALLs but core 0 has 1"):
        fast.simulate(program(extra_sync=True), target, 0, check=True)


# -- deadlocks and programs only the reference handles ------------------------------------


def _program(*streams: StreamBuilder, symbols: tuple[Symbol, ...] = ()) -> Program:
    return Program("hand", "ascend910b", symbols, tuple(s.array() for s in streams))


def _copy_in(b: StreamBuilder, rows: int = 16) -> None:
    b.emit(Op.COPY, Operand(Mem.VECTOR, 0, rows, 64, 64), Operand(Mem.GM, 0, rows, 64, 64, gm=0),
           dtype=float16)


SYMBOLS = (Symbol("x", float16, (64, 64), "in"),)


def _raised(engine: ModuleType, program: Program) -> BaseException:
    with pytest.raises(Exception) as info:
        engine.simulate(program, TARGETS["ascend910b"], 0, trace=True)
    return info.value


def assert_same_error(program: Program, kind: type[BaseException]) -> str:
    want, got = _raised(reference, program), _raised(fast, program)
    assert type(want) is type(got) is kind
    assert str(got) == str(want)
    return str(got)


def test_wait_before_its_set_deadlocks_in_both():
    ok, bad = StreamBuilder(), StreamBuilder()
    _copy_in(ok)
    _copy_in(bad)
    bad.emit(Op.WAIT_FLAG, pipe=Pipe.VEC, pipe2=Pipe.MTE2, event=3)
    bad.emit(Op.SET_FLAG, pipe=Pipe.MTE2, pipe2=Pipe.VEC, event=3)
    message = assert_same_error(_program(ok, bad, symbols=SYMBOLS), SimError)
    assert "core 1, instruction 1" in message and "MTE2->VEC event 3" in message


def test_wait_without_a_set_deadlocks_in_both():
    b = StreamBuilder()
    b.emit(Op.SET_FLAG, pipe=Pipe.MTE2, pipe2=Pipe.VEC, event=1)
    b.emit(Op.WAIT_FLAG, pipe=Pipe.VEC, pipe2=Pipe.MTE2, event=1)
    b.emit(Op.WAIT_FLAG, pipe=Pipe.VEC, pipe2=Pipe.MTE2, event=1)  # the second has no set
    assert "instruction 2" in assert_same_error(_program(b), SimError)


def test_first_deadlock_reached_is_the_one_reported():
    """Core 1 reaches its bad wait first (core 0 stalls behind a long copy queue)."""
    slow, fast_core = StreamBuilder(), StreamBuilder()
    for _ in range(40):
        _copy_in(slow, rows=64)
    slow.emit(Op.WAIT_FLAG, pipe=Pipe.MTE2, pipe2=Pipe.VEC, event=0)
    for _ in range(5):
        fast_core.emit(Op.NOP)
    fast_core.emit(Op.WAIT_FLAG, pipe=Pipe.VEC, pipe2=Pipe.CUBE, event=0)
    assert "core 1, instruction 5" in assert_same_error(
        _program(slow, fast_core, symbols=SYMBOLS), SimError)


def test_invalid_programs_fail_alike():
    """What the engine leaves to the reference raises the reference's errors."""
    no_path = StreamBuilder()   # GM -> L0A: ascend910b has no such path
    no_path.emit(Op.COPY, Operand(Mem.LEFT, 0, 16, 16, 16), Operand(Mem.GM, 0, 16, 16, 16, gm=0),
                 dtype=float16, pipe=Pipe.MTE2)
    assert "no data path GM->L0A" in assert_same_error(_program(no_path, symbols=SYMBOLS),
                                                       pypto.TargetError)
    empty_read = StreamBuilder()  # a GM read of no lines: the reference divides by zero
    empty_read.emit(Op.COPY, Operand(Mem.VECTOR, 0, 0, 8, 8), Operand(Mem.GM, 0, 0, 8, 8, 2, gm=0),
                    dtype=float16)
    assert_same_error(_program(empty_read, symbols=SYMBOLS), ZeroDivisionError)
    bad_dtype = StreamBuilder()
    bad_dtype.emit(Op.MMAD, Operand(Mem.ACC, 0, 16, 16, 16), Operand(Mem.LEFT, 0, 16, 16, 16),
                   Operand(Mem.RIGHT, 0, 16, 16, 16), dtype=float32, sdtype=int32)
    assert_same_error(_program(bad_dtype), pypto.TargetError)


def test_huge_sizes_are_left_to_the_reference():
    """A vector op of (2**31 - 1)**2 float32 elements: its byte count overflows an int64,
    so the reference engine (with Python integers) times it."""
    b = StreamBuilder()
    b.emit(Op.VADD, *(Operand(Mem.VECTOR, 0, 2**31 - 1, 2**31 - 1, 0, 0) for _ in range(3)),
           dtype=float32)
    program = _program(b)
    target = TARGETS["ascend910b"]
    want, got = reference.simulate(program, target, 0), fast.simulate(program, target, 0)
    assert got.same_timing(want) and got.cycles > 2**55


def test_far_addresses_are_left_to_the_reference(monkeypatch):
    """On the stress target (2 L2 sets) a read 2**40 elements in has an L2 tag beyond
    int32: the reference times it, with the same result."""
    b = StreamBuilder()
    b.emit(Op.COPY, Operand(Mem.VECTOR, 0, 4, 64, 64), Operand(Mem.GM, 2**40, 4, 64, 64, gm=0),
           dtype=float16)
    _copy_in(b)
    program, target = _program(b, symbols=SYMBOLS), ALL_TARGETS["stress"]
    want = reference.simulate(program, target, 0, trace=True)
    calls: list[tuple] = []

    def spy(*args: Any, **kwargs: Any) -> SimResult:
        calls.append(args)
        return want

    monkeypatch.setattr(reference, "simulate", spy)
    assert fast.simulate(program, target, 0, trace=True) is want and len(calls) == 1


def test_empty_programs():
    for program in (Program("none", "t", (), ()), _program(StreamBuilder(), StreamBuilder())):
        got = check_same(program, TARGETS["ascend310"], 0)
        assert got.cycles == TARGETS["ascend310"].launch_overhead_cycles


def test_hand_computed_single_copy():
    """One 16x64 fp16 GM read (2 KiB, 4 cold lines), by the rules of the reference."""
    b = StreamBuilder()
    _copy_in(b)
    target = TARGETS["ascend910b"]
    path = target.path("GM", "UB")
    got = check_same(_program(b, symbols=SYMBOLS), target, 0)
    occupy = math.ceil(2048 / path.bytes_per_cycle)   # all misses: at the path's GM rate
    dram = math.ceil(4 * target.l2_line_bytes / target.dram_bytes_per_cycle)
    end = max(occupy, dram) + path.latency + target.l2_miss_latency
    assert got.cycles == target.launch_overhead_cycles + end
    assert (got.gm_read_bytes, got.l2_hit_bytes) == (2048, 0)
    assert (got.dram_read_bytes, got.dram_write_bytes) == (4 * target.l2_line_bytes, 0)
    assert got.trace is not None
    assert got.trace.tolist() == [(0, 0, Pipe.MTE2, Op.COPY, 0, end)]


# -- the guarded import -----------------------------------------------------------------


def test_extension_is_built_and_used():
    assert timing.engine_name() == "cython"
    assert fast._engine().OK == 0


def test_missing_extension_falls_back_to_the_reference_once():
    b = StreamBuilder()
    _copy_in(b)
    program, target = _program(b, symbols=SYMBOLS), TARGETS["ascend910b"]
    want = fast.simulate(program, target, 0)
    with native.not_built("pypto.sim._engine"):
        with pytest.warns(RuntimeWarning, match="pip install -e") as caught:
            assert timing.engine_name() == "reference"
            first = timing.simulate(program, target, bound_cycles=0)
            again = timing.simulate(program, target, bound_cycles=0)
    assert len(caught) == 1
    assert first.same_timing(want) and again.same_timing(want)


def test_the_switch_selects_the_reference_engine():
    with native.force_python():
        assert timing.engine_name() == "reference"
    assert timing.engine_name() == "cython"


def test_importing_pypto_does_not_load_the_engine():
    probe = ("import sys, pypto, pypto.sim.timing, pypto.sim.fast; "
             "print('pypto.sim._engine' in sys.modules)")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.strip() == "False"
