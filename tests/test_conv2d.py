"""conv2d on the simulated NPU: an implicit GEMM with im2col in L1. Random shapes,
layouts, dtypes, epilogues and schedules give the CPU reference's numbers; layout
conversions are copy workloads whose time counts; the schedule space is rich and
agrees with code generation."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.codegen.conv2d import im2col_copies
from pypto.schedule_space import Schedule, space_for, validate
from pypto.schedule_space.conv2d import num_blocks, shape_of
from tests.strategies import assert_close, random_schedule, run_both, tensor_of

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
F16, F32 = "float16", "float32"


@st.composite
def conv_schedule(draw: st.DrawFn, workload, target) -> Schedule:  # type: ignore[no-untyped-def]
    """A random point of a conv2d space (valid by construction); other families as in
    ``tests.strategies``. Points with more than ~64 blocks are redrawn (test time)."""
    if workload.family != "conv2d":
        return draw(random_schedule(workload, target))
    return draw(random_schedule(workload, target, max_units=64))


@st.composite
def conv_cases(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    """(N, C, H, W, K, R, S, stride, padding, dilation) with a non-empty output."""
    n, c, k = draw(st.integers(1, 2)), draw(st.integers(1, 20)), draw(st.integers(1, 20))
    r, s = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = (draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    h = draw(st.integers(max(1, dilation[0] * (r - 1) + 1 - 2 * padding[0]), 12))
    w = draw(st.integers(max(1, dilation[1] * (s - 1) + 1 - 2 * padding[1]), 12))
    return n, c, h, w, k, r, s, stride, padding, dilation


def _input(data: np.ndarray, layout: str, dtype: str, c0: int) -> pypto.Tensor:
    """NCHW ``data`` as a tensor of ``layout``."""
    n, c, h, w = data.shape
    if layout == "NHWC":
        return pypto.tensor(data.transpose(0, 2, 3, 1), dtype=dtype, layout="NHWC")
    if layout == "NC1HWC0":
        blocks = data.reshape(n, c // c0, c0, h, w).transpose(0, 1, 3, 4, 2)
        return pypto.tensor(blocks, dtype=dtype, layout="NC1HWC0")
    return pypto.tensor(data, dtype=dtype)


def _scheduled(data: st.DataObject, fn, *args, target=None):  # type: ignore[no-untyped-def]
    """Default schedules, then random valid ones, each against the CPU reference."""
    npu, cpu, compiled = run_both(fn, *args, target=target)
    assert_close(npu, cpu, "")
    assert "conv2d" in [wl.family for wl in compiled.workloads]
    schedules = {i: data.draw(conv_schedule(wl, compiled.target))
                 for i, wl in enumerate(compiled.workloads)}
    npu2, cpu2, _ = run_both(fn, *args, schedules=schedules, target=target)
    assert_close(npu2, cpu2, "")
    return compiled


@SETTINGS
@given(st.data(), conv_cases(), st.sampled_from(["NCHW", "NHWC", "NC1HWC0"]),
       st.sampled_from([F16, F32]), st.sampled_from([None, "relu", "bias_relu"]),
       st.booleans())
def test_conv2d_matches_cpu(data, case, layout, dtype, epilogue, krsc_weights):
    n, c, h, w, k, r, s, stride, padding, dilation = case
    c0 = data.draw(st.sampled_from([d for d in range(1, c + 1) if c % d == 0]))
    x = _input(tensor_of((n, c, h, w), dtype, 1).numpy(), layout, dtype, c0)
    wt = tensor_of((k, c, r, s), dtype, 2)
    if krsc_weights:
        wt = pypto.tensor(wt.numpy().transpose(0, 2, 3, 1), dtype=dtype, layout="NHWC")
    bias = tensor_of((k,) if layout == "NHWC" else (k, 1, 1), dtype, 3)

    def fn(a, b, bb):  # type: ignore[no-untyped-def]
        y = pypto.conv2d(a, b, stride=stride, padding=padding, dilation=dilation)
        if epilogue == "relu":
            return pypto.relu(y)
        if epilogue == "bias_relu" and layout != "NC1HWC0":
            return pypto.relu(y + bb)
        return y

    compiled = _scheduled(data, fn, x, wt, bias)
    conv = next(wl for wl in compiled.workloads if wl.family == "conv2d")
    if epilogue is not None and layout != "NC1HWC0":
        assert conv.ops[-1] == "relu"  # the tail is the conv workload's epilogue


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), conv_cases())
def test_conv2d_int8(data, case):
    n, c, h, w, k, r, s, stride, padding, dilation = case
    x = tensor_of((n, h, w, c), "int8", 4)
    x = pypto.tensor(x.numpy(), dtype="int8", layout="NHWC")
    wt = tensor_of((k, c, r, s), "int8", 5)
    _scheduled(data, lambda a, b: pypto.conv2d(a, b, stride=stride, padding=padding,
                                               dilation=dilation), x, wt)


def test_residual_epilogue_reads_the_conv_input_again():
    """``relu(conv(x) + x)`` (NHWC, same shape): the input is both the conv's operand and
    the epilogue's; one fused workload computes it."""
    x = pypto.tensor(tensor_of((1, 6, 6, 16), F16, 6).numpy(), dtype=F16, layout="NHWC")
    wt = tensor_of((16, 16, 3, 3), F16, 7) * 0.1
    npu, cpu, compiled = run_both(lambda a, b: pypto.relu(pypto.conv2d(a, b, padding=1) + a),
                                  x, wt)
    assert_close(npu, cpu, "")
    conv = next(wl for wl in compiled.workloads if wl.family == "conv2d")
    assert conv.ops == ("conv2d_nhwc", "add", "relu")


