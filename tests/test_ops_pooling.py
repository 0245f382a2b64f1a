"""max_pool2d and avg_pool2d on the simulated NPU of every target, NHWC and NCHW, against
a NumPy pooling computed independently (float64), under default and random schedules;
each is one vector chain (plus a pad workload when padded); bad arguments."""

from __future__ import annotations

import random
import re
import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.lib.stride_tricks import sliding_window_view

import pypto
from tests.ops_support import SETTINGS, TARGETS, host, run_scheduled
from tests.test_sim_physics import check_physics, random_schedules


def pool_reference(x: np.ndarray, layout: str, kernel, stride, padding, how: str,
                   count_include_pad: bool = True) -> np.ndarray:
    """Pooling by NumPy's sliding windows over the padded input, in float64."""
    nhwc = x if layout == "NHWC" else x.transpose(0, 2, 3, 1)
    data = nhwc.astype(np.float64)
    ph, pw = padding
    fill = -np.inf if how == "max" else 0.0
    padded = np.pad(data, ((0, 0), (ph, ph), (pw, pw), (0, 0)), constant_values=fill)
    inside = np.pad(np.ones(data.shape[1:3]), ((ph, ph), (pw, pw)))
    win = sliding_window_view(padded, kernel, axis=(1, 2))[:, ::stride[0], ::stride[1]]
    if how == "max":
        out = win.max(axis=(-2, -1))
    else:
        count = sliding_window_view(inside, kernel)[::stride[0], ::stride[1]].sum(axis=(-2, -1))
        div = kernel[0] * kernel[1] if count_include_pad else count[None, :, :, None]
        out = win.sum(axis=(-2, -1)) / div
    out = out if layout == "NHWC" else out.transpose(0, 3, 1, 2)
    return out.astype(x.dtype)


@st.composite
def pooling_case(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, kernel[0] // 2)), draw(st.integers(0, kernel[1] // 2)))
    h = draw(st.integers(max(1, kernel[0] - 2 * padding[0]), 12))
    w = draw(st.integers(max(1, kernel[1] - 2 * padding[1]), 12))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 20))
    layout = draw(st.sampled_from(["NHWC", "NCHW"]))
    shape = (n, h, w, c) if layout == "NHWC" else (n, c, h, w)
    return shape, layout, kernel, stride, padding


def _run(data, x, layout, fn, expected, rtol, atol):  # type: ignore[no-untyped-def]
    return run_scheduled(data, fn, [x], expected, rtol=rtol, atol=atol, layouts=[layout])


@SETTINGS
@given(st.data(), pooling_case(), st.sampled_from(["float16", "float32", "int32"]))
def test_max_pool2d(data, case, dtype):
    shape, layout, kernel, stride, padding = case
    x = host(shape, dtype, 1)
    expected = pool_reference(x, layout, kernel, stride, padding, "max")
    compiled = _run(data, x, layout, lambda a: pypto.max_pool2d(a, kernel, stride, padding),
                    expected, 0, 0)
    families = [wl.family for wl in compiled.workloads]
    assert families.count("vector") <= 1 and families.count("movement") == (max(padding) > 0)


@SETTINGS
@given(st.data(), pooling_case(), st.sampled_from(["float16", "float32"]), st.booleans())
def test_avg_pool2d(data, case, dtype, include_pad):
    shape, layout, kernel, stride, padding = case
    x = host(shape, dtype, 2)
    expected = pool_reference(x, layout, kernel, stride, padding, "avg", include_pad)
    tol = 2e-3 if dtype == "float16" else 2e-6
    compiled = _run(data, x, layout,
                    lambda a: pypto.avg_pool2d(a, kernel, stride, padding, include_pad),
                    expected, tol, tol)
    families = [wl.family for wl in compiled.workloads]
    assert families.count("vector") <= 1  # the window sums in one fused chain


def test_results_keep_the_layout_and_shape_of_torch_conventions():
    x = pypto.tensor(np.zeros((1, 7, 9, 3)), dtype="float16", layout="NHWC")
    y = pypto.max_pool2d(x, 3, 2, 1)
    assert y.shape == (1, 4, 5, 3) and y.layout == "NHWC"
    z = pypto.avg_pool2d(pypto.tensor(np.zeros((1, 3, 7, 9)), dtype="float32"), (3, 1))
    assert z.shape == (1, 3, 2, 9)


def test_float16_averages_accumulate_in_float32():
    """Nine float16 values of 1000 sum past float16's integer precision (2048) but the
    float32 sum is exact, so the mean is exactly 1000 + the small offsets' mean."""
    x = np.full((1, 3, 3, 1), 1000.0, dtype=np.float16)
    x[0, 0, 0, 0] = 1001.0
    out = pypto.avg_pool2d(pypto.tensor(x, dtype="float16", layout="NHWC"), 3).numpy()
    assert out.item() == np.float16(1000 + 1 / 9)


@pytest.mark.parametrize("target", TARGETS)
def test_pooling_programs_never_beat_physics(target):
    rng = random.Random(1)
    for fn in (lambda a: pypto.max_pool2d(a, 3, 2, 1), lambda a: pypto.avg_pool2d(a, 2)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
            compiled = pypto.kernel(fn).lower(
                pypto.spec((2, 28, 28, 64), "float16", layout="NHWC"), target=target)
        check_physics(compiled)
        for _ in range(3):
            check_physics(random_schedules(compiled, rng))


@pytest.mark.parametrize("call, error, words", [
    (lambda x: pypto.max_pool2d(x[0], 2), pypto.LayoutError, "4-D NCHW or NHWC"),
    (lambda x: pypto.max_pool2d(x, 0), pypto.ShapeError, "kernel_size must be >= 1"),
    (lambda x: pypto.max_pool2d(x, 2, stride=(1, 0)), pypto.ShapeError, "stride must be >= 1"),
    (lambda x: pypto.max_pool2d(x, 2, padding=-1), pypto.ShapeError, "padding must be >= 0"),
    (lambda x: pypto.max_pool2d(x, 2, padding=2), pypto.ShapeError, "at most half"),
    (lambda x: pypto.max_pool2d(x, (2, 2, 2)), pypto.ShapeError, "an int or a pair"),
    (lambda x: pypto.avg_pool2d(x, 9), pypto.ShapeError, "does not fit the 8x8 input"),
    (lambda x: pypto.avg_pool2d(x.astype("int32"), 2), pypto.DTypeError,
     "avg_pool2d needs a float tensor"),
])
def test_bad_arguments_are_clear_errors(call, error, words):
    x = pypto.ones((1, 8, 8, 4), dtype="float32", layout="NHWC")
    with pytest.raises(error, match=re.escape(words)):
        pypto.kernel(call)(x)
