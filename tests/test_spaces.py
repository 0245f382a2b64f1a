"""Schedule spaces: sampling gives valid points only, validate names axis and limit,
defaults are in their spaces, sizes are exact or labelled estimates."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.schedule_space import Schedule, space_for
from pypto.targets import available_targets

WORKLOADS = {
    "gemm": (pypto.matmul, [(100, 70), (70, 130)]),
    "gemm_bias_relu": (lambda a, b, c: pypto.relu(a @ b + c), [(200, 96), (96, 64), (64,)]),
    "bmm_t": (lambda a, b: pypto.matmul(a, b, transpose_b=True), [(3, 33, 40), (50, 40)]),
    "softmax": (pypto.softmax, [(300, 77)]),
    "elementwise": (lambda a, b: pypto.gelu(a) * b, [(64, 4000), (4000,)]),
    "sum": (lambda a: pypto.sum(a, axis=0), [(90, 60)]),
}


def _space(name: str, target: str = "ascend910b"):  # type: ignore[no-untyped-def]
    fn, shapes = WORKLOADS[name]
    compiled = pypto.kernel(fn).lower(*[pypto.spec(s, "float16") for s in shapes],
                                      target=target)
    return space_for(compiled.workloads[0], compiled.target)


@pytest.mark.parametrize("target", available_targets())
@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_default_is_in_the_space_and_samples_are_valid(name, target):
    space = _space(name, target)
    assert space.validate(space.default()) == []
    rng = random.Random(0)
    for _ in range(60):
        s = space.sample(rng)
        assert space.validate(s) == [], s
    for s in space.neighbors(space.default()):
        assert space.is_valid(s)
        assert sum(s[k] != space.default()[k] for k in s) == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(WORKLOADS)), st.integers(0, 2**32), st.data())
def test_validate_agrees_with_lowering(name, seed, data):
    """Any raw point of the grid: valid per the space iff codegen accepts it."""
    space = _space(name)
    r = random.Random(seed)
    knobs = {n: a.choices[r.randrange(len(a.choices))] for n, a in space.axes.items()}
    problems = space.validate(knobs)
    from pypto.codegen.lower import lower

    if problems:
        for p in problems:
            assert any(axis in p for axis in knobs) or "bytes" in p, p
    else:
        program = lower(space.workload, Schedule(knobs), space.target)
        assert program.num_instructions > 0


def test_validate_names_the_axis_and_the_limit():
    space = _space("gemm_bias_relu")
    bad = space.default().replace(m1=208, n1=64, l0c_depth=4)
    problems = space.validate(bad)
    assert any("L0C" in p and "m1=208" in p and str(131072) in p for p in problems), problems
    assert any("not one of its choices" in p for p in space.validate(
        space.default().replace(m1=40)))
    assert any("missing knob 'cores'" in p for p in space.validate(
        {k: v for k, v in space.default().items() if k != "cores"}))
    assert any("unknown knob" in p for p in space.validate(space.default().replace(foo=1)))
    vspace = _space("softmax")
    problems = vspace.validate(vspace.default().replace(tile_rows=256, depth=4))
    assert any("UB" in p and "tile_rows=256" in p for p in problems), problems


def test_sizes_exact_for_small_spaces_estimated_for_large():
    small = _space("softmax")
    size = small.size()
    assert size.exact
    assert size.value == sum(1 for p in small.points()
                             if small.is_valid(dict(zip(small.axes, p))))
    big = pypto.kernel(pypto.matmul).lower(pypto.spec((4096, 4096), "float16"),
                                           pypto.spec((4096, 4096), "float16"))
    big_space = space_for(big.workloads[0], big.target)
    est = big_space.size()
    assert not est.exact and "estimate" in str(est)
    assert est.value >= 10_000


def test_encode_is_numeric_per_axis():
    space = _space("softmax")
    vec = space.encode(space.default())
    assert vec.shape == (len(space.axes),) and vec.dtype.kind == "f"