# -- layouts ------------------------------------------------------------------------------

def _copies(compiled) -> list:  # type: ignore[no-untyped-def]
    return [wl for wl in compiled.workloads if wl.ops == ("copy",)]


def test_layout_conversions_are_copy_workloads_whose_time_counts():
    """Where an NCHW conv is converted (``conv2d_converted``, or a grouped NCHW conv),
    each conversion is a copy workload and its time counts."""
    from pypto.frontend.ops.linalg import conv2d_converted

    x = pypto.spec((1, 8, 10, 10), F16)          # NCHW
    w = pypto.spec((16, 8, 3, 3), F16)           # KCRS
    compiled = pypto.kernel(lambda a, b: conv2d_converted(a, b, padding=1)).lower(x, w)
    grouped = pypto.kernel(lambda a, b: pypto.conv2d(a, b, padding=1, groups=2)).lower(
        x, pypto.spec((16, 4, 3, 3), F16))
    assert len(_copies(grouped)) == 3    # the input in, the weights, the result out
    copies = {wl.output_specs[0].shape for wl in _copies(compiled)}
    assert (1, 10, 10, 8) in copies              # NCHW -> NHWC input
    assert (3, 3, 8, 16) in copies               # KCRS -> RSCK weights
    assert (1, 16, 10, 10) in copies             # NHWC -> NCHW result
    conv = next(wl for wl in compiled.workloads if wl.family == "conv2d")
    assert conv.inputs[0].layout == "NHWC" and conv.inputs[0].shape == (1, 10, 10, 8)
    each = compiled.simulate_each()
    total = compiled.simulate()
    assert total.cycles == sum(r.cycles for r in each)
    for wl, r in zip(compiled.workloads, each):
        assert r.cycles > 0 and r.cycles >= r.bound_cycles, wl


def test_nhwc_input_needs_no_conversion():
    """NHWC input, KRSC weights: one conv workload; the weights' ``[K, R*S*C]`` rows
    are read as stored (L1 holds the B tile transposed)."""
    x = pypto.spec((1, 10, 10, 8), F16, layout="NHWC")
    w = pypto.spec((16, 3, 3, 8), F16, layout="NHWC")  # KRSC
    compiled = pypto.kernel(lambda a, b: pypto.relu(pypto.conv2d(a, b))).lower(x, w)
    assert _copies(compiled) == []
    assert [wl.family for wl in compiled.workloads] == ["conv2d"]
    assert compiled.workloads[0].ops == ("conv2d_nhwc", "relu")
    assert compiled.workloads[0].inputs[1].shape == (16, 3, 3, 8)   # as given


