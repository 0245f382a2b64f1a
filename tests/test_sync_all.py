"""SYNC_ALL (every core meets) and atomic copies into GM in the timing engines: the
reference's rules by hand, the Cython engine cycle for cycle on random programs, and the
static checks that reject programs whose cores would never meet."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.codegen.asm import parse, print_program
from pypto.codegen.isa import F_ATOMIC, Mem, Op, Pipe
from pypto.codegen.memories import memory_map
from pypto.codegen.program import Operand, Program, StreamBuilder, Symbol
from pypto.errors import SimError
from pypto.ir.dtypes import float16, float32
from pypto.schedule_space import default_schedule
from pypto.sim import fast, reference
from pypto.sim.check import check_program
from pypto.sim.hazards import find_hazards
from pypto.sim.result import SimResult
from pypto.sim.roofline import program_bound, workload_bound
from pypto.sim.timing import simulate
from pypto.targets import Target, load_target
from tests.test_engine_equality import ALL_TARGETS, check_same, random_programs

TARGET = load_target("ascend910b")
SYMBOLS = (Symbol("x", float16, (256, 64), "in"), Symbol("y", float16, (256, 64), "out"))


def _program(*streams: StreamBuilder) -> Program:
    return Program("meet", "ascend910b", SYMBOLS, tuple(s.array() for s in streams))


def _read(b: StreamBuilder, rows: int) -> None:
    b.emit(Op.COPY, Operand(Mem.VECTOR, 0, rows, 64, 64), Operand(Mem.GM, 0, rows, 64, 64, gm=0),
           dtype=float16)


def _write(b: StreamBuilder, flags: int = 0, dst: Mem = Mem.GM) -> None:
    d = Operand(Mem.GM, 0, 16, 64, 64, gm=1) if dst == Mem.GM else Operand(dst, 0, 16, 64, 64)
    b.emit(Op.COPY, d, Operand(Mem.VECTOR, 0, 16, 64, 64), dtype=float16, flags=flags)


def _no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make sure the Cython engine times the program itself."""
    def refuse(*args: Any, **kwargs: Any) -> SimResult:
        raise AssertionError("the Cython engine fell back to the reference")

    monkeypatch.setattr(reference, "simulate", refuse)


# -- the rule, by hand ------------------------------------------------------------------


def test_two_cores_resume_together_after_the_slower_arrives(monkeypatch):
    slow, quick = StreamBuilder(), StreamBuilder()
    _read(slow, 256)              # a 32 KiB read: core 0 arrives late
    slow.emit(Op.SYNC_ALL)
    slow.emit(Op.NOP)
    quick.emit(Op.NOP)
    quick.emit(Op.SYNC_ALL)
    quick.emit(Op.NOP)
    program = _program(slow, quick)
    got = check_same(program, TARGET, 0)

    path = TARGET.path("GM", "UB")
    read_end = (max(math.ceil(32768 / path.bytes_per_cycle),
                    math.ceil(32768 / TARGET.dram_bytes_per_cycle))
                + path.latency + TARGET.l2_miss_latency)
    release = read_end + TARGET.sync_all_cycles
    assert got.trace is not None
    assert got.trace.tolist() == [
        (0, 0, Pipe.MTE2, Op.COPY, 0, read_end),
        (0, 1, Pipe.SCALAR, Op.SYNC_ALL, read_end, release),   # arrival: the read drained
        (0, 2, Pipe.SCALAR, Op.NOP, release, release + 1),
        (1, 0, Pipe.SCALAR, Op.NOP, 0, 1),
        (1, 1, Pipe.SCALAR, Op.SYNC_ALL, 1, release),           # arrival at its issue
        (1, 2, Pipe.SCALAR, Op.NOP, release, release + 1),
    ]
    assert got.cycles == TARGET.launch_overhead_cycles + release + 1
    assert list(got.core_cycles) == [release + 1, release + 1]
    _no_fallback(monkeypatch)
    assert fast.simulate(program, TARGET, 0).same_timing(got)


