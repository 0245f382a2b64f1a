"""concatenate, stack, split, pad and reversed/stepped slices on the simulated NPU of
every target, against NumPy, under default and random schedules (every program race
free, never faster than the roofline bound); their errors for bad arguments."""

from __future__ import annotations

import random
import re
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import pypto
from pypto.schedule_space import space_for
from tests.ops_support import SETTINGS, TARGETS, host, run_scheduled
from tests.strategies import FLOATS, dims
from tests.test_sim_physics import check_physics, random_schedules

DTYPES = FLOATS + ("int32", "int8")


@st.composite
def concat_case(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    shape = draw(dims(max_rank=4, max_size=12))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    sizes = draw(st.lists(st.integers(1, 9), min_size=1, max_size=4))
    shapes = [tuple(s if i == axis % len(shape) else d for i, d in enumerate(shape))
              for s in sizes]
    return shapes, axis


@SETTINGS
@given(st.data(), concat_case(), st.sampled_from(DTYPES), st.booleans())
def test_concatenate(data, case, dtype, reverse_one):
    shapes, axis = case
    arrays = [host(s, dtype, 10 + i) for i, s in enumerate(shapes)]
    # one operand read through a reversed, transposed-free view; the result feeds a
    # vector op too, so the movement workload's output is read back from GM
    def fn(*ts):  # type: ignore[no-untyped-def]
        parts = list(ts)
        if reverse_one:
            parts[0] = parts[0][::-1]
        joined = pypto.concatenate(parts, axis=axis)
        return joined, joined * 2

    parts = list(arrays)
    if reverse_one:
        parts[0] = parts[0][::-1]
    expected = np.concatenate(parts, axis=axis)
    twice = (expected.astype(np.int64) * 2).astype(dtype) if dtype.startswith("int") \
        else (expected.astype(np.float64) * 2).astype(dtype)
    run_scheduled(data, fn, arrays, [expected, twice], rtol=0, atol=0)


@SETTINGS
@given(st.data(), dims(max_rank=3, max_size=10), st.integers(1, 4), st.sampled_from(DTYPES))
def test_stack(data, shape, count, dtype):
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    arrays = [host(shape, dtype, 20 + i) for i in range(count)]
    run_scheduled(data, lambda *ts: pypto.stack(list(ts), axis=axis), arrays,
                  np.stack(arrays, axis=axis), rtol=0, atol=0)


@SETTINGS
@given(st.data(), dims(max_rank=4, max_size=10), st.sampled_from(DTYPES),
       st.floats(-3, 3, width=16))
def test_pad(data, shape, dtype, value):
    widths = tuple((data.draw(st.integers(0, 3)), data.draw(st.integers(0, 3)))
                   for _ in shape)
    if all(w == (0, 0) for w in widths):
        widths = ((1, 0),) + widths[1:]
    if dtype.startswith("int"):
        value = int(value)
    x = host(shape, dtype, 30)
    expected = np.pad(x, widths, constant_values=value)
    run_scheduled(data, lambda a: pypto.pad(a, widths, constant_values=value), [x], expected,
                  rtol=0, atol=0)


@SETTINGS
@given(st.data(), dims(max_rank=3, max_size=12), st.sampled_from(FLOATS))
def test_split_gives_views_that_compute(data, shape, dtype):
    axis = data.draw(st.integers(0, len(shape) - 1))
    size = shape[axis]
    cuts = sorted(data.draw(st.lists(st.integers(1, size), max_size=3))) if size > 1 else []
    cuts = [c for i, c in enumerate(cuts) if c < size and (not i or c != cuts[i - 1])]
    x = host(shape, dtype, 40)
    parts = np.split(x, cuts, axis=axis)
    run_scheduled(data, lambda a: [p * 2.0 for p in pypto.split(a, cuts, axis=axis)], [x],
                  [(p.astype(np.float64) * 2).astype(dtype) for p in parts], rtol=0, atol=0)


@st.composite
def any_slices(draw: st.DrawFn, shape):  # type: ignore[no-untyped-def]
    out = []
    for d in shape:
        step = draw(st.sampled_from([1, 2, 3, -1, -2, -3]))
        start = draw(st.one_of(st.none(), st.integers(-d, d - 1)))
        stop = draw(st.one_of(st.none(), st.integers(-d - 1, d)))
        s = slice(start, stop, step)
        if len(range(*s.indices(d))) == 0:
            s = slice(None, None, step)
        out.append(s)
    return tuple(out)


@SETTINGS
@given(st.data(), dims(max_rank=3, max_size=12), st.sampled_from(FLOATS + ("int32",)))
def test_reversed_and_stepped_slices_inside_kernels(data, shape, dtype):
    index = data.draw(any_slices(shape))
    x = host(shape, dtype, 50)
    view = x[index]
    plus = (view.astype(np.float64) + 1).astype(dtype) if dtype != "int32" else view + 1
    run_scheduled(data, lambda a: (a[index], a[index] + 1), [x], [view, plus], rtol=0, atol=0)


@SETTINGS
@given(st.data(), st.integers(1, 40), st.integers(1, 40), st.integers(1, 40))
def test_reversed_operands_of_matmul(data, m, n, k):
    a, b = host((m, k), "float16", 60), host((n, k), "float16", 61)
    expected = (a[::-1].astype(np.float32) @ b[:, ::-1].T.astype(np.float32)).astype("float16")
    run_scheduled(data, lambda x, y: pypto.matmul(x[::-1], y[:, ::-1].T), [a, b], expected,
                  rtol=4e-3, atol=4e-3 * max(1.0, float(np.abs(expected).max())))


@pytest.mark.parametrize("target", TARGETS)
def test_movement_programs_never_beat_physics(target):
    rng = random.Random(0)
    for fn, specs in [
        (lambda a, b: pypto.concatenate([a, b[::-1]], axis=1),
         ((96, 700), (96, 50))),
        (lambda a: pypto.pad(a, ((2, 3), (0, 0), (1, 1), (0, 0))), ((2, 14, 14, 64),)),
        (lambda a: pypto.stack([a, a], axis=0), ((33, 129),)),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
            compiled = pypto.kernel(fn).lower(*[pypto.spec(s, "float16") for s in specs],
                                              target=target)
        assert [wl.family for wl in compiled.workloads] == ["movement"]
        check_physics(compiled)
        for _ in range(4):
            check_physics(random_schedules(compiled, rng))
        assert space_for(compiled.workloads[0], compiled.target).size().value > 10


def test_numpy_functions_reach_the_ops():
    a = np.arange(6.0).reshape(2, 3)
    x = pypto.tensor(a, dtype="float32")
    np.testing.assert_array_equal(np.concatenate([x, x]).numpy(), np.concatenate([a, a]))
    np.testing.assert_array_equal(np.stack([x, x], axis=1).numpy(), np.stack([a, a], axis=1))
    np.testing.assert_array_equal(np.pad(x, 1).numpy(), np.pad(a, 1))
    assert [t.shape for t in np.split(x, 3, axis=1)] == [(2, 1)] * 3
    np.testing.assert_array_equal(x[::-1, ::-2].numpy(), a[::-1, ::-2])


def test_concatenate_promotes_dtypes_as_numpy():
    a = pypto.tensor(np.ones((2, 2)), dtype="float16")
    b = pypto.tensor(np.ones((2, 1)), dtype="float32")
    assert pypto.concatenate([a, b], axis=1).dtype == pypto.float32


@pytest.mark.parametrize("call, error, words", [
    (lambda x: pypto.concatenate(x), pypto.KernelError, "list or tuple of tensors"),
    (lambda x: pypto.concatenate([]), pypto.ShapeError, "at least one tensor"),
    (lambda x: pypto.concatenate([x, 3]), pypto.KernelError, "item 1 is a int"),
    (lambda x: pypto.concatenate([x, x], axis=2), pypto.ShapeError,
     "axis 2 is out of range for a 2-D"),
    (lambda x: pypto.concatenate([x, x[0]]), pypto.ShapeError, "same number of dimensions"),
    (lambda x: pypto.concatenate([x, x[:, :2]], axis=0), pypto.ShapeError,
     "tensor 1 has shape [4, 2] but tensor 0 has [4, 6]"),
    (lambda x: pypto.stack([x, x[:, :2]]), pypto.ShapeError, "same shape"),
    (lambda x: pypto.stack([x], axis=3), pypto.ShapeError, "axis 3 is out of range"),
    (lambda x: pypto.split(x, 4, axis=1), pypto.ShapeError, "does not divide into 4"),
    (lambda x: pypto.split(x, 0), pypto.ShapeError, "sections must be >= 1"),
    (lambda x: pypto.split(x, 2, axis=-3), pypto.ShapeError, "axis -3 is out of range"),
    (lambda x: pypto.pad(x, -1), pypto.ShapeError, "pad widths must be >= 0"),
    (lambda x: pypto.pad(x, ((1, 1), (2, 2), (3, 3))), pypto.ShapeError,
     "does not fit a 2-D tensor"),
    (lambda x: pypto.pad(x, 1.5), pypto.ShapeError, "pad_width must be ints"),
    (lambda x: pypto.pad(x, 1, mode="reflect"), pypto.UnsupportedError, "only 'constant'"),
    (lambda x: pypto.pad(x, 1, constant_values=(1, 2)), pypto.DTypeError, "one number"),
    (lambda x: pypto.pad(x.astype("int8"), 1, constant_values=300), pypto.ScalarOverflowError,
     "out of bounds for int8"),
    (lambda x: x[::0], pypto.ShapeError, "slice step cannot be zero"),
])
def test_bad_arguments_are_clear_errors(call, error, words):
    x = pypto.ones((4, 6), dtype="float32")
    with pytest.raises(error, match=re.escape(words)):
        pypto.kernel(call)(x)
