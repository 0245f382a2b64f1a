"""GM races across cores (and across the pipes of one core): the happens-before check
(``races.find_races``: only ``SYNC_ALL`` orders cores) and the timed one
(``hazards.find_hazards``), on split-K programs with their meeting removed, on programs
mutated so that two cores write one block, on hand-built streams, and against a brute
force over element sets on random programs."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.codegen.isa import F_ATOMIC, Mem, Op, Pipe
from pypto.codegen.program import Operand, Program, StreamBuilder, Symbol
from pypto.compile.compiled import Compiled
from pypto.ir.dtypes import float16
from pypto.schedule_space import default_schedule, space_for, validate
from pypto.sim.gm_conflicts import ATOMIC, READ, WRITE, conflicting_pairs, gm_accesses
from pypto.sim.hazards import find_hazards
from pypto.sim.races import find_races
from pypto.sim.timing import simulate
from pypto.targets import Target, available_targets, load_target
from tests.test_split_k import _split_point

TARGET = load_target("ascend910b")
SYMBOLS = (Symbol("x", float16, (64, 64), "in"), Symbol("y", float16, (64, 64), "out"))
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# "core 0 MTE3 instruction 3 (COPY.F16 GM[out0][...], UB[...]), a write, and ..."
ACCESS = r"core (\d+) (\w+) instruction (\d+) \(([^()]*)\), (a read|a write|an atomic add)"
PAIR = re.compile(rf"{ACCESS}, and {ACCESS}, both touch (\w+) bytes \[0x([0-9a-f]+), "
                  r"0x([0-9a-f]+)\)")


def _symbol(program, name: str) -> int:  # type: ignore[no-untyped-def]
    return [s.name for s in program.symbols].index(name)


def _lower(m: int, n: int, k: int, target: Target = TARGET, **knobs: int) -> Compiled:
    compiled = pypto.kernel(pypto.matmul).lower(pypto.spec((m, k), "float16"),
                                                pypto.spec((k, n), "float16"), target=target)
    wl = compiled.workloads[0]
    schedule = default_schedule(wl, compiled.target).replace(**knobs)
    assert not validate(wl, schedule, compiled.target)
    return compiled.with_schedule(0, schedule)


def _without_sync_all(program: Program) -> Program:
    """The program with its meetings removed (they carry no flags, so the flags stay
    paired as they were)."""
    return Program(program.name, program.target, program.symbols,
                   tuple(stream[stream["op"] != Op.SYNC_ALL] for stream in program.cores))


def _elements(row: np.void, prefix: str) -> set[int]:
    """The GM elements operand ``prefix`` of ``row`` touches, by brute force."""
    addr, rows, cols = (int(row[f"{prefix}_{f}"]) for f in ("addr", "rows", "cols"))
    rs, cs = int(row[f"{prefix}_rs"]), int(row[f"{prefix}_cs"])
    return {addr + r * rs + c * cs for r in range(rows) for c in range(cols)}


def _gm_operand(row: np.void) -> str:
    return "d" if row["d_mem"] == Mem.GM else "a"


def _parse(report: str) -> tuple:
    found = PAIR.search(report)
    assert found, report
    g = found.groups()
    return ((int(g[0]), g[1], int(g[2]), g[4]), (int(g[5]), g[6], int(g[7]), g[9]), g[10],
            int(g[11], 16), int(g[12], 16))


def _check_report(program: Program, report: str) -> tuple[int, int]:
    """The report names two accesses whose element sets both hold the bytes it names;
    returns their cores."""
    first, second, tensor, lo, hi = _parse(report)
    itemsize = program.symbols[_symbol(program, tensor)].dtype.itemsize
    assert lo < hi and lo % itemsize == 0 and hi % itemsize == 0
    named = set(range(lo // itemsize, hi // itemsize))
    for core, pipe, index, _ in (first, second):
        row = program.cores[core][index]
        assert Pipe(int(row["pipe"])).name == pipe
        assert named <= _elements(row, _gm_operand(row)), report
    return first[0], second[0]


# -- split-K: the meeting is what orders the clearing and the adds ------------------------


@pytest.mark.parametrize("split_k", [4, 16])
def test_split_k_without_its_sync_all_races(split_k):
    compiled = _lower(128, 128, 8192, cores=split_k, split_k=split_k)
    program = compiled.programs[0]
    assert find_races(program) == []
    assert compiled.simulate(hazards=True).hazards == []

    mutated = _without_sync_all(program)
    races = find_races(mutated, limit=1000)
    across = [r for r in races if r.startswith("GM race with another core with no SYNC_ALL")]
    assert across, races
    pairs = set()
    for report in across:
        first, second, tensor, _, _ = _parse(report)
        _check_report(mutated, report)
        assert tensor == "out0" and first[0] != second[0]
        clear, add = sorted((first, second), key=lambda access: access[3] != "a write")
        assert (clear[3], add[3]) == ("a write", "an atomic add")
        pairs.add((clear[0], add[0]))
    # each core's add races with the clearing done by every other core
    clears = {c for c, stream in enumerate(program.cores)
              if ((stream["op"] == Op.COPY) & (stream["d_mem"] == Mem.GM)
                  & (stream["flags"] & F_ATOMIC == 0)).any()}
    assert pairs == {(a, b) for a in clears for b in range(split_k) if a != b}
    # within a core the meeting also drained the clearing (MTE3) before the adds (FIX)
    assert any(r.startswith("GM race with a pipe of the same core") for r in races)


def test_the_report_names_cores_instructions_and_bytes():
    mutated = _without_sync_all(_lower(128, 128, 8192, m1=128, n1=128, cores=4,
                                       split_k=4).programs[0])
    report = next(r for r in find_races(mutated) if "another core" in r)
    assert report.startswith(
        "GM race with another core with no SYNC_ALL between them: core 0 MTE3 instruction ")
    assert "(COPY.F16 GM[out0][0:1x" in report and "), a write, and core 1 FIX instruction " \
        in report and "(COPY.F16.F32.ATOMIC GM[out0][0:128x128,128,1], L0C[" in report
    assert report.endswith("an atomic add, both touch out0 bytes [0x0, 0x4000) "
                           "(elements out0[0, 0] to out0[63, 127])"), report


def test_atomic_adds_need_no_order_among_themselves_but_do_with_plain_accesses():
    def program(kinds: list[str], meet: bool = False) -> Program:
        cores: list[StreamBuilder] = []
        for kind in kinds:
            b = StreamBuilder()
            if meet and len(cores):
                b.emit(Op.SYNC_ALL)
            gm = Operand(Mem.GM, 0, 16, 64, 64, gm=1)
            ub = Operand(Mem.VECTOR, 0, 16, 64, 64)
            if kind == "read":
                b.emit(Op.COPY, ub, gm, dtype=float16)
            else:
                b.emit(Op.COPY, gm, ub, dtype=float16, flags=F_ATOMIC if kind == "add" else 0)
            if meet and not len(cores):
                b.emit(Op.SYNC_ALL)
            cores.append(b)
        return Program("p", "ascend910b", SYMBOLS, tuple(b.array() for b in cores))

    assert find_races(program(["add", "add", "add"])) == []
    assert find_races(program(["read", "read"])) == []
    for kinds in (["add", "read"], ["add", "write"], ["write", "write"], ["read", "write"]):
        races = find_races(program(kinds))
        assert len(races) == 1 and _check_report(program(kinds), races[0]) == (0, 1), races
        assert find_races(program(kinds, meet=True)) == []


# -- two cores on one block -----------------------------------------------------------------


def _drains(program: Program) -> list[int]:
    """The index of each core's (one) drain into GM."""
    out = []
    for stream in program.cores:
        drains = np.flatnonzero((stream["op"] == Op.COPY) & (stream["d_mem"] == Mem.GM))
        assert len(drains) == 1
        out.append(int(drains[0]))
    return out