def test_nchw_input_is_read_and_written_as_it_lies():
    """NCHW input, KCRS weights, one group: one ``conv2d_nchw`` workload (no copy) whose
    inputs are the tensors as given, and it beats the converted path in simulated
    cycles."""
    from pypto.frontend.ops.linalg import conv2d_converted

    x, w = pypto.spec((1, 32, 28, 28), F16), pypto.spec((32, 32, 3, 3), F16)
    direct = pypto.kernel(lambda a, b: pypto.conv2d(a, b, padding=1)).lower(x, w)
    assert [wl.ops for wl in direct.workloads] == [("conv2d_nchw",)]
    conv = direct.workloads[0]
    assert [i.shape for i in conv.inputs[:2]] == [(1, 32, 28, 28), (32, 32, 3, 3)]
    assert conv.output_specs[0].shape == (1, 32, 28, 28)
    converted = pypto.kernel(lambda a, b: conv2d_converted(a, b, padding=1)).lower(x, w)
    assert direct.simulate().cycles < converted.simulate().cycles


def test_nc1hwc0_input_and_result_layout():
    data = np.random.default_rng(8).uniform(-1, 1, (2, 32, 5, 5))
    x = _input(data, "NC1HWC0", F16, 16)
    w = tensor_of((48, 32, 3, 3), F16, 9)
    npu, cpu, compiled = run_both(lambda a, b: pypto.conv2d(a, b, padding=1), x, w)
    assert_close(npu, cpu, "")
    assert npu.shape == (2, 3, 5, 5, 16) and npu.layout == "NC1HWC0"
    ref = pypto.conv2d(pypto.tensor(data, dtype=F32), pypto.tensor(w.numpy(), dtype=F32),
                       padding=1).numpy()
    got = npu.numpy().transpose(0, 1, 4, 2, 3).reshape(2, 48, 5, 5)
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=5e-2)
    assert (2, 5, 5, 2, 16) in {wl.output_specs[0].shape for wl in _copies(compiled)}


def test_result_layout_follows_the_input():
    w = pypto.rand((4, 3, 3, 3), F32, seed=1)
    nchw = pypto.conv2d(pypto.rand((1, 3, 6, 6), F32, seed=2), w)
    nhwc = pypto.conv2d(pypto.rand((1, 6, 6, 3), F32, seed=2, layout="NHWC"), w)
    assert (nchw.layout, nchw.shape) == ("NCHW", (1, 4, 4, 4))
    assert (nhwc.layout, nhwc.shape) == ("NHWC", (1, 4, 4, 4))


# -- fusion -------------------------------------------------------------------------------

def test_guide_fuse_conv_relu_makes_one_conv_workload():
    @pypto.kernel(fuse={'conv': 'relu'})
    def conv_relu(x, weight):
        return pypto.relu(pypto.conv2d(x, weight))

    x = pypto.rand((1, 3, 8, 8), F32, seed=1) - 0.5
    w = pypto.rand((4, 3, 3, 3), F32, seed=2) - 0.5
    compiled = conv_relu.lower(x, w)
    conv = [wl for wl in compiled.workloads if wl.family == "conv2d"]
    assert len(conv) == 1 and conv[0].ops == ("conv2d_nchw", "relu")  # ReLU by FIX
    assert "relu" not in [op for wl in compiled.workloads if wl.family == "vector"
                          for op in wl.ops]
    assert_close(conv_relu(x, w), compiled.run_reference(x, w), "")
    # The fusion is forced: the space offers only fused schedules.
    assert space_for(conv[0], compiled.target).axes["fuse_tail"].choices == (True,)
    # A pattern the kernel cannot fuse is an error naming the ops.
    with pytest.raises(pypto.KernelError, match="fuse relu into matmul.*the kernel has no matmul"):
        pypto.kernel(fuse={'matmul': 'relu'})(conv_relu.fn).lower(x, w)


# -- schedule space -------------------------------------------------------------------------

def _conv_workload(x_shape, w_shape, target="ascend910b", fn=None, **kw):  # type: ignore[no-untyped-def]
    fn = fn or (lambda a, b: pypto.conv2d(a, b, **kw))
    compiled = pypto.kernel(fn).lower(pypto.spec(x_shape, F16, layout="NHWC"),
                                      pypto.spec(w_shape, F16), target=target)
    return next(wl for wl in compiled.workloads if wl.family == "conv2d"), compiled.target


