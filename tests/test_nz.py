"""Matmul operands stored in fractal NZ: numbers, DMA cost, the space's block rule and
the errors for uses NZ does not support."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.errors import LayoutError
from pypto.ir.dtypes import BY_NAME
from pypto.ir.layouts import from_nz, nz_shape, to_nz
from pypto.schedule_space import default_schedule, space_for, validate
from pypto.targets import available_targets, load_target
from tests.strategies import assert_close, random_schedule, run_both

TARGET = load_target("ascend910b")


@given(st.integers(1, 70), st.integers(1, 70), st.sampled_from(["float16", "float32", "int8"]))
def test_nz_storage_round_trips(rows, cols, dtype):
    matrix = np.arange(rows * cols).reshape(rows, cols).astype(BY_NAME[dtype].np)
    stored = to_nz(matrix)
    blocks, rpad, c0 = nz_shape(matrix.shape, matrix.dtype.itemsize)
    assert stored.size == blocks * rpad * c0 and c0 * matrix.dtype.itemsize == 32
    assert np.array_equal(from_nz(stored, matrix.shape), matrix)
    r, c = rows - 1, cols - 1  # the last element sits in the last column block
    assert stored[((c // c0) * rpad + r) * c0 + c % c0] == matrix[r, c]


def _operands(m, n, k, dtype, ta, tb, nz_a, nz_b):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    a = rng.integers(-4, 4, (k, m) if ta else (m, k))
    b = rng.integers(-4, 4, (n, k) if tb else (k, n))
    return (pypto.tensor(a, dtype=dtype, layout="NZ" if nz_a else None),
            pypto.tensor(b, dtype=dtype, layout="NZ" if nz_b else None))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 90), st.integers(1, 90), st.integers(1, 120),
       st.sampled_from(["float16", "float32", "int8"]), st.booleans(), st.booleans(),
       st.sampled_from([(True, False), (False, True), (True, True)]),
       st.sampled_from(available_targets()))
def test_nz_operands_match_numpy(data, m, n, k, dtype, ta, tb, which, target_name):
    """Default and random schedules, either or both operands in NZ, every target."""
    a, b = _operands(m, n, k, dtype, ta, tb, *which)

    def fn(x, y):  # type: ignore[no-untyped-def]
        return pypto.matmul(x, y, transpose_a=ta, transpose_b=tb)

    npu, cpu, compiled = run_both(fn, a, b, target=target_name)
    assert_close(npu, cpu, "")
    s = data.draw(random_schedule(compiled.workloads[0], compiled.target))
    npu, cpu, _ = run_both(fn, a, b, schedules={0: s}, target=target_name)
    assert_close(npu, cpu, "")


def test_nz_saves_the_short_row_penalty():
    """A 64-column B tile is 128-byte rows in ND (charged as 512-byte bursts); in NZ it is
    four contiguous column blocks, so the same schedule moves B faster."""
    def time(layout: str) -> tuple[int, int]:
        a = pypto.spec((512, 512), "float16")
        b = pypto.spec((512, 512), "float16", layout=layout)
        compiled = pypto.kernel(pypto.matmul).lower(a, b, target=TARGET)
        s = default_schedule(compiled.workloads[0], TARGET).replace(n1=64, m1=128)
        result = compiled.with_schedule(0, s).simulate()
        return result.cycles, int(result.pipe_busy[:, 1].sum())  # MTE2

    nd, nz = time("ND"), time("NZ")
    assert nz[1] < 0.75 * nd[1], (nd, nz)
    assert nz[0] < nd[0], (nd, nz)


def test_int8_nz_tiles_stay_on_column_blocks():
    wl = pypto.kernel(pypto.matmul).lower(pypto.spec((64, 64), "int8"),
                                          pypto.spec((64, 80), "int8", layout="NZ"),
                                          target=TARGET).workloads[0]
    s = default_schedule(wl, TARGET)
    assert s["n1"] % 32 == 0 and not validate(wl, s, TARGET)
    problems = validate(wl, s.replace(n1=48), TARGET)
    assert any("n1=48 is not one of its choices" in p and "NZ" in p
               and "a multiple of 32" in p for p in problems), problems


def test_nz_is_only_for_whole_matmul_operands():
    w = pypto.tensor(np.ones((32, 48)), dtype="float16", layout="NZ")
    x = pypto.tensor(np.ones((16, 32)), dtype="float16")
    with pytest.raises(LayoutError, match="only be an operand of pypto.matmul"):
        pypto.kernel(lambda t: pypto.relu(t))(w)
    with pytest.raises(LayoutError, match="only be an operand of pypto.matmul"):
        pypto.kernel(lambda a, b: pypto.matmul(a, b[:, :16]))(x, w)
    with pytest.raises(LayoutError, match="'NZ' needs a 2-D tensor"):
        pypto.tensor(np.ones((2, 3, 4)), dtype="float16", layout="NZ")
    out = pypto.kernel(lambda a, b: pypto.matmul(a, b))(x, w)
    assert out.layout == "ND" and np.allclose(out.numpy(), 32.0)


def test_a_captured_weight_may_be_stored_either_way():
    """A constant the kernel captures is PyPTO's to store: the space offers ND and NZ
    for it, both give the right numbers, and an argument gets no such choice."""
    rng = np.random.default_rng(5)
    w = rng.integers(-3, 3, (96, 80))
    weight = pypto.tensor(w, dtype="float16")
    x = pypto.tensor(rng.integers(-3, 3, (40, 96)), dtype="float16")

    def fn(a):  # type: ignore[no-untyped-def]
        return pypto.matmul(a, weight)

    compiled = pypto.kernel(fn).lower(x, target=TARGET)
    wl = compiled.workloads[0]
    assert wl.inputs[1].const and not wl.inputs[0].const
    space = space_for(wl, TARGET)
    assert space.axes["b_layout"].choices == ("ND", "NZ")
    assert space.axes["a_layout"].choices == ("ND",)
    s = compiled.schedules[0]
    for layout in ("ND", "NZ"):
        out = compiled.with_schedule(0, s.replace(b_layout=layout))(x)
        np.testing.assert_array_equal(out.numpy().astype(np.int64), x.numpy().astype(np.int64) @ w)
    problems = validate(wl, s.replace(a_layout="NZ"), TARGET)
    assert any("a_layout='NZ' is not one of its choices ['ND']" in p for p in problems), problems


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 70), st.integers(1, 70), st.integers(1, 90),
       st.sampled_from(["float16", "int8"]), st.booleans())
def test_captured_weights_in_random_layouts_match_numpy(data, m, n, k, dtype, tb):
    rng = np.random.default_rng(m + n + k)
    weight = pypto.tensor(rng.integers(-3, 3, (n, k) if tb else (k, n)), dtype=dtype)
    x = pypto.tensor(rng.integers(-3, 3, (m, k)), dtype=dtype)

    def fn(a):  # type: ignore[no-untyped-def]
        return pypto.matmul(a, weight, transpose_b=tb)

    compiled = pypto.kernel(fn).lower(x, target=TARGET)
    s = data.draw(random_schedule(compiled.workloads[0], TARGET))
    npu, cpu, _ = run_both(fn, x, schedules={0: s}, target="ascend910b")
    assert_close(npu, cpu, "")
