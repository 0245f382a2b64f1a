"""A program's work is bounded before any engine loops over it (issue 15, defect 6): one
``COPY`` of 2^31 rows with stride 0 stays inside its memories, so every bounds check
passed, and both timing engines and the executor walked it for hours. No operand may walk
more bytes than the target's largest on-chip memory holds, and a program makes at most
``MAX_PROGRAM_WORK`` element accesses."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto
from pypto.codegen.asm import parse
from pypto.errors import SimError
from pypto.sim import check
from pypto.sim.check import check_program, check_work
from pypto.sim.executor import execute
from pypto.sim.timing import simulate
from pypto.targets import load_target

TARGET = load_target("ascend910b")
LARGEST = max(m.capacity for m in TARGET.memories.values() if m is not TARGET.role("global"))


def _copy(rows: int, cols: int, rs: int, size: int = 16) -> str:
    return (f".program p target=ascend910b\n.tensor A float16 [{size}] in\n.core 0\n"
            f"    COPY.F16 UB[0x0:{rows}x{cols},{rs},1], GM[A][0:{rows}x{cols},{rs},1]\n")


@contextlib.contextmanager
def _within(seconds: int) -> Iterator[None]:
    """Fail instead of hanging the suite if the budget check regresses."""
    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"still running after {seconds} s: the work budget was not "
                             "checked before the loops")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("run", ["cython", "reference", "checked-cython", "execute"])
def test_the_reproducer_is_refused_in_every_engine(run: str) -> None:
    program = parse(_copy(2**31 - 1, 16, 0), TARGET)
    with _within(60), pytest.raises(SimError, match=r"operand d walks 2147483647x16 elements "
                                                    r"\(68,719,476,704 bytes\).*split it"):
        if run == "execute":
            execute(program, TARGET, [np.zeros(16, np.float16)])
        elif run == "checked-cython":    # the engine's own checking pass (bound given)
            simulate(program, TARGET, bound_cycles=1, engine="cython")
        else:
            simulate(program, TARGET, engine=run)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 2**20), cols=st.sampled_from([1, 16, 128]),
       rs=st.sampled_from([0, None]))
def test_an_operand_may_walk_what_fits_on_chip(rows: int, cols: int, rs: int | None) -> None:
    """Accepted exactly when rows x cols x 2 bytes fit in the largest on-chip memory; an
    accepted copy executes as NumPy computes it."""
    stride = cols if rs is None else rs
    size = cols if rs == 0 else rows * cols
    fits_ub = (rows - 1) * stride * 2 + cols * 2 <= TARGET.role("vector").capacity
    if rs is None and not fits_ub:
        return              # out of the UB's bounds: another check's business
    program = parse(_copy(rows, cols, stride, size), TARGET)
    if rows * cols * 2 > LARGEST:
        with pytest.raises(SimError, match="walks"):
            check_program(program, TARGET)
        return
    check_program(program, TARGET)
    data = np.arange(size, dtype=np.float16)
    execute(program, TARGET, [data])            # reads A into UB: A unchanged
    assert np.array_equal(data, np.arange(size, dtype=np.float16))
    assert simulate(program, TARGET).cycles > 0


def test_a_program_over_the_budget_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    program = parse(_copy(64, 16, 16, 64 * 16), TARGET)
    check_work(program, TARGET)
    monkeypatch.setattr(check, "MAX_PROGRAM_WORK", 64 * 16 * 2 - 1)   # d and a operands
    with pytest.raises(SimError, match=r"p: 2,048 element accesses, over the work budget "
                                       r"of 2,047 per program"):
        check_work(program, TARGET)
    with pytest.raises(SimError, match="work budget"):
        execute(program, TARGET, [np.zeros(64 * 16, np.float16)])


@pytest.mark.filterwarnings("ignore:.*no tuned schedule")
def test_a_large_gemm_stays_well_inside_the_budget() -> None:
    """Lowering's own programs pass, with room: a 4096^3 GEMM makes about 5.6e9 element
    accesses, under a hundredth of the budget."""
    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    c = k.lower(pypto.spec((4096, 4096), "float16"), pypto.spec((4096, 4096), "float16"),
                target="ascend910b")
    (program,) = c.programs
    check_work(program, TARGET)
    total = sum(int((s[f"{o}_rows"].astype(np.int64) * s[f"{o}_cols"])[s[f"{o}_mem"] != 0]
                    .sum()) for s in program.cores for o in ("d", "a", "b"))
    assert 0 < total < check.MAX_PROGRAM_WORK / 100