def test_resnet50_3x3_space_is_rich_and_its_default_is_good():
    """ResNet-50's 3x3 conv (56x56x64 -> 64, pad 1): over 10^4 valid schedules; the
    default (whole output rows per block, all cube cores) beats most random points."""
    from pypto.codegen.lower import lower
    from pypto.sim.timing import simulate

    wl, target = _conv_workload((1, 56, 56, 64), (64, 64, 3, 3), padding=1)
    space = space_for(wl, target)
    assert space.size().value >= 10_000
    default = space.default()
    assert space.validate(default) == []
    assert default["row_block"] > 0 and default["cores"] == target.cube_cores
    rng = random.Random(0)
    samples = [space.sample(rng) for _ in range(40)]
    assert all(space.validate(s) == [] for s in samples)
    cycles = [simulate(lower(wl, s, target), target).cycles for s in samples[:8]]
    assert simulate(lower(wl, default, target), target).cycles <= sorted(cycles)[4]


@pytest.mark.parametrize("fn, x_shape, w_shape, kw", [
    (None, (1, 56, 56, 64), (64, 64, 3, 3), {"padding": 1}),
    (None, (2, 7, 9, 20), (12, 20, 3, 2), {"stride": 2, "padding": (2, 0), "dilation": 2}),
    (lambda a, b: pypto.gelu(pypto.conv2d(a, b) * 0.5), (1, 9, 300, 4), (8, 4, 1, 1), {}),
])
@pytest.mark.parametrize("target", ["ascend910b", "ascend310"])
def test_space_validate_agrees_with_lowering(fn, x_shape, w_shape, kw, target):
    """Raw grid points: valid per the space iff codegen accepts them; problems name an
    axis or the bytes; neighbours of the default are valid."""
    from pypto.codegen.lower import lower

    wl, tgt = _conv_workload(x_shape, w_shape, target, fn, **kw)
    space = space_for(wl, tgt)
    rng = random.Random(1)
    valid = 0
    for _ in range(150):
        knobs = {n: a.choices[rng.randrange(len(a.choices))] for n, a in space.axes.items()}
        problems = space.validate(knobs)
        assert bool(problems) == bool(validate(wl, Schedule(knobs), tgt)), knobs
        if problems:
            assert all(any(axis in p for axis in knobs) or "bytes" in p for p in problems)
        elif valid < 3 and num_blocks(wl, knobs) <= 64:
            valid += 1
            assert lower(wl, Schedule(knobs), tgt).num_instructions > 0
    for s in space.neighbors(space.default()):
        assert validate(wl, s, tgt) == []


def test_row_block_fixes_m1():
    wl, target = _conv_workload((1, 56, 56, 64), (64, 64, 3, 3), padding=1)
    space = space_for(wl, target)
    bad = space.default().replace(row_block=2, m1=128)
    assert any("row_block=2" in p and "112" in p for p in space.validate(bad))
    assert any("row_block=2" in p for p in validate(wl, bad, target))


def test_grouped_conv_runs_on_the_npu_as_on_the_cpu():
    """(Grouped and depthwise convs in depth: tests/test_conv_grouped.py.)"""
    x, w = pypto.rand((1, 4, 6, 6), F32, seed=1), pypto.rand((4, 1, 3, 3), F32, seed=2)
    y = pypto.conv2d(x, w, groups=4)
    with pypto.Context(device_type="cpu"):
        ref = pypto.conv2d(x, w, groups=4)
    assert y.shape == ref.shape == (1, 4, 4, 4)
    assert_close(y, ref, "")


# -- targets and timing -----------------------------------------------------------------------

@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), conv_cases(), st.sampled_from(["NCHW", "NHWC"]))
def test_conv2d_on_ascend310(data, case, layout):
    n, c, h, w, k, r, s, stride, padding, dilation = case
    x = _input(tensor_of((n, c, h, w), F16, 10).numpy(), layout, F16, 1)
    wt = tensor_of((k, c, r, s), F16, 11)
    _scheduled(data, lambda a, b: pypto.relu(pypto.conv2d(
        a, b, stride=stride, padding=padding, dilation=dilation)), x, wt, target="ascend310")