def test_after_the_release_every_pipe_is_free():
    """A copy after the meeting starts at the release, on a pipe that was busy before."""
    cores = [StreamBuilder() for _ in range(3)]
    for i, b in enumerate(cores):
        _read(b, 16 * (i + 1))
        b.emit(Op.SYNC_ALL)
        _read(b, 16)
    got = check_same(_program(*cores), TARGET, 0)
    assert got.trace is not None
    meet = got.trace[got.trace["op"] == Op.SYNC_ALL]
    release = int(meet["end"][0])
    assert (meet["end"] == release).all()
    assert release == int(meet["start"].max()) + TARGET.sync_all_cycles
    after = got.trace[got.trace["index"] == 2]
    assert (after["start"] == release).all()


def test_one_core_is_a_barrier_that_takes_sync_all_cycles():
    def stream(op: Op) -> StreamBuilder:
        b = StreamBuilder()
        _read(b, 64)
        b.emit(op)
        b.emit(Op.NOP)
        return b

    barrier = check_same(_program(stream(Op.BARRIER)), TARGET, 0).trace
    meet = check_same(_program(stream(Op.SYNC_ALL)), TARGET, 0).trace
    assert barrier is not None and meet is not None
    drained = int(barrier["start"][1])
    assert meet["start"][1] == drained == meet["end"][0]   # both wait for the read
    assert barrier["end"][1] == drained + 1 and barrier["start"][2] == drained + 2
    assert meet["end"][1] == drained + TARGET.sync_all_cycles
    assert meet["start"][2] == drained + TARGET.sync_all_cycles


def test_several_meetings_pair_up_in_order():
    """The k-th SYNC_ALL of each core meets the k-th of the others."""
    a, b = StreamBuilder(), StreamBuilder()
    for rows in (16, 128, 32):
        _read(a, rows)
        a.emit(Op.SYNC_ALL)
        b.emit(Op.SYNC_ALL)
        _read(b, 160 - rows)
    got = check_same(_program(a, b), TARGET, 0)
    assert got.trace is not None
    meets = got.trace[got.trace["op"] == Op.SYNC_ALL]
    ends = sorted(set(meets["end"].tolist()))
    assert len(ends) == 3
    for k, end in enumerate(ends):
        pair = meets[meets["end"] == end]
        assert len(pair) == 2 and len(set(pair["index"].tolist())) == 2
        assert end == int(pair["start"].max()) + TARGET.sync_all_cycles
        assert k == 0 or end > ends[k - 1]


@pytest.mark.parametrize("name", ["ascend910b", "ascend310", "mlu370"])
def test_every_target_names_its_cost(name):
    target = load_target(name)
    assert isinstance(target.sync_all_cycles, int) and target.sync_all_cycles > 0
    data = target.to_dict()
    assert data["sync"]["sync_all_cycles"] == target.sync_all_cycles
    data["sync"]["sync_all_cycles"] += 1
    assert Target.from_dict(data).key != target.key
    del data["sync"]["sync_all_cycles"]
    with pytest.raises(pypto.TargetError, match="sync.sync_all_cycles"):
        Target.from_dict(data)


# -- atomic copies ------------------------------------------------------------------------


def test_an_atomic_copy_is_timed_as_a_plain_gm_write():
    plain, atomic = StreamBuilder(), StreamBuilder()
    for b, flags in ((plain, 0), (atomic, F_ATOMIC)):
        _read(b, 64)
        _write(b, flags)
        _write(b, flags)
    want = check_same(_program(plain), TARGET, 0)
    got = check_same(_program(atomic), TARGET, 0)
    assert got.same_timing(want)
    assert got.trace is not None and want.trace is not None
    assert np.array_equal(got.trace, want.trace)
    check_program(_program(atomic), TARGET)


@pytest.mark.parametrize("dst", [Mem.STAGE, Mem.VECTOR])
def test_an_atomic_copy_into_a_core_memory_is_an_error(dst):
    b = StreamBuilder()
    _read(b, 16)
    _write(b, F_ATOMIC, dst=dst)
    with pytest.raises(SimError, match=r"core 0, instruction 1 \(COPY\.F16\.ATOMIC "
                                       rf"{memory_map(TARGET).names[dst]}\[.*\]\): .*COPY "
                                       "into GM"):
        check_program(_program(b), TARGET)
    with pytest.raises(SimError, match="COPY into GM"):
        simulate(_program(b), TARGET)