def _move_drain(program: Program, core: int, addr: int) -> Program:
    streams = [stream.copy() for stream in program.cores]
    streams[core]["d_addr"][_drains(program)[core]] = addr
    return Program(program.name, program.target, program.symbols, tuple(streams))


def test_two_cores_writing_one_block_race():
    """Four 128x128 blocks on four cores: the blocks side by side in a row have
    interleaved bounding intervals and are told apart; a core sent to write another's
    block, or one column into it, races with it on exactly those bytes."""
    program = _lower(256, 256, 64, m1=128, n1=128, cores=4, split_k=1, swizzle=1).programs[0]
    assert find_races(program) == []
    drains = _drains(program)
    assert int(program.cores[1]["d_addr"][drains[1]]) == 128  # block (0, 1)

    same = _move_drain(program, 1, 0)
    races = find_races(same)
    assert len(races) == 1 and _check_report(same, races[0]) == (0, 1)
    assert races[0].endswith("a write, both touch out0 bytes [0x0, 0x100) "
                             "(elements out0[0, 0] to out0[0, 127])"), races
    one_column = _move_drain(program, 1, 127)
    races = find_races(one_column)
    assert len(races) == 1 and _check_report(one_column, races[0]) == (0, 1)
    assert races[0].endswith("out0 bytes [0xfe, 0x100) (elements out0[0, 127] to "
                             "out0[0, 127])"), races
    past = _move_drain(program, 1, 256 * 128)  # block (1, 0), core 2's
    assert len(find_races(past)) == 1 and "core 1" in find_races(past)[0] \
        and "core 2" in find_races(past)[0]


