"""Split-K: K cut into parts whose partial sums add atomically in GM after every core
has cleared its share of the output and met the others at SYNC_ALL."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import pypto
from pypto.codegen.isa import F_ATOMIC, Op
from pypto.schedule_space import default_schedule, space_for, validate
from pypto.schedule_space.matmul import k_parts, num_blocks
from pypto.targets import available_targets, load_target
from tests.strategies import assert_close, run_both, tensor_of

TARGET = load_target("ascend910b")


def _matmul(m: int, n: int, k: int, dtype: str = "float16", target=TARGET):  # type: ignore[no-untyped-def]
    return pypto.kernel(pypto.matmul).lower(pypto.spec((m, k), dtype), pypto.spec((k, n), dtype),
                                            target=target)


@given(st.integers(1, 3000), st.sampled_from([16, 32, 48, 256]), st.integers(1, 16))
def test_k_parts_cover_k_in_whole_chunks(k, k1, split):
    assume(split <= -(-k // k1))  # more parts than chunks is invalid (validate says so)
    parts = k_parts(k, k1, split)
    assert len(parts) == split
    assert parts[0][0] == 0 and parts[-1][1] == k
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:]))
    assert all(lo % k1 == 0 and hi > lo for lo, hi in parts)
    sizes = [-(-(hi - lo) // k1) for lo, hi in parts]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(1, 70), st.integers(1, 70), st.integers(64, 400),
       st.sampled_from(["float16", "float32", "int8"]), st.sampled_from(available_targets()))
def test_split_k_matches_numpy(data, m, n, k, dtype, target_name):
    """Random split-K schedules (split_k > 1) give the CPU reference's numbers, with no
    races, on every target."""
    target = load_target(target_name)
    a, b = tensor_of((m, k), dtype, 1), tensor_of((k, n), dtype, 2)
    wl = _matmul(m, n, k, dtype, target).workloads[0]
    s = _split_point(space_for(wl, target), random.Random(data.draw(st.integers(0, 2**32))),
                     target.fractal(dtype)[1])
    npu, cpu, compiled = run_both(pypto.matmul, a, b, schedules={0: s}, target=target)
    assert_close(npu, cpu, "")
    program = compiled.programs[0]
    ops = [int(c["op"][i]) for c in program.cores for i in range(len(c))]
    assert ops.count(Op.SYNC_ALL) == s["cores"]  # one meeting, every core
    atomics = sum(int(((c["op"] == Op.COPY) & (c["flags"] & F_ATOMIC > 0)).sum())
                  for c in program.cores)
    assert atomics == -(-m // s["m1"]) * -(-n // s["n1"]) * s["split_k"]


def _split_point(space, rng: random.Random, fk: int):  # type: ignore[no-untyped-def]
    """A random valid point with split_k > 1: a sample, with K chunks made small
    enough for a split when the sample's are not."""
    for _ in range(50):
        s = space.sample(rng)
        for cand in (s, s.replace(k1=s["k0"]), s.replace(k0=fk, k1=fk)):
            splits = [p for p in space.axes["split_k"].choices
                      if p > 1 and space.is_valid(cand.replace(split_k=p))]
            if splits:
                return cand.replace(split_k=rng.choice(splits))
    raise AssertionError(f"no split-K point in {space}")


def test_split_k_rejected_with_an_epilogue_or_too_few_chunks():
    wl = pypto.kernel(lambda x, y: pypto.relu(pypto.matmul(x, y))).lower(
        pypto.spec((64, 256), "float16"), pypto.spec((256, 64), "float16"),
        target=TARGET).workloads[0]
    s = default_schedule(wl, TARGET)
    problems = validate(wl, s.replace(split_k=2, k1=64, k0=64), TARGET)
    assert any("split_k=2" in p and "tail cannot be fused" in p for p in problems), problems
    # with the tail in a pass of its own, the partial sums add up first: allowed
    assert not validate(wl, s.replace(split_k=2, k1=64, k0=64, fuse_tail=False,
                                      epilogue="VEC"), TARGET)
    forced = pypto.kernel(lambda x, y: pypto.relu(pypto.matmul(x, y)),
                          fuse={"matmul": "relu"}).lower(
        pypto.spec((64, 256), "float16"), pypto.spec((256, 64), "float16"),
        target=TARGET).workloads[0]
    assert space_for(forced, TARGET).axes["split_k"].choices == (1,)
    plain = _matmul(64, 64, 256).workloads[0]
    problems = validate(plain, default_schedule(plain, TARGET).replace(split_k=4, k1=128,
                                                                       k0=64), TARGET)
    assert any("split_k=4 exceeds the 2 K chunks" in p for p in problems), problems
    problems = validate(plain, default_schedule(plain, TARGET).replace(split_k=5), TARGET)
    assert any("split_k=5 is not one of its choices" in p for p in problems), problems


def test_default_splits_k_when_blocks_are_fewer_than_cores():
    tall_k = _matmul(128, 128, 8192).workloads[0]
    s = default_schedule(tall_k, TARGET)
    # one or two blocks, split so that every core gets one work unit
    assert s["split_k"] > 1 and s["cores"] == num_blocks(tall_k, s)
    square = _matmul(1024, 1024, 1024).workloads[0]
    assert default_schedule(square, TARGET)["split_k"] == 1  # enough blocks already


def test_split_k_pays_off_when_blocks_are_few():
    """One 128x128 block with K = 8192 keeps one core busy; split over 16 cores it is
    several times faster in the timing model, zeroing and the meeting included."""
    compiled = _matmul(128, 128, 8192)
    s = compiled.schedules[0]
    split = compiled.simulate(hazards=True)
    assert split.hazards == []
    whole = compiled.with_schedule(0, s.replace(split_k=1, cores=1)).simulate()
    assert s["split_k"] >= 8 and whole.cycles > 2.5 * split.cycles, (whole.cycles, split.cycles)
    # the partial sums are extra GM traffic: at least output bytes x (parts + 1 zeroing)
    out_bytes = 128 * 128 * 2
    assert split.gm_write_bytes >= out_bytes * (s["split_k"] + 1)
