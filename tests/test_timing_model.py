"""What the timing model must show (DESIGN §4, issue 3): double buffering, linear
growth in K, scaling over cores; and its invariants on every program here."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

import pypto
from pypto.schedule_space import Schedule
from pypto.sim.result import SimResult
from pypto.targets import Target, load_target

PACKAGE_TARGETS = Path(pypto.__file__).parent / "targets"


def check_invariants(compiled, result: SimResult) -> None:  # type: ignore[no-untyped-def]
    assert result.cycles >= result.bound_cycles
    assert (result.pipe_busy <= result.cycles).all()
    assert result.hazards == []
    again = compiled.simulate(trace=True)
    assert again.same_timing(compiled.simulate(trace=True))
    assert again.cycles == result.cycles


def equal_stage_target() -> Target:
    """ascend910b with copy-in, vector op and copy-out made equally fast and latency-free,
    so a copy/compute/copy pipeline has three equal stages."""
    data = tomllib.loads((PACKAGE_TARGETS / "ascend910b.toml").read_text())
    data["target"]["launch_overhead_us"] = 0.0
    data["vector"]["issue_overhead"] = 0
    data["vector"]["bytes_per_cycle"] = 128
    data["l2"].update(hit_latency=0, miss_latency=0, read_bytes_per_cycle=128)
    data["gm"]["chip_bytes_per_cycle"] = 1e6
    for name in ("GM->UB", "UB->GM"):
        data["paths"][name].update(bytes_per_cycle=128, latency=0, min_burst=32)
    return Target.from_dict(data, "equal-stage test target")


@pytest.mark.parametrize("depth, inplace, low, high", [
    (1, True, 0.30, 0.36),   # one buffer through copy-in, compute, copy-out: serial
    (1, False, 0.45, 0.52),  # separate in and out buffers: copy-in overlaps copy-out
    (2, False, 0.9, 1.0),    # double buffering: all three stages overlap
    (2, True, 0.6, 0.7),
    (3, True, 0.9, 1.0)])
def test_double_buffering_raises_vector_utilization(depth, inplace, low, high):
    target = equal_stage_target()
    k = pypto.kernel(lambda x: pypto.relu(x))
    compiled = k.lower(pypto.spec((256, 1024), "float32"), target=target)
    compiled = compiled.with_schedule(0, Schedule(tile_rows=4, tile_cols=1024, depth=depth,
                                                  cores=1, inplace=inplace))
    r = compiled.simulate(hazards=True)
    vec = r.utilization()["VEC"]
    assert low <= vec <= high, (depth, vec, r.summary())
    check_invariants(compiled, r)


def _gemm(m, n, k, schedule=None):  # type: ignore[no-untyped-def]
    compiled = pypto.kernel(pypto.matmul).lower(pypto.spec((m, k), "float16"),
                                                pypto.spec((k, n), "float16"))
    if schedule is not None:
        compiled = compiled.with_schedule(0, compiled.schedules[0].replace(**schedule))
    return compiled


def test_gemm_time_grows_linearly_in_k():
    # one K loop per block: split-K cuts K into chunks of k1 unevenly (2048 / 3), which
    # moves the tail by a few hundred cycles from one K to the next
    times = {}
    for k in (2048, 4096, 8192):
        compiled = _gemm(512, 512, k, {"split_k": 1, "cores": 8})  # 8 blocks of 128x256
        r = compiled.simulate(hazards=k == 2048)
        check_invariants(compiled, r) if k == 2048 else None
        times[k] = r.cycles
    slope1 = times[4096] - times[2048]
    slope2 = times[8192] - times[4096]
    assert slope2 == pytest.approx(2 * slope1, rel=0.1), times


def test_one_core_vs_all_cores_scales_by_about_the_core_count():
    target = load_target("ascend910b")
    # 48 output blocks of 128x256: two per core, K long enough to be compute-bound
    all_cores = _gemm(1536, 1024, 4096, {"m1": 128, "n1": 256, "l0c_depth": 1,
                                           "cores": target.cube_cores})
    one_core = _gemm(1536, 1024, 4096, {"m1": 128, "n1": 256, "l0c_depth": 1, "cores": 1})
    t_all = all_cores.simulate().cycles - target.launch_overhead_cycles
    t_one = one_core.simulate().cycles - target.launch_overhead_cycles
    ratio = t_one / t_all
    assert 0.75 * target.cube_cores <= ratio <= 1.05 * target.cube_cores, ratio


def test_invariants_on_assorted_kernels():
    kernels = [
        (lambda a, b: pypto.relu(pypto.matmul(a, b) + 1.0), [(200, 300), (300, 170)]),
        (lambda a: pypto.softmax(a), [(333, 129)]),
        (lambda a: pypto.layernorm(a), [(64, 768)]),
        (lambda a: pypto.sum(a, axis=0), [(100, 80)]),
        (lambda a, b: pypto.matmul(a, b, transpose_b=True), [(3, 64, 48), (80, 48)]),
    ]
    for fn, shapes in kernels:
        for target in ("ascend910b", "ascend310"):
            compiled = pypto.kernel(fn).lower(*[pypto.spec(s, "float16") for s in shapes],
                                              target=target)
            check_invariants(compiled, compiled.simulate(hazards=True))


def test_deadlock_is_a_clear_error():
    from pypto.codegen.asm import parse
    from pypto.sim.timing import simulate

    text = (".program p target=ascend910b\n.core 0\n    WAIT_FLAG MTE2, MTE1, 0\n"
            "    SET_FLAG MTE2, MTE1, 0\n")
    with pytest.raises(pypto.SimError, match="core 0, line 3 .*deadlock"):  # of the text
        simulate(parse(text), load_target("ascend910b"))


def test_simulate_computes_no_numbers_and_is_fast_enough_for_big_gemms():
    compiled = _gemm(6144, 6144, 6144)
    r = compiled.simulate()
    assert r.instructions == compiled.programs[0].num_instructions
    flops = 2 * 6144 ** 3
    tflops = flops / (r.time_us * 1e-6) / 1e12
    assert 50 < tflops < 0.95 * compiled.target.peak_flops("float16") / 1e12
    assert np.isfinite(r.efficiency) and 0 < r.efficiency <= 1