def test_an_atomic_flag_on_another_instruction_is_an_error():
    b = StreamBuilder()
    b.emit(Op.VADD, *[Operand(Mem.VECTOR, 0, 1, 16, 16)] * 3, dtype=float32, flags=F_ATOMIC)
    with pytest.raises(SimError, match=r"instruction 0 \(VADD\.F32\.ATOMIC .*COPY into GM"):
        check_program(_program(b), TARGET)


# -- cores that would not meet ------------------------------------------------------------


def test_unequal_counts_are_rejected_by_the_check_and_both_engines():
    cores = [StreamBuilder() for _ in range(4)]
    for i, b in enumerate(cores):
        for _ in range(1 if i == 3 else 2):
            b.emit(Op.NOP)
            b.emit(Op.SYNC_ALL)
    program = _program(*cores)
    message = ("meet: core 3 has 1 SYNC_ALL but core 0 has 2: every core must meet at each "
               "SYNC_ALL")
    with pytest.raises(SimError) as checked:
        check_program(program, TARGET)
    assert str(checked.value) == message
    for engine in (reference, fast):
        with pytest.raises(SimError) as timed:
            engine.simulate(program, TARGET, 0)
        assert str(timed.value) == message


def test_a_core_without_instructions_cannot_meet_the_others():
    b = StreamBuilder()
    b.emit(Op.SYNC_ALL)
    with pytest.raises(SimError, match="core 1 has 0 SYNC_ALLs but core 0 has 1"):
        check_program(_program(b, StreamBuilder()), TARGET)


# -- random programs and codegen's split-K ------------------------------------------------


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.sampled_from(sorted(ALL_TARGETS)))
def test_random_programs_with_meetings(data, target_name):
    """Cython == reference on random programs where every core meets the others 1-3
    times; the hazard check reads the trace."""
    target = ALL_TARGETS[target_name]
    program = data.draw(random_programs(target, sync_alls=st.integers(1, 3)))
    got = check_same(program, target, program_bound(program, target))
    assert got.trace is not None
    counts = {int((stream["op"] == Op.SYNC_ALL).sum()) for stream in program.cores}
    assert len(counts) == 1
    meets = got.trace[got.trace["op"] == Op.SYNC_ALL]
    for end in set(meets["end"].tolist()):   # each meeting releases every core at once
        assert (meets["end"] == end).sum() == len(program.cores)
    find_hazards(program, got.trace)


def test_programs_with_meetings_and_atomic_copies_print_and_parse_back():
    cores = [StreamBuilder() for _ in range(2)]
    for b in cores:
        _read(b, 16)
        b.emit(Op.SYNC_ALL)
        _write(b, F_ATOMIC)
    program = _program(*cores)
    text = print_program(program)
    assert "    SYNC_ALL\n" in text and "COPY.F16.ATOMIC GM[y]" in text
    assert parse(text) == program and print_program(parse(text)) == text


@pytest.mark.parametrize("target", ["ascend910b", "ascend310"])
def test_split_k_programs_agree_and_are_race_free(target):
    compiled = pypto.kernel(pypto.matmul).lower(
        pypto.spec((64, 4096), "float16"), pypto.spec((4096, 64), "float16"), target=target)
    wl = compiled.workloads[0]
    cores = min(4, compiled.target.cube_cores)
    schedule = default_schedule(wl, compiled.target).replace(split_k=4, cores=cores)
    compiled = compiled.with_schedule(0, schedule)
    program = compiled.programs[0]
    assert any((stream["op"] == Op.SYNC_ALL).any() for stream in program.cores)
    assert any(((stream["flags"] & F_ATOMIC) != 0).any() for stream in program.cores)
    got = check_same(program, compiled.target, workload_bound(wl, compiled.target))
    assert got.trace is not None and find_hazards(program, got.trace) == []
    assert compiled.simulate(hazards=True).hazards == []