def test_two_cores_reading_one_input_do_not_race():
    """Four blocks down M on four cores: every core reads all of B."""
    compiled = _lower(512, 128, 256, m1=128, n1=128, cores=4, split_k=1)
    program = compiled.programs[0]
    acc = gm_accesses(program)
    b_reads = acc[(acc["sym"] == _symbol(program, "b")) & (acc["kind"] == READ)]
    assert set(b_reads["core"].tolist()) == {0, 1, 2, 3}
    assert (b_reads["lo"] == b_reads["lo"][0]).sum() >= 4  # the same bytes, on every core
    assert find_races(program) == []
    assert compiled.simulate(hazards=True).hazards == []


# -- one core: GM ordered by flags or a barrier --------------------------------------------


@pytest.mark.parametrize("order", ["none", "flag", "barrier"])
def test_one_core_writing_then_reading_gm(order):
    """MTE3 writes GM, MTE2 reads it back: the flags (or a barrier) must order them."""
    b = StreamBuilder()
    b.emit(Op.COPY, Operand(Mem.GM, 0, 16, 64, 64, gm=1), Operand(Mem.VECTOR, 0, 16, 64, 64),
           dtype=float16)
    if order == "flag":
        b.emit(Op.SET_FLAG, pipe=Pipe.MTE3, pipe2=Pipe.MTE2, event=0)
        b.emit(Op.WAIT_FLAG, pipe=Pipe.MTE2, pipe2=Pipe.MTE3, event=0)
    elif order == "barrier":
        b.emit(Op.BARRIER)
    b.emit(Op.COPY, Operand(Mem.VECTOR, 0x8000, 8, 64, 64), Operand(Mem.GM, 512, 8, 64, 64, gm=1),
           dtype=float16)
    program = Program("p", "ascend910b", SYMBOLS, (b.array(),))
    races = find_races(program)
    if order == "none":
        assert len(races) == 1 and races[0].startswith(
            "GM race with a pipe of the same core with no flag ordering them: core 0 MTE3 "
            "instruction 0 (COPY.F16 GM[y][0:16x64,64,1], UB[0x0:16x64,64,1]), a write, and "
            "core 0 MTE2 instruction 1"), races
        assert races[0].endswith("y bytes [0x400, 0x800) (elements y[8, 0] to y[15, 63])")
        trace = simulate(program, TARGET, trace=True).trace
        assert trace is not None and find_hazards(program, trace)
    else:
        assert races == []
        assert simulate(program, TARGET, hazards=True).hazards == []


# -- the timed check ------------------------------------------------------------------------


def test_timed_check_sees_two_cores_writing_at_once():
    def program(meet: bool) -> Program:
        cores = [StreamBuilder() for _ in range(2)]
        for i, b in enumerate(cores):
            if meet and i == 1:
                b.emit(Op.SYNC_ALL)
            b.emit(Op.COPY, Operand(Mem.GM, 64 * i, 32, 64, 64, gm=1),
                   Operand(Mem.VECTOR, 0, 32, 64, 64), dtype=float16)
            if meet and i == 0:
                b.emit(Op.SYNC_ALL)
        return Program("p", "ascend910b", SYMBOLS, tuple(b.array() for b in cores))

    hazards = simulate(program(False), TARGET, hazards=True).hazards
    assert len(hazards) == 1 and hazards[0].startswith("GM hazard: cycles [0, "), hazards
    assert _check_report(program(False), hazards[0]) == (0, 1)
    assert hazards[0].endswith("y bytes [0x80, 0x1000) (elements y[1, 0] to y[31, 63])")
    assert simulate(program(True), TARGET, hazards=True).hazards == []


# -- every split-K program is clean ---------------------------------------------------------


@SETTINGS
@given(st.data(), st.integers(1, 160), st.integers(1, 160), st.integers(64, 2000),
       st.sampled_from(["float16", "float32", "int8"]), st.sampled_from(available_targets()))
