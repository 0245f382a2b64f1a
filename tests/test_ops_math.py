"""power / ``**``, clip, erf and rms_norm on the simulated NPU of every target, against
NumPy computed independently in float64 (and the CPU reference), under default and
random schedules; their errors for bad arguments."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pypto
from pypto.frontend.ops.math import ERF_ABS_ERROR
from pypto.targets import load_target
from tests.ops_support import SETTINGS, TARGETS, host, run_scheduled
from tests.strategies import FLOATS, dims

TOL = {"float32": 2e-5, "float16": 2e-3}


def _signed_away_from_zero(shape, dtype, seed):  # type: ignore[no-untyped-def]
    """Magnitudes in [0.25, 2] with random signs (no overflow of small bases to negative
    powers near float16's range)."""
    mag = host(shape, "float32", seed, 0.25, 2.0)
    sign = np.where(host(shape, "float32", seed + 1) < 0, -1.0, 1.0)
    return (mag * sign).astype(dtype)


@SETTINGS
@given(st.data(), dims(), st.sampled_from(FLOATS),
       st.one_of(st.integers(-7, 7), st.floats(-3, 3, allow_nan=False, width=32),
                 st.sampled_from([0.5, -0.5, 100, 101, -65])))
def test_power_with_a_number(data, shape, dtype, p):
    x = _signed_away_from_zero(shape, dtype, 1)
    if isinstance(p, int) and abs(p) > 7:
        x = host(shape, dtype, 1, 0.9, 1.1) * np.where(x < 0, -1, 1).astype(dtype)
    with np.errstate(all="ignore"):
        expected = (x.astype(np.float64) ** p).astype(dtype)
    rtol = TOL[dtype] * (1 + abs(p) / 4)
    run_scheduled(data, lambda a: a ** p, [x], expected, rtol=rtol, atol=0.0)


@SETTINGS
@given(st.data(), dims(), st.sampled_from(FLOATS))
def test_power_with_a_tensor_exponent_follows_numpy_on_negative_bases(data, shape, dtype):
    x = _signed_away_from_zero(shape, dtype, 2)
    rng = np.random.default_rng(3)
    y = np.where(rng.random(shape) < 0.5, rng.integers(-4, 5, shape),
                 rng.uniform(-3, 3, shape)).astype(dtype)
    y.flat[0] = 0.0
    with np.errstate(all="ignore"):
        expected = (x.astype(np.float64) ** y.astype(np.float64)).astype(dtype)
    run_scheduled(data, pypto.power, [x, y], expected, rtol=TOL[dtype] * 4, atol=0.0)


@SETTINGS
@given(st.data(), dims(), st.sampled_from(["int32", "int8"]), st.integers(0, 5))
def test_integer_power_wraps_as_numpy(data, shape, dtype, p):
    x = host(shape, dtype, 4)
    run_scheduled(data, lambda a: a ** p, [x], x ** p, rtol=0, atol=0)


@SETTINGS
@given(st.data(), dims(), st.floats(0.25, 4.0, width=32))
def test_a_number_to_a_tensor_power(data, shape, base):
    y = host(shape, "float32", 5)
    expected = (float(base) ** y.astype(np.float64)).astype(np.float32)
    run_scheduled(data, lambda a: base ** a, [y], expected, rtol=4e-5, atol=0.0)


@SETTINGS
@given(st.data(), dims(), st.sampled_from(FLOATS + ("int32",)),
       st.one_of(st.none(), st.floats(-1.5, 1.5, width=16)),
       st.one_of(st.none(), st.floats(-1.5, 1.5, width=16)))
def test_clip_with_numbers(data, shape, dtype, lo, hi):
    if lo is None and hi is None:
        lo = -0.5
    if dtype == "int32":
        lo = None if lo is None else int(lo)
        hi = None if hi is None else int(hi)
    x = host(shape, dtype, 6)
    expected = np.clip(x, lo, hi)
    run_scheduled(data, lambda a: pypto.clip(a, lo, hi), [x], expected, rtol=0, atol=0)


@SETTINGS
@given(st.data(), dims(), st.sampled_from(FLOATS))
def test_clip_with_tensor_bounds_that_broadcast(data, shape, dtype):
    x = host(shape, dtype, 7)
    lo = host(shape[-1:], dtype, 8, -1.5, 0.0)
    hi = host((1,) * len(shape), dtype, 9, 0.0, 1.5)
    run_scheduled(data, pypto.clip, [x, lo, hi], np.clip(x, lo, hi), rtol=0, atol=0)


def _erf64(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x.astype(np.float64))


@SETTINGS
@given(st.data(), dims(), st.sampled_from(FLOATS))
def test_erf_is_within_its_bound(data, shape, dtype):
    x = host(shape, dtype, 10, -4.0, 4.0)
    # float16 results: the approximation's error plus half an ulp of float16 below 1
    atol = ERF_ABS_ERROR + (2.0 ** -12 if dtype == "float16" else 0.0)
    expected = _erf64(x)  # exact, in float64: the check below is the documented bound
    compiled = run_scheduled(data, pypto.erf, [x], expected.astype(dtype), rtol=0,
                             atol=atol + (2.0 ** -12 if dtype == "float16" else 0.0))
    out = compiled(pypto.tensor(x, dtype=dtype)).numpy().astype(np.float64)
    assert np.max(np.abs(out - expected)) <= atol


def test_erf_bound_holds_on_a_dense_grid():
    grid = np.concatenate([np.linspace(-6, 6, 40001), np.linspace(-0.1, 0.1, 4001),
                           [0.0, -0.0, np.inf, -np.inf]]).astype(np.float32)
    out = pypto.erf(pypto.tensor(grid, dtype="float32")).numpy().astype(np.float64)
    err = np.abs(out - _erf64(grid))
    assert err.max() <= ERF_ABS_ERROR
    assert err.max() > ERF_ABS_ERROR / 4  # the bound is tight, not a wild guess
    assert out[-4] == 0.0 and out[-2] == 1.0 and out[-1] == -1.0


@pytest.mark.parametrize("target", TARGETS)
def test_erf_costs_what_its_target_file_says(target):
    """The comment under ``[vector.op_cycles]`` gives erf's passes; the program's VEC
    instructions, costed by that table, add up to it."""
    from pypto.codegen.isa import VECTOR, Op

    t = load_target(target)
    text = (Path(pypto.__file__).parent / "targets" / f"{target}.toml").read_text()
    documented = float(re.search(r"erf = (\d+) passes", text).group(1))
    kernel = pypto.kernel(pypto.erf)
    compiled = kernel.lower(pypto.spec((64,), "float32"), target=target)
    program = compiled.programs[0]
    stream = program.cores[0]
    vec = [Op(o) for o in stream["op"] if o in VECTOR]
    assert len(vec) == 22
    assert sum(t.vector_op_cycles[o.name[1:].lower()] for o in vec) == documented
    assert [wl.family for wl in compiled.workloads] == ["vector"]  # one fused chain


@SETTINGS
@given(st.data(), dims(max_rank=3, max_size=64), st.sampled_from(FLOATS), st.booleans())
def test_rms_norm(data, shape, dtype, with_gamma):
    x = host(shape, dtype, 11, -3.0, 3.0)
    g = host(shape[-1:], dtype, 12, 0.5, 1.5)
    x64 = x.astype(np.float64)
    y = x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + 1e-6)
    if with_gamma:
        y = y * g.astype(np.float64)
    expected = y.astype(dtype)
    fn = (lambda a, gg: pypto.rms_norm(a, gg)) if with_gamma else \
        (lambda a, gg: pypto.rms_norm(a))
    run_scheduled(data, fn, [x, g], expected, rtol=TOL[dtype] * 2, atol=TOL[dtype] * 2)


