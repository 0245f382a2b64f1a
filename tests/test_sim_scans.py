"""The scans before each simulation, compiled (``pypto/sim/_scan.pyx``) against their
NumPy specifications (``check.check_gm_dtypes``, ``scalar.needs_issue``): the same
verdict on random programs, whose GM operands sometimes have another dtype than their
tensor, whose copies sometimes take a register and whose branches sometimes jump."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto import native
from pypto.codegen.isa import INSTR, Mem, Op
from pypto.codegen.program import Program, Symbol
from pypto.errors import SimError
from pypto.ir.dtypes import BY_CODE
from pypto.sim import check, scalar
from pypto.targets import load_target

pytest.importorskip("pypto.sim._scan", reason="the compiled scans are not built")

TARGET = load_target("ascend910b")
_nothing = contextlib.nullcontext
OPS = [Op.COPY, Op.VLD, Op.VST, Op.BNE, Op.BLT, Op.VADD, Op.SET_FLAG, Op.NOP, Op.MMAD]


@st.composite
def programs(draw: st.DrawFn) -> Program:
    symbols = tuple(Symbol(f"t{i}", BY_CODE[draw(st.integers(0, len(BY_CODE) - 1))], (4,), "in")
                    for i in range(draw(st.integers(1, 3))))
    cores = []
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(0, 12))
        stream = np.zeros(n, dtype=INSTR)
        for i in range(n):
            row = stream[i]
            row["op"] = draw(st.sampled_from(OPS))
            row["pipe2"] = draw(st.sampled_from([0, 0, 0, 2]))
            row["event"] = draw(st.sampled_from([0, 0, 0, 1]))
            row["d_addr"] = draw(st.sampled_from([i + 1, i + 1, 0, i + 3]))
            row["gm"] = draw(st.integers(-1, 4))
            row["dtype"] = draw(st.integers(0, len(BY_CODE) - 1))
            row["sdtype"] = draw(st.integers(0, len(BY_CODE) - 1))
            for prefix in ("d", "a", "b"):
                row[f"{prefix}_mem"] = draw(st.sampled_from([Mem.NONE, Mem.GM, Mem.VECTOR]))
        cores.append(stream)
    return Program("p", TARGET.name, symbols, tuple(cores))


def gm_verdict(program: Program) -> str:
    try:
        check.check_gm_dtypes(program, TARGET)
    except SimError as e:
        return str(e)
    return "ok"


@settings(max_examples=400, deadline=None)
@given(programs())
def test_compiled_scans_agree_with_numpy(program):
    compiled = (gm_verdict(program), scalar.needs_issue(program))
    with native.force_python():
        reference = (gm_verdict(program), scalar.needs_issue(program))
    assert compiled == reference
    assert scalar.needs_issue_reference(program) == reference[1]


def test_a_program_whose_copy_reads_a_tensor_as_another_dtype_is_refused():
    """The compiled scan finds it; the specification then names it."""
    stream = np.zeros(2, dtype=INSTR)
    stream["op"] = Op.COPY
    stream["a_mem"] = Mem.GM
    stream["gm"] = 0
    stream["sdtype"] = [BY_CODE[1].code, BY_CODE[0].code]
    program = Program("p", TARGET.name, (Symbol("x", BY_CODE[1], (4,), "in"),), (stream,))
    with pytest.raises(SimError, match="instruction 1"):
        check.check_gm_dtypes(program, TARGET)


def test_a_program_with_gm_operands_but_no_tensors_is_refused_by_name():
    stream = np.zeros(1, dtype=INSTR)
    stream["op"] = Op.COPY
    stream["a_mem"] = Mem.GM
    stream["sdtype"] = BY_CODE[1].code
    program = Program("p", TARGET.name, (), (stream,))
    for force in (False, True):
        with native.force_python() if force else _nothing():
            with pytest.raises(SimError, match="declares no GM tensor"):
                check.check_gm_dtypes(program, TARGET)


def test_a_program_with_an_unknown_op_code_is_refused_by_name():
    """A program built in code can hold any byte as its op (the fuzzer found 255 reaching
    the executor as a ValueError)."""
    stream = np.zeros(2, dtype=INSTR)
    stream["op"] = [Op.COPY, 255]
    program = Program("p", TARGET.name, (), (stream,))
    with pytest.raises(SimError, match="instruction 1.*op code 255 is no PTO instruction"):
        check.check_program(program, TARGET)