def test_generated_split_k_programs_are_race_free(data, m, n, k, dtype, target_name):
    target = load_target(target_name)
    compiled = pypto.kernel(pypto.matmul).lower(pypto.spec((m, k), dtype),
                                                pypto.spec((k, n), dtype), target=target)
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    s = _split_point(space_for(compiled.workloads[0], target), rng, target.fractal(dtype)[1])
    compiled = compiled.with_schedule(0, s)
    program = compiled.programs[0]
    assert find_races(program) == []
    assert compiled.simulate(hazards=True).hazards == []
    acc = gm_accesses(program)
    adds, clears = acc[acc["kind"] == ATOMIC], acc[acc["kind"] == WRITE]
    assert len(adds) and len(clears)
    # the meeting is what orders the clearing and the adds: across cores, and on one
    # core when they run on different pipes (MTE3 and FIX; on MLU both are MTE3's)
    if len(program.cores) > 1 or set(adds["pipe"].tolist()) != set(clears["pipe"].tolist()):
        assert find_races(_without_sync_all(program))


# -- the pair finder against brute force ----------------------------------------------------


@st.composite
def gm_programs(draw: st.DrawFn) -> Program:
    """1-3 cores of copies between UB and GM (reads, writes, atomic adds) over small
    regions of two tensors with any strides (negative and zero too), and 0-2 meetings."""
    meetings = draw(st.integers(0, 2))
    cores = []
    for _ in range(draw(st.integers(1, 3))):
        b = StreamBuilder()
        copies = draw(st.integers(0, 6))
        meet_at = sorted(draw(st.lists(st.integers(0, copies), min_size=meetings,
                                       max_size=meetings)))
        for i in range(copies + 1):
            for _ in range(meet_at.count(i)):
                b.emit(Op.SYNC_ALL)
            if i == copies:
                break
            rows, cols = draw(st.integers(1, 5)), draw(st.integers(1, 7))
            gm = Operand(Mem.GM, draw(st.integers(0, 80)), rows, cols,
                         draw(st.integers(-12, 12)), draw(st.integers(-4, 4)),
                         gm=draw(st.integers(0, 1)))
            ub = Operand(Mem.VECTOR, 0, rows, cols, cols)
            kind = draw(st.sampled_from(["read", "write", "add"]))
            if kind == "read":
                b.emit(Op.COPY, ub, gm, dtype=float16)
            else:
                b.emit(Op.COPY, gm, ub, dtype=float16, flags=F_ATOMIC if kind == "add" else 0)
        cores.append(b)
    return Program("random", "ascend910b", SYMBOLS, tuple(b.array() for b in cores))


def _brute_pairs(program: Program, by_epoch: bool) -> dict[tuple, set[int]]:
    """(core, index, core, index) -> common elements, of every conflicting pair."""
    seen = []
    for core, stream in enumerate(program.cores):
        epoch = 0
        for index, row in enumerate(stream):
            if row["op"] == Op.SYNC_ALL:
                epoch += 1
                continue
            prefix = _gm_operand(row)
            kind = READ if prefix == "a" else (ATOMIC if row["flags"] & F_ATOMIC else 1)
            seen.append((core, index, int(row["pipe"]), epoch, int(row["gm"]), kind,
                         _elements(row, prefix)))
    out = {}
    for x, a in enumerate(seen):
        for b in seen[x + 1:]:
            if (a[0], a[2]) == (b[0], b[2]) or a[4] != b[4] or (by_epoch and a[3] != b[3]):
                continue
            if (a[5], b[5]) == (ATOMIC, ATOMIC) or (a[5], b[5]) == (READ, READ):
                continue
            common = a[6] & b[6]
            if common:
                out[(a[0], a[1], b[0], b[1])] = common
    return out


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(gm_programs(), st.booleans())
def test_conflicting_pairs_are_exactly_the_brute_force_ones(program, by_epoch):
    want = _brute_pairs(program, by_epoch)
    acc = gm_accesses(program)
    pairs = conflicting_pairs(acc, by_epoch=by_epoch)
    got = {}
    for p in range(len(pairs)):
        i, j = pairs.first[p], pairs.second[p]
        key = (int(acc["core"][i]), int(acc["index"][i]), int(acc["core"][j]),
               int(acc["index"][j]))
        got[key] = set(range(int(pairs.lo[p]), int(pairs.hi[p])))
    assert set(got) == set(want)
    for key, run in got.items():
        assert run and run <= want[key], (key, run, want[key])
    if by_epoch:  # no flags: every such pair is a race, each reported once
        races = [r for r in find_races(program, limit=10**6) if r.startswith("GM race")]
        assert len(races) == len(want)