def test_rms_norm_statistics_accumulate_in_float32():
    """float16 rows whose squares pass float16's range (65504) stay finite."""
    x = np.full((2, 64), 300.0, dtype=np.float16)
    out = pypto.rms_norm(pypto.tensor(x, dtype="float16")).numpy()
    np.testing.assert_allclose(out.astype(np.float64), 1.0, rtol=1e-3)


def test_operators_and_numpy_functions_reach_the_ops():
    x = pypto.tensor(np.array([-2.0, 0.5, 3.0]), dtype="float32")
    np.testing.assert_allclose((x ** 3).numpy(), [-8.0, 0.125, 27.0])
    np.testing.assert_allclose(np.power(x, 2).numpy(), [4.0, 0.25, 9.0])
    np.testing.assert_allclose(np.clip(x, -1.0, 1.0).numpy(), [-1.0, 0.5, 1.0])


@pytest.mark.parametrize("call, error, words", [
    (lambda x, i: pypto.clip(x), pypto.ShapeError, "a_min, a_max or both"),
    (lambda x, i: pypto.clip(x, "0", 1.0), pypto.DTypeError, "a_min must be a number"),
    (lambda x, i: pypto.clip(x, float("nan"), 1.0), pypto.DTypeError, "a_min is NaN"),
    (lambda x, i: i ** -1, pypto.ShapeError, "negative integer powers"),
    (lambda x, i: pypto.power(i, i), pypto.DTypeError, "tensor exponent needs float"),
    (lambda x, i: pypto.power(2, 3), pypto.KernelError, "PyPTO tensor"),
    (lambda x, i: x ** float("nan"), pypto.DTypeError, "exponent is NaN"),
    (lambda x, i: pypto.erf(i), pypto.DTypeError, "erf needs a float tensor"),
    (lambda x, i: pypto.rms_norm(i), pypto.DTypeError, "rms_norm needs a float"),
    (lambda x, i: pypto.rms_norm(x, axis=2), pypto.ShapeError, "axis 2 is out of range"),
    (lambda x, i: pypto.rms_norm(x, axis=0), pypto.UnsupportedError, "last axis"),
    (lambda x, i: pypto.rms_norm(x, eps=-1.0), pypto.ShapeError, "eps must be"),
    (lambda x, i: pypto.rms_norm(x, pypto.ones((3,), "float32")), pypto.ShapeError,
     "gamma of shape [3]"),
])
def test_bad_arguments_are_clear_errors(call, error, words):
    x = pypto.ones((2, 4), dtype="float32")
    i = pypto.ones((2, 4), dtype="int32")
    with pytest.raises(error, match=re.escape(words)):
        call(x, i)
