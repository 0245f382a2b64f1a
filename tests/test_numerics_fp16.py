"""Numerics a float16 user meets: statistics that pass float16's range, a scalar divided
by a tensor, conversions to integers, Python integers an integer tensor cannot hold.

The references here are float64 NumPy written independently of how PyPTO decomposes
an op, so a decomposition that rounds where it should not shows up as a failure.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto
from pypto.ir.numerics import convert

DEVICES = ("npu", "cpu")


def _run(device: str, fn, *arrays: np.ndarray, dtype: str = "float16"):  # type: ignore[no-untyped-def]
    with pypto.Context(device_type=device):
        return pypto.kernel(fn)(*[pypto.tensor(a, dtype=dtype) for a in arrays]).numpy()


def _layernorm64(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


@pytest.mark.parametrize("device", DEVICES)
def test_layernorm_of_a_row_with_an_outlier_matches_float64(device: str):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 768)).astype(np.float16)
    x[1, 17] = 300.0  # a GPT-2-style outlier feature: its square is past float16's range
    got = _run(device, lambda a: pypto.layernorm(a), x)
    want = _layernorm64(x)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("device", DEVICES)
def test_mean_past_the_float16_range(device: str):
    x = np.full((2, 768), 90.0, dtype=np.float16)  # the row sums to 69,120 > 65,504
    got = _run(device, lambda a: pypto.mean(a, axis=-1), x)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, np.full(2, 90.0, dtype=np.float16))
    total = _run(device, lambda a: pypto.sum(a, axis=-1), x)
    np.testing.assert_array_equal(total, np.sum(x, axis=-1))  # inf, as NumPy's float16 sum


@pytest.mark.parametrize("device", DEVICES)
def test_softmax_of_long_float16_rows_matches_float64(device: str):
    x = np.random.default_rng(1).normal(scale=4.0, size=(3, 4096)).astype(np.float16)
    got = _run(device, lambda a: pypto.softmax(a), x)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(got.astype(np.float64), e / e.sum(axis=-1, keepdims=True),
                               rtol=4e-3, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_a_scalar_divided_by_a_tensor_is_a_division(device: str):
    x = np.array([[1e-5, 2.0, -3.0, 0.25]], dtype=np.float16)
    got = _run(device, lambda a: 0.5 / a, x)
    want = (0.5 / x.astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(got, want)  # 0.5 / 1e-5 is 4.99e4, not inf


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=40),
       st.floats(-8.0, 8.0).filter(lambda s: abs(s) > 1e-3))
def test_scalar_over_tensor_matches_numpy(values: list[float], scalar: float):
    x = np.array(values, dtype=np.float32)
    got = _run("npu", lambda a: scalar / a, x, dtype="float32")
    np.testing.assert_allclose(got, (scalar / x.astype(np.float64)).astype(np.float32),
                               rtol=2e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_float_to_int_conversions_saturate_and_nan_gives_zero(device: str):
    x = np.array([1e10, -1e10, np.nan, np.inf, -np.inf, 2.7, -2.7, 0.0], dtype=np.float32)
    got = _run(device, lambda a: pypto.cast(a, "int32"), x, dtype="float32")
    top, bottom = np.iinfo(np.int32).max, np.iinfo(np.int32).min
    np.testing.assert_array_equal(got, [top, bottom, 0, top, bottom, 2, -2, 0])
    small = _run(device, lambda a: pypto.cast(a, "int8"), np.array([300.0, -300.0, 5.9],
                                                                   dtype=np.float32),
                 dtype="float32")
    np.testing.assert_array_equal(small, [127, -128, 5])


def test_other_conversions_are_numpys():
    ints = np.array([2**31 - 1, -5, 300], dtype=np.int32)
    np.testing.assert_array_equal(convert(ints, np.dtype(np.int8)), ints.astype(np.int8))
    floats = np.array([1.0 / 3.0, 70000.0], dtype=np.float32)
    np.testing.assert_array_equal(convert(floats, np.dtype(np.float16)),
                                  floats.astype(np.float16))


@pytest.mark.parametrize("device", DEVICES)
def test_an_int_scalar_out_of_an_int_tensors_range_raises(device: str):
    x = np.arange(6, dtype=np.int8)
    with pytest.raises(OverflowError, match="1000 is out of bounds for int8"), \
            pypto.Context(device_type=device):
        pypto.kernel(lambda a: a + 1000)(pypto.tensor(x, dtype="int8"))
    with pytest.raises(pypto.ScalarOverflowError):
        pypto.kernel(lambda a: a * -129)(pypto.tensor(x, dtype="int8"))
    got = _run(device, lambda a: a + 100, x, dtype="int8")  # in range: wraps as NumPy's
    np.testing.assert_array_equal(got, x + np.int8(100))
