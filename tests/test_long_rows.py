"""Rows too long for one core's vector memory (issue 16 item 5): softmax, layernorm and
any chain whose reduction results are used on whole rows run as a multi-pass kernel
over column chunks, with the same numbers as NumPy computed in float64."""

from __future__ import annotations

import functools
import pathlib
import random
import re
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.schedule_space import space_for
from pypto.schedule_space.chain import analyze, stages
from pypto.schedule_space.vector import row_fits
from pypto.targets import Target, available_targets, load_target
from pypto.targets.target import PACKAGE_DIR
from tests.strategies import assert_close, check_programs, run_both, tensor_of


def _softmax64(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_softmax_over_65536_float32_columns_runs_in_three_passes():
    rows, cols = 4, 65536
    x = np.random.default_rng(0).normal(0, 4, (rows, cols)).astype(np.float32)
    x[1, 123] = 60.0  # one dominant logit
    kernel = pypto.kernel(lambda a: pypto.softmax(a, -1))
    compiled = kernel.lower(pypto.spec((rows, cols), "float32"))
    (wl,), (s,) = compiled.workloads, compiled.schedules
    assert s["tile_cols"] < cols  # a row (256 KiB) does not fit UB (192 KiB)
    assert max(stages(wl, analyze(wl)).values()) == 2  # max; exp and sum; the quotient
    check_programs(compiled)
    out = compiled(pypto.tensor(x, dtype="float32")).numpy()
    np.testing.assert_allclose(out.astype(np.float64), _softmax64(x), rtol=1e-5,
                               atol=1e-9)
    result = compiled.simulate()
    assert result.cycles >= result.bound_cycles
    # every pass reads the whole input once more: three reads of x from GM
    assert result.gm_read_bytes >= 3 * x.nbytes


def test_layernorm_over_a_long_float16_row_with_an_outlier():
    rows, cols = 3, 120_000
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (rows, cols)).astype(np.float16)
    x[0, 7] = 300.0
    g = rng.uniform(0.5, 1.5, cols).astype(np.float16)
    b = rng.uniform(-1, 1, cols).astype(np.float16)
    kernel = pypto.kernel(lambda a, gg, bb: pypto.layernorm(a, gg, bb))
    with pypto.Context(device_type="npu"):
        out = kernel(pypto.tensor(x, dtype="float16"), pypto.tensor(g, dtype="float16"),
                     pypto.tensor(b, dtype="float16"))
    assert kernel.lower(pypto.spec((rows, cols), "float16"), pypto.spec((cols,), "float16"),
                        pypto.spec((cols,), "float16")).schedules[0]["tile_cols"] < cols
    x64 = x.astype(np.float64)
    mean = x64.mean(-1, keepdims=True)
    ref = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(out.numpy().astype(np.float64), ref, rtol=4e-3, atol=4e-3 * 8)
    assert np.isfinite(out.numpy()).all()


CHAINS = {
    "softmax": lambda a, r: pypto.softmax(a, -1),
    "layernorm": lambda a, r: pypto.layernorm(a),
    "shift by max plus a row input": lambda a, r: a - (pypto.max(a, axis=-1, keepdims=True) + r),
    "centred max and a row sum": lambda a, r: (
        pypto.exp(a - pypto.max(a, axis=-1, keepdims=True)) * r,
        pypto.sum(a, axis=-1, keepdims=True) * 2.0),
    "variance then scale": lambda a, r: (a - pypto.mean(a, axis=-1, keepdims=True)) * pypto.rsqrt(
        pypto.mean(a * a, axis=-1, keepdims=True) + 1.0),
}


@functools.cache
def small_vector_memory(name: str) -> Target:
    """``name`` with a 4 KiB vector memory, so rows of a few hundred columns are long."""
    text = (PACKAGE_DIR / f"{name}.toml").read_text()
    memory = re.search(r'^vector\s*=\s*"(\w+)"', text, re.MULTILINE).group(1)
    text, n = re.subn(rf"^({memory}\s*=\s*{{\s*capacity\s*=\s*)\d+", r"\g<1>4096", text,
                      flags=re.MULTILINE)
    assert n == 1
    path = pathlib.Path(tempfile.mkdtemp()) / f"{name}_small_vector.toml"
    path.write_text(text)
    return load_target(path)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.sampled_from(sorted(CHAINS)), st.integers(1, 6), st.integers(300, 1200),
       st.sampled_from(["float16", "float32"]), st.sampled_from(available_targets()))
def test_split_rows_match_numpy_at_every_chunking(data, name, rows, cols, dtype, target):
    """Random chunked points of the space (``tile_cols`` < the row) give NumPy's numbers,
    race-free, on every target (with its vector memory cut to 4 KiB so that rows of a
    few hundred columns are too long for it)."""
    fn = CHAINS[name]
    target = small_vector_memory(target)
    x = tensor_of((rows, cols), dtype, 3)
    r = tensor_of((rows, 1), dtype, 4, low=0.5, high=1.5)
    compiled = pypto.kernel(fn).lower(x, r, target=target)
    schedules = {}
    seed = data.draw(st.integers(0, 2**32 - 1))
    for i, wl in enumerate(compiled.workloads):
        points = [p for p in (space_for(wl, target).sample(random.Random(seed + k))
                              for k in range(20)) if p["tile_cols"] < wl.attr("space")[-1]]
        if points:
            schedules[i] = points[0]
    long_rows = [wl for wl in compiled.workloads if not row_fits(wl, target)]
    assert len(schedules) >= len(long_rows)
    npu, cpu, _ = run_both(fn, x, r, schedules=schedules, target=target)
    assert_close(npu, cpu, dtype)


def test_chunks_join_the_space_only_when_a_row_does_not_fit():
    """A chain that uses reductions on whole rows keeps them whole while a row fits the
    vector memory double-buffered; past that, multi-pass chunkings join its space."""
    def tile_cols(cols: int) -> tuple[int, ...]:
        wl = pypto.kernel(lambda a: pypto.softmax(a, -1)).lower(
            pypto.spec((16, cols), "float32")).workloads[0]
        return space_for(wl, load_target("ascend910b")).axes["tile_cols"].choices

    assert tile_cols(4096) == (4096,)
    assert {32, 1024, 8192, 16384} <= set(tile_cols(16384))


@pytest.mark.parametrize("cols", [64, 1000])
def test_cores_never_exceed_the_row_blocks_of_a_reduction(cols):
    """A reduction's rows stay on one core (it walks all their chunks): the space counts
    row blocks, not row blocks x chunks, as the work the cores share."""
    wl = pypto.kernel(lambda a: pypto.softmax(a, -1)).lower(
        pypto.spec((2, cols), "float32")).workloads[0]
    space = space_for(wl, load_target("ascend910b"))
    rng = random.Random(0)
    for _ in range(50):
        assert space.sample(rng)["cores"] <= 2
