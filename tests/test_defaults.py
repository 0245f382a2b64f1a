"""The default schedules (what every untuned compile gets): for random shapes of every
op family on every target they validate in their space and are deterministic; the cube
families' heuristic reads the target's memories (a larger L1 never makes it pick a
shallower pipeline) and fills the cores."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.schedule_space import space_for
from pypto.schedule_space.registry import family_of
from pypto.targets import available_targets, load_target

TARGETS = available_targets()
SETTINGS = settings(max_examples=12, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _workload(fn: Any, specs: list[Any], target: str, family: str) -> Any:
    compiled = pypto.kernel(fn).lower(*specs, target=target)
    return next(wl for wl in compiled.workloads if wl.family == family)


def _check(wl: Any, target: str) -> None:
    tgt = load_target(target)
    space = space_for(wl, tgt)
    default = space.default()
    assert space.validate(default) == [], (wl.describe(), dict(default))
    # deterministic: the family's heuristic on a fresh space gives the same point
    again = family_of(wl).default(wl, tgt)
    assert again == default and again.key == default.key


dims = st.integers(1, 4000)


@SETTINGS
@given(target=st.sampled_from(TARGETS), m=dims, n=dims, k=dims,
       batch=st.sampled_from([None, 1, 3]), tail=st.sampled_from(["", "relu", "gelu"]),
       transpose_b=st.booleans())
def test_matmul_default_validates_and_is_deterministic(target: str, m: int, n: int, k: int,
                                                       batch: int | None, tail: str,
                                                       transpose_b: bool) -> None:
    lead = (batch,) if batch else ()
    b_shape = (n, k) if transpose_b else (k, n)

    def fn(a: Any, b: Any) -> Any:
        out = pypto.matmul(a, b, transpose_b=transpose_b)
        return getattr(pypto, tail)(out) if tail else out

    wl = _workload(fn, [pypto.spec((*lead, m, k), "float16"), pypto.spec(b_shape, "float16")],
                   target, "matmul")
    _check(wl, target)


@SETTINGS
@given(target=st.sampled_from(TARGETS), n=st.integers(1, 4), c=st.integers(1, 300),
       hw=st.integers(3, 64), k=st.integers(1, 300), rs=st.sampled_from([1, 3, 5, 7]),
       stride=st.sampled_from([1, 2]), relu=st.booleans())
def test_conv2d_default_validates_and_is_deterministic(target: str, n: int, c: int, hw: int,
                                                       k: int, rs: int, stride: int,
                                                       relu: bool) -> None:
    pad = rs // 2

    def fn(x: Any, w: Any) -> Any:
        out = pypto.conv2d(x, w, stride=stride, padding=pad)
        return pypto.relu(out) if relu else out

    wl = _workload(fn, [pypto.spec((n, hw, hw, c), "float16", layout="NHWC"),
                        pypto.spec((k, c, rs, rs), "float16")], target, "conv2d")
    _check(wl, target)


@SETTINGS
@given(target=st.sampled_from(TARGETS), rows=st.integers(1, 5000),
       cols=st.integers(1, 5000), op=st.sampled_from(["gelu", "softmax", "add"]))
def test_vector_default_validates_and_is_deterministic(target: str, rows: int, cols: int,
                                                       op: str) -> None:
    shape = (rows, cols)
    if op == "add":
        fn, specs = (lambda a, b: a + b), [pypto.spec(shape, "float16")] * 2
    else:
        fn, specs = getattr(pypto, op), [pypto.spec(shape, "float16")]
    _check(_workload(fn, specs, target, "vector"), target)


@pytest.mark.parametrize("target", TARGETS)
def test_matmul_default_puts_the_cores_to_work(target: str) -> None:
    """A large GEMM's default uses every core; a GEMV-like shape (M = 16, DRAM-bound)
    splits N (and K when N gives too few blocks) over at least as many cores as it
    takes to saturate the DRAM with their GM reads."""
    tgt = load_target(target)
    gm_rate = min(tgt.path(tgt.roles["global"], tgt.roles["stage"]).bytes_per_cycle,
                  tgt.l2_read_bytes_per_cycle)
    saturate = min(tgt.cube_cores, -(-tgt.gm_bytes_per_cycle_chip // gm_rate))
    for m, n, k, least in ((2048, 2048, 2048, tgt.cube_cores), (16, 4096, 4096, saturate)):
        wl = _workload(pypto.matmul, [pypto.spec((m, k), "float16"),
                                      pypto.spec((k, n), "float16")], target, "matmul")
        s = space_for(wl, tgt).default()
        assert s["cores"] >= least, (m, n, k, dict(s))


@given(taps=st.integers(1, 49), channels=st.integers(1, 300), k1=st.integers(1, 2000))
def test_conv_estimate_counts_the_taps_a_chunk_touches(taps: int, channels: int,
                                                       k1: int) -> None:
    """The conv heuristic's im2col estimate: a chunk of whole taps touches ``k1 / C`` of
    them (not one more), a chunk inside a tap one; over all chunks, every tap at least
    once and at most one extra per chunk."""
    from pypto.schedule_space.conv2d import pieces

    total = taps * channels
    chunks = max(1.0, total / k1)
    got = pieces(total, k1, channels)
    if k1 % channels == 0 and total % k1 == 0:
        assert got == k1 // channels
    if channels % k1 == 0:      # every chunk inside one tap
        assert got == pytest.approx(-(-total // k1) / chunks)
    assert taps <= got * chunks + 1e-9 <= taps + -(-total // k1)


@SETTINGS
@given(target=st.sampled_from(TARGETS), rows=st.integers(1, 20000),
       cols=st.integers(1, 6000), op=st.sampled_from(["gelu", "softmax", "layernorm", "add"]),
       dtype=st.sampled_from(["float16", "float32"]))
def test_vector_default_buffers_as_deep_as_ub_and_its_tiles_allow(
        target: str, rows: int, cols: int, op: str, dtype: str) -> None:
    from pypto.schedule_space.common import MAX_DEPTH
    from pypto.schedule_space.vector import num_tiles

    shape = (rows, cols)
    if op == "add":
        fn, specs = (lambda a, b: a + b), [pypto.spec(shape, dtype)] * 2
    else:
        fn, specs = getattr(pypto, op), [pypto.spec(shape, dtype)]
    wl = _workload(fn, specs, target, "vector")
    space = space_for(wl, load_target(target))
    d = space.default()
    per_core = -(-num_tiles(wl, d) // d["cores"])
    deeper = d.replace(depth=d["depth"] + 1)
    # one more buffer would be pointless (no more tiles per core), or not fit
    assert (d["depth"] == MAX_DEPTH or d["depth"] >= per_core
            or space.validate(deeper) != []), dict(d)


def test_vector_default_covers_load_latency_with_depth() -> None:
    """BERT-base's attention softmax (12 heads x 512 x 512, fp16): each core has many small
    tiles, and a load's latency is longer than a tile's compute, so two buffers leave the
    vector pipe waiting; the default keeps more loads in flight."""
    from pypto.codegen.lower import lower
    from pypto.sim.timing import simulate

    tgt = load_target("ascend910b")
    wl = _workload(pypto.softmax, [pypto.spec((6144, 512), "float16")], "ascend910b",
                   "vector")
    d = space_for(wl, tgt).default()
    assert d["depth"] > 2
    cycles = simulate(lower(wl, d, tgt), tgt).cycles
    double = simulate(lower(wl, d.replace(depth=2), tgt), tgt).cycles
    assert cycles < 0.8 * double, (cycles, double)


def test_vector_default_spreads_few_long_rows_over_the_cores() -> None:
    """Six rows of 30,000 elements through GELU: one core per row leaves 42 of
    ascend910b's 48 vector cores idle; the default splits the rows into column chunks
    that fill the cores, chunks wide enough that a tile's fixed costs stay small."""
    from pypto.codegen.lower import lower
    from pypto.schedule_space.common import core_choice
    from pypto.sim.timing import simulate

    tgt = load_target("ascend910b")
    rows, cols = 6, 30000
    wl = _workload(pypto.gelu, [pypto.spec((rows, cols), "float16")], "ascend910b", "vector")
    space = space_for(wl, tgt)
    d = space.default()
    assert d["cores"] >= 24 and d["tile_cols"] * 2 >= 2048, dict(d)
    widest = next(s for w in sorted(space.axes["tile_cols"].choices, reverse=True)
                  for depth, inplace in ((2, False), (2, True), (1, True))
                  if not space.validate(s := d.replace(
                      tile_cols=w, depth=depth, inplace=inplace,
                      cores=core_choice(rows * -(-cols // w), tgt.vector_cores))))
    assert widest["cores"] <= rows
    narrow = d.replace(tile_cols=64)
    cycles = {name: simulate(lower(wl, s, tgt), tgt).cycles
              for name, s in (("default", d), ("widest", widest), ("narrow", narrow))}
    assert cycles["default"] < 0.85 * cycles["widest"], cycles
    assert cycles["default"] < 0.8 * cycles["narrow"], cycles
