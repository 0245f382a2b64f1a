"""The FIX pipe's drain (L0C -> GM / UB): it reads the fp32 accumulator and writes the
output type, so GM traffic counts output bytes while the pipe's time counts the
accumulator bytes it reads (the 118 B/cycle of ``ascend910b.toml`` is a read rate)."""

from __future__ import annotations

import math
import warnings

import pytest

import pypto
from pypto.codegen.isa import Mem, Op, Pipe
from pypto.codegen.program import Operand, Program, StreamBuilder, Symbol
from pypto.ir.dtypes import float16, float32
from pypto.sim import fast, reference
from pypto.sim.roofline import workload_bound
from pypto.targets import load_target

TARGET = load_target("ascend910b")
M, N = 128, 256


def drain_program(out_dtype, then_read: bool = False) -> Program:  # type: ignore[no-untyped-def]
    """One M x N fp32 accumulator tile drained into a [M, 2N] output tensor (a row
    stride wider than the tile, so the L2 lines depend on the element size); then,
    optionally, the same region read back into UB."""
    b = StreamBuilder()
    out = Operand(Mem.GM, 0, M, N, 2 * N, 1, gm=0)
    b.emit(Op.COPY, out, Operand(Mem.ACC, 0, M, N, N), dtype=out_dtype, sdtype=float32)
    if then_read:
        b.emit(Op.BARRIER)
        b.emit(Op.COPY, Operand(Mem.VECTOR, 0, M, N, N), Operand(Mem.GM, 0, M, N, 2 * N, 1, gm=0),
               dtype=out_dtype)
    symbols = (Symbol("c", out_dtype, (M, 2 * N), "out"),)
    return Program("drain", TARGET.name, symbols, (b.array(),))


def both(program: Program):  # type: ignore[no-untyped-def]
    ref = reference.simulate(program, TARGET, 0)
    cy = fast.simulate(program, TARGET, 0)
    assert cy.same_timing(ref)
    return ref


@pytest.mark.parametrize("out_dtype", [float16, float32])
def test_drain_writes_output_bytes_and_reads_accumulator_bytes(out_dtype):
    r = both(drain_program(out_dtype))
    written = M * N * out_dtype.itemsize
    assert r.gm_write_bytes == written
    assert r.path_bytes[Mem.ACC, Mem.GM] == written
    # the pipe's time: the fp32 read at the path rate, plus the per-row cost, whatever
    # the output type
    path = TARGET.path("L0C", "GM")
    read_cycles = math.ceil(M * N * 4 / path.bytes_per_cycle + M * path.row_cycles)
    dram = math.ceil(written / TARGET.dram_bytes_per_cycle)
    assert r.dram_write_bytes == written
    assert r.pipe_busy[0, Pipe.FIX] == max(read_cycles, dram)


@pytest.mark.parametrize("out_dtype", [float16, float32])
def test_drained_lines_are_the_output_tensors(out_dtype):
    """Reading back what was just drained hits L2 on every line: the drain touched the
    output tensor's own lines (at its element size), not lines twice as far apart."""
    r = both(drain_program(out_dtype, then_read=True))
    assert r.gm_read_bytes == M * N * out_dtype.itemsize
    assert r.l2_hit_bytes == r.gm_read_bytes


def test_drain_to_ub_counts_output_bytes():
    b = StreamBuilder()
    b.emit(Op.COPY, Operand(Mem.VECTOR, 0, 64, 128, 128), Operand(Mem.ACC, 0, 64, 128, 128),
           dtype=float16, sdtype=float32)
    program = Program("drain_ub", TARGET.name, (), (b.array(),))
    r = both(program)
    assert r.path_bytes[Mem.ACC, Mem.VECTOR] == 64 * 128 * 2
    path = TARGET.path("L0C", "UB")
    assert r.pipe_busy[0, Pipe.FIX] == math.ceil(64 * 128 * 4 / path.bytes_per_cycle
                                                 + 64 * path.row_cycles)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_small_gemm_writes_its_output_once_at_its_dtype(dtype):
    n = 128
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = pypto.kernel(pypto.matmul).lower(pypto.spec((n, n), dtype),
                                                    pypto.spec((n, n), dtype))
    out_itemsize = 2 if dtype == "float16" else 4
    r = compiled.simulate()
    assert r.gm_write_bytes == n * n * out_itemsize
    assert r.bytes_by_path()["L0C->GM"] == n * n * out_itemsize
    ref = reference.simulate(compiled.programs[0], compiled.target,
                             workload_bound(compiled.workloads[0], compiled.target))
    assert r.same_timing(ref)
