"""Comparisons and ``pypto.where`` against NumPy: random shapes with broadcasting, every
dtype, on the CPU and on the NPU (random points of the schedule space, every target),
with each generated program race-free and surviving its assembly round trip."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.targets import available_targets
from tests.strategies import broadcastable_to, check_programs, dims, random_schedule

COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
           ">": operator.gt, ">=": operator.ge}
DTYPES = ("float16", "float32", "int8", "int32")


def _data(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype.startswith("int"):
        return rng.integers(-3, 4, shape).astype(dtype)  # small: many equal pairs
    values = rng.integers(-3, 4, shape).astype(dtype) / 2
    if values.size:
        values.flat[0] = np.nan if rng.random() < 0.3 else values.flat[0]
    return values.astype(dtype)


def _npu(fn, arrays, dtypes_, target, data):  # type: ignore[no-untyped-def]
    tensors = [pypto.tensor(a, dtype=d) for a, d in zip(arrays, dtypes_)]
    compiled = pypto.kernel(fn).lower(*tensors, target=target)
    for i, wl in enumerate(compiled.workloads):
        compiled = compiled.with_schedule(i, data.draw(random_schedule(wl, compiled.target)))
    check_programs(compiled)
    return compiled(*tensors).numpy()


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), dims(), st.sampled_from(sorted(COMPARE)), st.sampled_from(DTYPES),
       st.sampled_from(available_targets()), st.integers(0, 2**16))
def test_comparisons_match_numpy(data, shape, symbol, dtype, target, seed):
    other = data.draw(broadcastable_to(shape))
    a, b = _data(shape, dtype, seed), _data(other, dtype, seed + 1)
    fn = COMPARE[symbol]
    want = fn(a, b)
    got = _npu(lambda x, y: fn(x, y), [a, b], [dtype, dtype], target, data)
    assert got.dtype == np.bool_ and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    with pypto.Context(device_type="cpu"):
        cpu = fn(pypto.tensor(a, dtype=dtype), pypto.tensor(b, dtype=dtype)).numpy()
    np.testing.assert_array_equal(cpu, want)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), dims(), st.sampled_from(sorted(COMPARE)), st.sampled_from(DTYPES),
       st.sampled_from(available_targets()), st.integers(0, 2**16))
def test_where_matches_numpy(data, shape, symbol, dtype, target, seed):
    xs, ys = data.draw(broadcastable_to(shape)), data.draw(broadcastable_to(shape))
    a, x, y = _data(shape, dtype, seed), _data(xs, dtype, seed + 1), _data(ys, dtype, seed + 2)
    fn = COMPARE[symbol]
    want = np.where(fn(a, 0), x, y)
    got = _npu(lambda c, p, q: pypto.where(fn(c, 0), p, q), [a, x, y], [dtype] * 3, target,
               data)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)  # a select computes nothing: exact, NaN too


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_where_with_scalars_and_a_bool_input(device: str):
    x = np.array([[-1.5, 0.0, np.inf], [2.0, -np.inf, np.nan]], dtype=np.float32)
    cond = np.array([True, False, True])
    with pypto.Context(device_type=device):
        t = pypto.tensor(x, dtype="float32")
        relu = pypto.kernel(lambda v: pypto.where(v > 0, v, 0.0))(t).numpy()
        picked = pypto.kernel(lambda c, v: pypto.where(c, v, -1.0))(
            pypto.tensor(cond, dtype="bool"), t).numpy()
        via_numpy = pypto.kernel(lambda v: np.where(np.less(v, 1.0), 1.0, v))(t).numpy()
    np.testing.assert_array_equal(relu, np.where(x > 0, x, 0.0))  # inf is kept, not inf*0
    np.testing.assert_array_equal(picked, np.where(cond, x, np.float32(-1.0)))
    np.testing.assert_array_equal(via_numpy, np.where(np.less(x, 1.0), np.float32(1.0), x))


def test_a_comparison_fuses_into_one_vector_workload():
    c = pypto.kernel(lambda v, w: pypto.relu(pypto.where(v > w, v, w))).lower(
        pypto.spec((64, 96), "float16"), pypto.spec((96,), "float16"))
    assert [wl.ops for wl in c.workloads] == [("greater", "where", "relu")]
    text = c.asm()
    assert "VCMPGT.B8.F16" in text and "VSEL.F16" in text


def test_comparisons_reject_two_scalars_and_tensors_are_still_hashable():
    t = pypto.ones((2,), dtype="float32")
    assert len({t, t}) == 1
    with pytest.raises(pypto.KernelError, match="at least one PyPTO tensor"):
        pypto.equal(1.0, 2.0)