def test_bound_counts_the_convolution_macs():
    wl, target = _conv_workload((1, 28, 28, 128), (128, 128, 3, 3), padding=1)
    from pypto.sim.roofline import workload_bound

    macs = 28 * 28 * 128 * 9 * 128
    cube = macs / (target.cube_cores * target.macs_per_cycle(F16))
    assert workload_bound(wl, target) >= target.launch_overhead_cycles + cube
    sh = shape_of(wl)
    assert (sh.m, sh.red, sh.k) == (28 * 28, 9 * 128, 128)


# -- im2col ---------------------------------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(conv_cases(), st.data(), st.booleans())
def test_im2col_copies_fill_every_tile_element_once(case, data, filter_rows):
    n, c, h, w, k, r, s, stride, padding, dilation = case
    wl, _ = _conv_workload((n, h, w, c), (k, c, r, s), stride=stride, padding=padding,
                           dilation=dilation)
    sh = shape_of(wl)
    p_at = data.draw(st.integers(0, sh.m - 1))
    pixels = data.draw(st.integers(1, sh.m - p_at))
    k_at = data.draw(st.integers(0, sh.red - 1))
    kcur = data.draw(st.integers(1, sh.red - k_at))
    x = np.arange(n * h * w * c).reshape(n, h, w, c) + 1
    xp = np.pad(x, ((0, 0), (padding[0],) * 2, (padding[1],) * 2, (0, 0)))
    want = np.zeros((pixels, kcur), dtype=np.int64)
    for i in range(pixels):
        img, rest = divmod(p_at + i, sh.oh * sh.ow)
        oh, ow = divmod(rest, sh.ow)
        for j in range(kcur):
            tap, ch = divmod(k_at + j, c)
            rr, ss = divmod(tap, s)
            want[i, j] = xp[img, oh * stride[0] + rr * dilation[0],
                            ow * stride[1] + ss * dilation[1], ch]
    got = np.full((pixels, kcur), -1, dtype=np.int64)
    flat = x.reshape(-1)
    for cp in im2col_copies(sh, 0, (h * w * c, w * c, c, 1), p_at, pixels, k_at, kcur,
                            filter_rows):
        region = got[cp.row:cp.row + cp.rows, cp.col:cp.col + cp.cols]
        assert (region == -1).all(), "an element is written twice"
        if cp.src is None:
            region[...] = 0
        else:
            rows = cp.src + cp.src_rs * np.arange(cp.rows)[:, None] + np.arange(cp.cols)
            region[...] = flat[rows]
    np.testing.assert_array_equal(got, want)


def test_1x1_conv_rows_merge_into_one_copy_per_tap_run():
    wl, _ = _conv_workload((2, 6, 6, 32), (16, 32, 1, 1))
    sh = shape_of(wl)
    copies = im2col_copies(sh, 0, (6 * 6 * 32, 6 * 32, 32, 1), 0, sh.m, 0, 32)
    assert len(copies) == 1 and copies[0].rows == sh.m and copies[0].src_rs == 32


def test_filter_row_copies_speed_up_a_strided_stem():
    """A 7x7 stride-2 conv on 3 channels: per tap, each pixel is a 6-byte burst; per
    filter row it is 42 bytes (border pixels still go tap by tap), so it takes less
    time."""
    from pypto.codegen.lower import lower
    from pypto.sim.timing import simulate

    wl, target = _conv_workload((1, 32, 32, 3), (16, 3, 7, 7), stride=2, padding=3)
    space = space_for(wl, target)
    assert space.axes["im2col"].choices == ("tap", "filter_row")
    assert space.default()["im2col"] == "filter_row"
    tap = lower(wl, space.default().replace(im2col="tap"), target)
    row = lower(wl, space.default(), target)
    assert simulate(row, target).cycles < simulate(tap, target).cycles
    dilated, _ = _conv_workload((1, 9, 9, 4), (8, 4, 3, 3), dilation=2)
    assert space_for(dilated, target).axes["im2col"].choices == ("tap",)
    bad = space_for(dilated, target).default().replace(im2col="filter_row")
    assert any("dilation_w" in p for p in validate(dilated, bad, target))
