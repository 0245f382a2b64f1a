"""The L0 level of matmul: m0_parts x n0_parts sub-blocks per MMAD, walked in l0_order."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.codegen.isa import Mem, Op
from pypto.codegen.lower import lower
from pypto.schedule_space import default_schedule, space_for, validate
from pypto.targets import available_targets, load_target
from tests.strategies import assert_close, run_both, tensor_of

TARGET = load_target("ascend910b")


def _sub_blocked(space, rng: random.Random):  # type: ignore[no-untyped-def]
    """A random valid point whose blocks are cut into more than one sub-block."""
    for _ in range(200):
        s = space.sample(rng)
        if s["m0_parts"] * s["n0_parts"] > 1:
            return s
    raise AssertionError(f"no sub-blocked point in {space}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(17, 90), st.integers(17, 90), st.integers(1, 120),
       st.sampled_from(["float16", "int8"]), st.booleans(), st.booleans(),
       st.sampled_from(available_targets()))
def test_sub_blocks_match_numpy(data, m, n, k, dtype, ta, tb, target_name):
    target = load_target(target_name)
    a = tensor_of((k, m) if ta else (m, k), dtype, 3)
    b = tensor_of((n, k) if tb else (k, n), dtype, 4)

    def fn(x, y):  # type: ignore[no-untyped-def]
        return pypto.matmul(x, y, transpose_a=ta, transpose_b=tb)

    wl = pypto.kernel(fn).lower(a, b, target=target).workloads[0]
    s = _sub_blocked(space_for(wl, target), random.Random(data.draw(st.integers(0, 2**32))))
    npu, cpu, _ = run_both(fn, a, b, schedules={0: s}, target=target)
    assert_close(npu, cpu, "")


def _loads(program, mem: Mem) -> int:  # type: ignore[no-untyped-def]
    c = program.cores[0]
    return int(((c["op"] == Op.COPY) & (c["d_mem"] == mem)).sum())


def test_the_walk_reloads_only_the_tile_that_changes():
    """A 128x128 block in 4 x 2 sub-blocks, one k0 step: "mn" loads each of the 4 A
    tiles once and a B tile per sub-block (8); "nm" the other way round."""
    wl = pypto.kernel(pypto.matmul).lower(pypto.spec((128, 32), "float16"),
                                          pypto.spec((32, 128), "float16"),
                                          target=TARGET).workloads[0]
    base = default_schedule(wl, TARGET).replace(m1=128, n1=128, k0=32, k1=32, cores=1,
                                                m0_parts=4, n0_parts=2)
    mn, nm = base.replace(l0_order="mn"), base.replace(l0_order="nm")
    assert not validate(wl, mn, TARGET) and not validate(wl, nm, TARGET)
    p_mn, p_nm = lower(wl, mn, TARGET), lower(wl, nm, TARGET)
    assert (_loads(p_mn, Mem.LEFT), _loads(p_mn, Mem.RIGHT)) == (4, 8)
    assert (_loads(p_nm, Mem.LEFT), _loads(p_nm, Mem.RIGHT)) == (8, 2)
    mmads = [int((c["op"] == Op.MMAD).sum()) for c in p_mn.cores]
    assert mmads == [8]


def test_sub_blocks_are_whole_fractals_and_few():
    wl = pypto.kernel(pypto.matmul).lower(pypto.spec((256, 256), "float16"),
                                          pypto.spec((256, 256), "float16"),
                                          target=TARGET).workloads[0]
    s = default_schedule(wl, TARGET).replace(m1=48, n1=256, cores=1)
    problems = validate(wl, s.replace(m0_parts=2), TARGET)
    assert any("m0_parts=2 must cut m1=48 into whole fractals" in p for p in problems), problems
    problems = validate(wl, s.replace(m1=128, m0_parts=4, n0_parts=4), TARGET)
    assert any("makes more than 8 sub-blocks" in p for p in problems), problems
    assert any("m0_parts=3 is not one of its choices" in p
               for p in validate(wl, s.replace(m0_parts=3), TARGET))
    # changing the block keeps the cut: parts, not sizes
    assert not validate(wl, s.replace(m1=128, m0_parts=2).replace(m1=64), TARGET)
    assert any("l0_order='km'" in p for p in validate(wl, s.replace(l0_order="km"), TARGET))
