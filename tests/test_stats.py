"""The Cython instruction statistics agree with the NumPy definition, and are built."""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto import native
from pypto.codegen.isa import INSTR, Mem, Op, Pipe
from pypto.codegen.program import Operand, StreamBuilder
from pypto.ir.dtypes import ALL as ALL_DTYPES
from pypto.ir.dtypes import float16, float32, int8
from pypto.sim import stats

# Every field the statistics read, with the values an instruction may hold; the other
# fields get arbitrary values so that the field views really are strided.
FIELD_VALUES = {
    "op": st.sampled_from([int(op) for op in Op]),
    "pipe": st.integers(0, len(Pipe) - 1),
    "dtype": st.integers(0, 3),
    "a_mem": st.integers(0, len(Mem) - 1),
    "d_mem": st.integers(0, len(Mem) - 1),
    "d_rows": st.integers(0, 4096),
    "d_cols": st.integers(0, 4096),
    "d_addr": st.integers(-(2**40), 2**40),
    "imm": st.floats(allow_nan=False),
}


@st.composite
def instruction_arrays(draw: st.DrawFn) -> np.ndarray:
    n = draw(st.integers(0, 64))
    instr = np.zeros(n, dtype=INSTR)
    for name, elements in FIELD_VALUES.items():
        instr[name] = draw(hnp.arrays(INSTR[name], n, elements=elements))
    if draw(st.booleans()):
        # COPYs are the interesting case for the path table: make them common.
        instr["op"][draw(hnp.arrays(np.bool_, n))] = Op.COPY
    return instr


def _extension() -> ModuleType:
    try:
        return importlib.import_module("pypto.sim._stats")
    except ImportError as e:
        pytest.fail(f"pypto.sim._stats is not built ({e}); run `pip install -e .`")


def test_extension_is_built() -> None:
    """Guards the build path: `pip install -e .` must compile pypto/sim/_stats.pyx."""
    assert callable(_extension().program_stats)


@settings(max_examples=300, deadline=None)
@given(instruction_arrays(), st.sampled_from([1, 2, 3]))
def test_extension_matches_reference(instr: np.ndarray, step: int) -> None:
    instr = instr[::step]  # a strided INSTR array, not only strided fields
    want_counts, want_paths = stats.python_program_stats(instr)
    got_counts, got_paths = _extension().program_stats(instr)
    assert got_counts.dtype == got_paths.dtype == np.int64
    assert got_counts.shape == (len(Pipe),) and got_paths.shape == (len(Mem), len(Mem))
    np.testing.assert_array_equal(got_counts, want_counts)
    np.testing.assert_array_equal(got_paths, want_paths)
    assert want_counts.sum() == len(instr)


def test_hand_computed_example() -> None:
    stream = StreamBuilder()
    gm = Operand(Mem.GM, 0, 32, 64, 64, gm=0)
    l1 = Operand(Mem.STAGE, 0, 32, 64, 64)
    ub = Operand(Mem.VECTOR, 0, 32, 64, 64)
    stream.emit(Op.COPY, l1, gm, dtype=float16)  # 32*64*2 = 4096 bytes GM -> L1
    stream.emit(Op.COPY, l1, gm, dtype=float32)  # 32*64*4 = 8192 bytes GM -> L1
    stream.emit(Op.COPY, gm, ub, dtype=int8)     # 32*64*1 = 2048 bytes UB -> GM
    stream.emit(Op.VADD, ub, ub, ub, dtype=float16)
    stream.emit(Op.BARRIER)
    instr = stream.array()
    for impl in (stats.python_program_stats, _extension().program_stats, stats.program_stats):
        counts, paths = impl(instr)
        assert counts.tolist() == [1, 2, 0, 0, 0, 1, 1]  # SCALAR, MTE2 x2, VEC, MTE3
        assert paths[Mem.GM, Mem.STAGE] == 4096 + 8192
        assert paths[Mem.VECTOR, Mem.GM] == 2048
        assert paths.sum() == 4096 + 8192 + 2048


@pytest.mark.parametrize("field, value", [("pipe", 7), ("a_mem", 10), ("d_mem", 12),
                                         ("dtype", len(ALL_DTYPES))])
def test_out_of_range_is_rejected_by_both(field: str, value: int) -> None:
    instr = np.zeros(3, dtype=INSTR)
    instr["op"] = Op.COPY
    instr[field][2] = value
    for impl in (stats.python_program_stats, _extension().program_stats):
        with pytest.raises(ValueError, match="instruction 2 is out of range"):
            impl(instr)


def test_out_of_range_memory_outside_copy_is_ignored() -> None:
    instr = np.zeros(1, dtype=INSTR)
    instr["op"], instr["a_mem"], instr["dtype"] = Op.VADD, 200, 200
    for impl in (stats.python_program_stats, _extension().program_stats):
        counts, paths = impl(instr)
        assert counts.sum() == 1 and paths.sum() == 0


def test_wrong_array_type_is_rejected() -> None:
    with pytest.raises(TypeError, match="INSTR"):
        stats.program_stats(np.zeros(3, dtype=np.int64))


def test_the_switch_selects_the_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYPTO_IMPL", "python")
    assert stats._implementation() is stats.python_program_stats
    monkeypatch.delenv("PYPTO_IMPL")
    assert stats._implementation() is _extension().program_stats
    with native.force_python():
        assert stats._implementation() is stats.python_program_stats


def test_missing_extension_warns_once_and_falls_back() -> None:
    instr = np.zeros(4, dtype=INSTR)
    with native.not_built("pypto.sim._stats"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = stats.program_stats(instr)
        stats.program_stats(instr)
    assert len(caught) == 1
    assert "pip install -e ." in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the caller
    assert first[0][0] == 4
