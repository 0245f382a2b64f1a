"""Layouts that cost what they should (issue 16, item 4).

An NCHW conv reads its input and KCRS weights as they lie and writes NCHW
(``conv2d_nchw``), an NHWC conv reads KRSC weights as stored: no copy workloads. Every
schedule (im2col per tap from GM, or staged through UB) on every target gives the
numbers of an independent NumPy convolution, and no program beats the roofline; the
DMAs are charged by the runs they really move."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.frontend.ops.linalg import conv2d_converted
from pypto.schedule_space import space_for
from pypto.schedule_space.conv2d import shape_of
from pypto.targets import available_targets, load_target
from tests.strategies import check_programs, random_schedule
from tests.test_conv_grouped import numpy_conv, reads_every_input
from tests.test_sim_physics import check_physics

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
pytestmark = pytest.mark.filterwarnings("ignore:.*no tuned schedule")
F16 = "float16"


@st.composite
def nchw_cases(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    n, c, k = draw(st.integers(1, 3)), draw(st.integers(1, 24)), draw(st.integers(1, 24))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, dilation[0] * (r - 1) + 1 - 2 * padding[0]), 12))
    w = draw(st.integers(max(1, dilation[1] * (s - 1) + 1 - 2 * padding[1]), 12))
    return n, c, h, w, k, r, s, stride, padding, dilation


def _lower(fn, *args, target="ascend910b"):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        return pypto.kernel(fn).lower(*args, target=load_target(target))


@SETTINGS
@given(st.data(), nchw_cases(), st.sampled_from(["float16", "float32"]),
       st.sampled_from([None, "relu", "bias_relu"]))
@pytest.mark.parametrize("target", available_targets())
def test_nchw_conv_matches_numpy_on_every_target(target, data, case, dtype, tail):
    """Default and random schedules (half of them staged) of an NCHW conv with a tail:
    one workload, the right numbers, race-free programs within the roofline."""
    n, c, h, w, k, r, s, stride, padding, dilation = case
    rng = np.random.default_rng(data.draw(st.integers(0, 99), label="seed"))
    x = rng.uniform(-2, 2, (n, c, h, w)).astype(dtype)
    wt = rng.uniform(-2, 2, (k, c, r, s)).astype(dtype)
    bias = rng.uniform(-2, 2, (k, 1, 1)).astype(dtype)
    want = numpy_conv(x.astype(np.float64), wt.astype(np.float64), stride, padding, dilation, 1)
    if tail == "bias_relu":
        want = want + bias.astype(np.float64)
    if tail is not None:
        want = np.maximum(want, 0)
    args = [pypto.tensor(a, dtype=dtype) for a in (x, wt, bias)]

    def fn(a, b, bb):  # type: ignore[no-untyped-def]
        y = pypto.conv2d(a, b, stride=stride, padding=padding, dilation=dilation)
        if tail == "bias_relu":
            y = y + bb
        return pypto.relu(y) if tail else y

    compiled = _lower(fn, *args, target=target)
    assert [wl.family for wl in compiled.workloads] == ["conv2d"]
    conv = compiled.workloads[0]
    assert shape_of(conv).layout == "NCHW"
    physics = reads_every_input(h, w, r, s, stride, padding, dilation)
    rtol = 4e-3 if dtype == F16 else 2e-5
    for attempt in range(3):
        if attempt:
            compiled = compiled.with_schedule(0, data.draw(random_schedule(
                conv, compiled.target, max_units=96)))
        check_programs(compiled)
        if physics:
            check_physics(compiled)
        got = compiled(*args).numpy().astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=rtol,
                                   atol=rtol * max(1.0, float(np.abs(want).max())))


def test_nchw_and_nhwc_convs_have_no_copy_workloads():
    nchw = _lower(lambda a, b: pypto.relu(pypto.conv2d(a, b, padding=1, stride=2)),
                  pypto.spec((2, 16, 14, 14), F16), pypto.spec((32, 16, 3, 3), F16))
    nhwc = _lower(lambda a, b: pypto.conv2d(a, b, padding=1),
                  pypto.spec((2, 14, 14, 16), F16, layout="NHWC"),
                  pypto.spec((32, 3, 3, 16), F16, layout="NHWC"))
    assert [wl.ops for wl in nchw.workloads] == [("conv2d_nchw", "relu")]
    assert [wl.ops for wl in nhwc.workloads] == [("conv2d_nhwc",)]
    assert nchw.simulate().cycles > 0 and nhwc.simulate().cycles > 0


def test_reading_nchw_directly_beats_converting_it():
    """ResNet-50's stage-4 3x3 conv (14x14x256, padding 1): the direct NCHW kernel, under
    its default, takes fewer simulated cycles than the conversions plus the NHWC conv."""
    x, w = pypto.spec((1, 256, 14, 14), F16), pypto.spec((256, 256, 3, 3), F16)
    direct = _lower(lambda a, b: pypto.conv2d(a, b, padding=1), x, w)
    converted = _lower(lambda a, b: conv2d_converted(a, b, padding=1), x, w)
    assert direct.schedules[0]["im2col"] == "staged"
    assert direct.simulate().cycles < converted.simulate().cycles


def test_staging_sends_fewer_bursts_than_per_tap_reads():
    """Per-tap reads of a narrow NCHW image move 28-byte runs, each charged a 512-byte
    burst; staging the chunk's input rows in UB reads whole planes: fewer GM bytes
    charged, and the DRAM never serves fewer lines than the input holds."""
    x, w = pypto.spec((1, 64, 14, 14), F16), pypto.spec((64, 64, 3, 3), F16)
    compiled = _lower(lambda a, b: pypto.conv2d(a, b, padding=1), x, w)
    staged = compiled.schedules[0]
    assert staged["im2col"] == "staged"
    tap = compiled.with_schedule(0, staged.replace(im2col="tap"))
    r_staged, r_tap = compiled.simulate(), tap.simulate()
    mte2 = 1  # Pipe.MTE2
    assert r_staged.pipe_busy[:, mte2].sum() < r_tap.pipe_busy[:, mte2].sum()
    for r in (r_staged, r_tap):
        assert r.dram_read_bytes >= 64 * 14 * 14 * 2 + 64 * 64 * 9 * 2
        assert r.cycles >= r.bound_cycles


def test_the_layout_is_in_the_space_as_im2col():
    x, w = pypto.spec((1, 8, 6, 6), F16), pypto.spec((8, 8, 3, 3), F16)
    compiled = _lower(lambda a, b: pypto.conv2d(a, b, padding=1), x, w)
    space = space_for(compiled.workloads[0], compiled.target)
    assert space.axes["im2col"].choices == ("tap", "staged")
    nhwc = _lower(lambda a, b: pypto.conv2d(a, b, padding=1),
                  pypto.spec((1, 6, 6, 8), F16, layout="NHWC"), w)
    conv = next(wl for wl in nhwc.workloads if wl.family == "conv2d")
    assert "staged" not in space_for(conv, nhwc.target).axes["im2col"].choices


def test_nhwc_tensors_keep_working():
    data = np.random.default_rng(3).uniform(-1, 1, (1, 6, 6, 8))
    x = pypto.tensor(data, dtype=F16, layout="NHWC")
    wt = np.random.default_rng(4).uniform(-1, 1, (4, 8, 3, 3))
    y = pypto.conv2d(x, pypto.tensor(wt, dtype=F16), padding=1)
    assert y.layout == "NHWC" and y.shape == (1, 6, 6, 4)
    want = numpy_conv(data.transpose(0, 3, 1, 2).astype(F16).astype(np.float64),
                      wt.astype(F16).astype(np.float64), (1, 1), (1, 1), (1, 1), 1)
    np.testing.assert_allclose(y.numpy().astype(np.float64), want.transpose(0, 2, 3, 1),
                               rtol=4e-3, atol=4e-3 * max(1.0, float(np.abs(want).max())))
