"""Hypothesis strategies shared by the tests: shapes, tensors and schedules."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import pypto
from pypto.schedule_space import Schedule, validate

FLOATS = ("float16", "float32")


def dims(max_rank: int = 3, max_size: int = 40) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(st.integers(1, max_size), min_size=1, max_size=max_rank).map(tuple)


def broadcastable_to(shape: tuple[int, ...]) -> st.SearchStrategy[tuple[int, ...]]:
    """A shape that NumPy broadcasts to ``shape``."""
    @st.composite
    def build(draw: st.DrawFn) -> tuple[int, ...]:
        drop = draw(st.integers(0, len(shape) - 1)) if len(shape) > 1 else 0
        out = [d if draw(st.booleans()) else 1 for d in shape[drop:]]
        return tuple(out)
    return build()


def tensor_of(shape: tuple[int, ...], dtype: str, seed: int, low: float = -2.0,
              high: float = 2.0) -> pypto.Tensor:
    rng = np.random.default_rng(seed)
    if dtype in ("int8", "int32"):
        return pypto.tensor(rng.integers(-8, 8, shape), dtype=dtype)
    return pypto.tensor(rng.uniform(low, high, shape), dtype=dtype)


def assert_close(npu: object, cpu: object, dtype: str) -> None:
    outs = npu if isinstance(npu, (tuple, list)) else [npu]
    refs = cpu if isinstance(cpu, (tuple, list)) else [cpu]
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype, (o, r)
        a, b = o.numpy().astype(np.float64), r.numpy().astype(np.float64)
        if r.dtype.is_float:
            rtol = 4e-3 if r.dtype.name == "float16" else 2e-5
            scale = max(1.0, float(np.nanmax(np.abs(b))) if b.size else 1.0)
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale)
        else:
            np.testing.assert_array_equal(a, b)


def run_both(fn, *args, schedules=None, target=None):  # type: ignore[no-untyped-def]
    """(NPU result, CPU result, Compiled) of ``fn`` on ``args``."""
    kernel = pypto.kernel(fn)
    compiled = kernel.lower(*args, target=target)
    if schedules:
        for i, s in schedules.items():
            compiled = compiled.with_schedule(i, s)
    check_programs(compiled)
    npu = compiled(*args)
    cpu = compiled.run_reference(*args)
    return npu, cpu, compiled


def check_programs(compiled) -> None:  # type: ignore[no-untyped-def]
    """Every generated program is race-free (on chip between the pipes of a core, and in
    GM between cores unless a SYNC_ALL orders them and between the pipes of a core) and
    survives print -> parse -> print."""
    from pypto.codegen.asm import parse
    from pypto.sim.races import find_races

    for program in compiled.programs:
        races = find_races(program)
        assert races == [], races
        text = program.asm()
        again = parse(text)
        assert again == program
        assert again.asm() == text


@st.composite
def random_schedule(draw: st.DrawFn, workload, target,  # type: ignore[no-untyped-def]
                    max_units: int = 256) -> Schedule:
    """A random point of the workload's schedule space (valid by construction). Points
    with more than ``max_units`` work units (the family's blocks or tiles) are redrawn,
    to bound test time."""
    import random

    from pypto.schedule_space import family_of, space_for

    space = space_for(workload, target)
    work_units = family_of(workload).work_units
    rng = random.Random(draw(st.integers(0, 2**32)))
    for _ in range(20):
        s = space.sample(rng)
        if work_units(workload, s) <= max_units:
            break
    assert not validate(workload, s, target)
    return s
