"""Grouped and depthwise conv2d on the simulated NPU (issue 16, item 6).

A grouped conv is one implicit GEMM per group on the cube; a depthwise conv (one
channel per group) may also run on the vector unit (``engine="vector"``). Every
schedule, default or random, on every target, gives the numbers of an independent
NumPy convolution (written here, tap by tap, not the package's CPU reference), and no
simulated program beats the roofline."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.schedule_space import space_for, validate
from pypto.schedule_space.conv2d import num_blocks, shape_of
from pypto.targets import available_targets, load_target
from tests.strategies import check_programs, random_schedule
from tests.test_sim_physics import check_physics

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
pytestmark = pytest.mark.filterwarnings("ignore:.*no tuned schedule")


def numpy_conv(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], padding: tuple[int, int],
               dilation: tuple[int, int], groups: int) -> np.ndarray:
    """NCHW ``x`` by KCRS ``w`` (``C / groups`` channels per filter), in float64, one
    tap ``(r, s)`` at a time: ``out[n, k] += x[n, group(k)'s channels, shifted] .
    w[k, :, r, s]``."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    oh = (h + 2 * ph - dh * (r - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (s - 1) - 1) // sw + 1
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw))
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    wg = w.astype(np.float64).reshape(groups, k // groups, cg, r, s)
    out = np.zeros((n, groups, k // groups, oh, ow))
    for i in range(r):
        for j in range(s):
            patch = xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                       j * dw:j * dw + sw * (ow - 1) + 1:sw]
            patch = patch.reshape(n, groups, cg, oh, ow)
            out += np.einsum("ngchw,gkc->ngkhw", patch, wg[:, :, :, i, j])
    return out.reshape(n, k, oh, ow)


def _close(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    got = got.astype(np.float64)
    if dtype == "int8":
        np.testing.assert_array_equal(got, want)
        return
    rtol = 4e-3 if dtype == "float16" else 2e-5
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


@st.composite
def grouped_cases(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    """(N, C, H, W, K, groups, R, S, stride, padding, dilation): a grouped conv, often
    depthwise (groups = C), sometimes with a channel multiplier (K = m * C)."""
    groups = draw(st.integers(1, 8))
    cg = draw(st.sampled_from([1, 1, 2, 3, 4, 16]))
    kg = draw(st.sampled_from([1, 1, 2, 5, 16]))
    n = draw(st.integers(1, 2))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, dilation[0] * (r - 1) + 1 - 2 * padding[0]), 10))
    w = draw(st.integers(max(1, dilation[1] * (s - 1) + 1 - 2 * padding[1]), 10))
    return n, cg * groups, h, w, kg * groups, groups, r, s, stride, padding, dilation


def _data(case, dtype: str, seed: int):  # type: ignore[no-untyped-def]
    n, c, h, w, k, groups, r, s, *_ = case
    rng = np.random.default_rng(seed)
    if dtype == "int8":
        return (rng.integers(-8, 8, (n, c, h, w)).astype(np.float64),
                rng.integers(-8, 8, (k, c // groups, r, s)).astype(np.float64))
    x = rng.uniform(-2, 2, (n, c, h, w)).astype(dtype).astype(np.float64)
    wt = rng.uniform(-2, 2, (k, c // groups, r, s)).astype(dtype).astype(np.float64)
    return x, wt


def reads_every_input(h: int, w: int, r: int, s: int, stride, padding, dilation) -> bool:
    """Whether the conv's taps touch every input pixel. Only then do the compulsory
    bytes of the roofline (each input read once) bind: a stride larger than the taps
    cover skips input rows or columns, which no schedule reads."""
    def covered(size: int, taps: int, st_: int, pad: int, dil: int) -> bool:
        out = (size + 2 * pad - dil * (taps - 1) - 1) // st_ + 1
        hit = {o * st_ - pad + t * dil for o in range(out) for t in range(taps)}
        return all(i in hit for i in range(size))
    return covered(h, r, stride[0], padding[0], dilation[0]) and \
        covered(w, s, stride[1], padding[1], dilation[1])


def _run(case, dtype: str, layout: str, relu: bool, target: str, data: st.DataObject,
         schedules: int = 2) -> pypto.Compiled:
    """The conv under its default schedule and ``schedules`` random ones, each against
    ``numpy_conv``; programs race-free and within the roofline."""
    n, c, h, w, k, groups, r, s, stride, padding, dilation = case
    x, wt = _data(case, dtype, seed=data.draw(st.integers(0, 99), label="seed"))
    want = numpy_conv(x, wt, stride, padding, dilation, groups)
    if relu:
        want = np.maximum(want, 0)
    if layout == "NHWC":
        xt = pypto.tensor(x.transpose(0, 2, 3, 1), dtype=dtype, layout="NHWC")
        want = want.transpose(0, 2, 3, 1)
    else:
        xt = pypto.tensor(x, dtype=dtype)
    wtt = pypto.tensor(wt, dtype=dtype)

    def fn(a, b):  # type: ignore[no-untyped-def]
        y = pypto.conv2d(a, b, stride=stride, padding=padding, dilation=dilation,
                         groups=groups)
        return pypto.relu(y) if relu else y

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        compiled = pypto.kernel(fn).lower(xt, wtt, target=load_target(target))
    i = next(j for j, wl in enumerate(compiled.workloads) if wl.family == "conv2d")
    conv = compiled.workloads[i]
    assert shape_of(conv).groups == groups
    physics = reads_every_input(h, w, r, s, stride, padding, dilation)
    for attempt in range(schedules + 1):
        if attempt:
            sched = data.draw(random_schedule(conv, compiled.target, max_units=96))
            compiled = compiled.with_schedule(i, sched)
        check_programs(compiled)
        if physics:
            check_physics(compiled)
        _close(compiled(xt, wtt).numpy(), want, dtype)
    return compiled


@SETTINGS
@given(st.data(), grouped_cases(), st.sampled_from(["float16", "float32"]),
       st.sampled_from(["NCHW", "NHWC"]), st.booleans())
@pytest.mark.parametrize("target", available_targets())
def test_grouped_conv_matches_numpy_on_every_target(target, data, case, dtype, layout, relu):
    _run(case, dtype, layout, relu, target, data)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), grouped_cases())
def test_grouped_conv_int8(data, case):
    _run(case, "int8", "NHWC", False, "ascend910b", data, schedules=1)


def _conv_workload(x_shape, w_shape, groups, **kw):  # type: ignore[no-untyped-def]
    compiled = pypto.kernel(lambda a, b: pypto.conv2d(a, b, groups=groups, **kw)).lower(
        pypto.spec(x_shape, "float16", layout="NHWC"), pypto.spec(w_shape, "float16"),
        target="ascend910b")
    return next(wl for wl in compiled.workloads if wl.family == "conv2d"), compiled


def test_a_group_is_a_gemm_of_its_own_channels():
    """ResNeXt-style groups=32: the space counts every group's blocks, the flops (and
    the roofline's cube work) are those of 32 GEMMs of 4 channels, not of one of 128."""
    from pypto.sim.roofline import workload_bound

    wl, _ = _conv_workload((1, 14, 14, 128), (128, 4, 3, 3), 32, padding=1)
    dense, _ = _conv_workload((1, 14, 14, 128), (128, 128, 3, 3), 1, padding=1)
    sh = shape_of(wl)
    assert (sh.c, sh.k, sh.groups, sh.c_total, sh.k_total) == (4, 4, 32, 128, 128)
    assert wl.flops * 32 == dense.flops == 2 * 14 * 14 * 128 * 9 * 128
    s = space_for(wl, load_target("ascend910b")).default()
    assert num_blocks(wl, s) % 32 == 0
    target = load_target("ascend910b")
    assert workload_bound(wl, target) <= workload_bound(dense, target)


def test_random_grouped_schedules_never_beat_physics():
    rng = random.Random(0)
    for target in available_targets():
        for groups, cg, kg in ((32, 4, 4), (8, 16, 16), (24, 1, 1), (16, 1, 2)):
            c, k = groups * cg, groups * kg
            compiled = pypto.kernel(lambda a, b, g=groups: pypto.conv2d(
                a, b, padding=1, groups=g)).lower(
                pypto.spec((1, 12, 12, c), "float16", layout="NHWC"),
                pypto.spec((k, cg, 3, 3), "float16"), target=load_target(target))
            i = next(j for j, wl in enumerate(compiled.workloads) if wl.family == "conv2d")
            check_physics(compiled)
            space = space_for(compiled.workloads[i], compiled.target)
            for _ in range(4):
                s = space.sample(rng)
                assert not validate(compiled.workloads[i], s, compiled.target)
                check_physics(compiled.with_schedule(i, s))


def test_depthwise_runs_on_the_vector_unit_by_default_and_beats_the_cube():
    """MobileNet-style 3x3 depthwise (stride 1, padding 1) + ReLU: the default runs the
    conv on the vector unit and the ReLU as a pass of its own; in simulated cycles it
    beats the cube's per-channel GEMMs under their own default."""
    from pypto.schedule_space.conv2d import cube_default

    x = pypto.spec((1, 28, 28, 64), "float16", layout="NHWC")
    w = pypto.spec((64, 1, 3, 3), "float16")
    compiled = pypto.kernel(lambda a, b: pypto.relu(pypto.conv2d(a, b, padding=1,
                                                                 groups=64))).lower(
        x, w, target="ascend910b")
    i = next(j for j, wl in enumerate(compiled.workloads) if wl.family == "conv2d")
    s = compiled.schedules[i]
    assert s["engine"] == "vector" and s["fuse_tail"] is False
    cube = compiled.with_schedule(i, cube_default(compiled.workloads[i], compiled.target))
    assert compiled.simulate().cycles < cube.simulate().cycles
    ops = {int(op) for core in compiled.programs[i].cores for op in core["op"]}
    from pypto.codegen.isa import Op

    assert Op.MMAD not in ops and {Op.VMUL, Op.VADD} <= ops


def test_the_vector_engine_is_offered_for_float_depthwise_only():
    target = load_target("ascend910b")
    for groups, w_shape, dtype, offered in ((16, (16, 1, 3, 3), "float16", True),
                                            (16, (32, 1, 3, 3), "float16", False),
                                            (8, (16, 2, 3, 3), "float32", False),
                                            (16, (16, 1, 3, 3), "int8", False)):
        compiled = pypto.kernel(lambda a, b, g=groups: pypto.conv2d(a, b, groups=g)).lower(
            pypto.spec((1, 6, 6, 16), dtype, layout="NHWC"), pypto.spec(w_shape, dtype),
            target=target)
        wl = next(wl for wl in compiled.workloads if wl.family == "conv2d")
        assert ("engine" in space_for(wl, target).axes) is offered, (w_shape, dtype)
