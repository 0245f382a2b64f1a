"""Fusion as a choice (issue 16): an optional fusion is a knob of the fused workload's
schedule space (``fuse_tail`` for a cube op's elementwise tail, ``split_at`` for a vector
chain), searched by the tuner and remembered by the database under the same workload
key; ``fuse={...}`` forces a fusion, and a fusion the kernel cannot make is an error
naming the ops. Every point of the spaces gives the CPU reference's numbers, race-free."""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.compile import resolver as lookup
from pypto.db import open_store
from pypto.schedule_space import fusion, space_for, validate
from pypto.tuner.options import TuneOptions
from tests.strategies import assert_close, check_programs, random_schedule, run_both, tensor_of
from tests.test_npu_vs_cpu import expressions

F16 = "float16"
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def mm_bias_relu(a, b, c):  # type: ignore[no-untyped-def]
    return pypto.relu(pypto.matmul(a, b) + c)


def _specs(m: int, k: int, n: int) -> tuple[pypto.frontend.kernel.Spec, ...]:
    return pypto.spec((m, k), F16), pypto.spec((k, n), F16), pypto.spec((n,), F16)


def _lower(kernel: pypto.Kernel, *args):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        return kernel.lower(*args)


# -- the knob -----------------------------------------------------------------------------


def test_an_optional_tail_is_a_knob_of_one_workload():
    compiled = _lower(pypto.kernel(mm_bias_relu), *_specs(64, 96, 80))
    (wl,) = compiled.workloads
    space = space_for(wl, compiled.target)
    assert wl.ops == ("matmul", "add", "relu")
    assert space.axes["fuse_tail"].choices == (True, False)
    assert compiled.schedules[0]["fuse_tail"] is True            # the default fuses
    unfused = compiled.with_schedule(0, compiled.schedules[0].replace(fuse_tail=False))
    assert unfused.workloads[0].key == wl.key                    # same workload, same key
    # the unfused program stores the matmul result to a scratch tensor, meets, then runs
    # the tail as a vector pass
    roles = [s.role for s in unfused.programs[0].symbols]
    assert roles == ["in", "in", "in", "out", "tmp"]
    assert all((core["op"] == pypto.codegen.isa.Op.SYNC_ALL).sum() == 1
               for core in unfused.programs[0].cores)
    check_programs(unfused)


def test_records_written_before_the_knob_complete_to_the_fused_program():
    compiled = _lower(pypto.kernel(mm_bias_relu), *_specs(64, 96, 80))
    wl, s = compiled.workloads[0], compiled.schedules[0]
    old = pypto.schedule_space.Schedule({k: v for k, v in s.items() if k != "fuse_tail"})
    assert validate(wl, old, compiled.target)[0].startswith("missing knob 'fuse_tail'")
    assert pypto.schedule_space.complete(wl, old) == s


def test_a_forced_fusion_offers_only_fused_schedules_under_its_own_key():
    free = _lower(pypto.kernel(mm_bias_relu), *_specs(64, 96, 80))
    forced = _lower(pypto.kernel(fuse={"gemm": ["add", "relu"]})(mm_bias_relu),
                    *_specs(64, 96, 80))
    wl = forced.workloads[0]
    assert wl.ops == free.workloads[0].ops and wl.key != free.workloads[0].key
    assert space_for(wl, forced.target).axes["fuse_tail"].choices == (True,)
    with pytest.raises(pypto.ScheduleError, match="fuse_tail=False is not one of its "
                                                  "choices.*forces this fusion"):
        forced.with_schedule(0, forced.schedules[0].replace(fuse_tail=False))


CONV_X, CONV_W = pypto.spec((1, 3, 8, 8), "float32"), pypto.spec((4, 3, 3, 3), "float32")


@pytest.mark.parametrize("fn, expected", [
    (lambda x, w: pypto.exp(pypto.conv2d(x, w)), "relu into conv2d, but the kernel has "
                                                 "no relu"),
    (lambda x, w: pypto.relu(x), "relu into conv2d, but the kernel has no conv2d"),
    (lambda x, w: pypto.relu(pypto.conv2d(x, w)[:, :, 1:]),
     r"the relu of shape \[1, 4, 5, 6\] reads the conv2d result"),
    (lambda x, w: pypto.relu(pypto.sum(pypto.conv2d(x, w), axis=1)),
     "no relu reads a conv2d result"),
])
def test_an_impossible_forced_fusion_is_an_error_naming_the_ops(fn, expected):
    kernel = pypto.kernel(fuse={"conv": "relu"})(fn)
    with pytest.raises(pypto.KernelError, match=expected) as error:
        kernel.lower(CONV_X, CONV_W)
    assert "fuse={'conv': 'relu'}" in str(error.value)


def test_the_guide_fusion_hint_still_fuses_with_an_nchw_result():
    kernel = pypto.kernel(fuse={"conv": "relu"})(lambda x, w: pypto.relu(pypto.conv2d(x, w)))
    conv = [wl for wl in _lower(kernel, CONV_X, CONV_W).workloads if wl.family == "conv2d"]
    assert len(conv) == 1 and conv[0].ops == ("conv2d_nchw", "relu")  # read as NCHW
    assert fusion.forced(conv[0])


# -- the figures ------------------------------------------------------------------------------


def conv_relu_variants(shape=(1, 28, 28, 64), k=64):  # type: ignore[no-untyped-def]
    """(fused, unfused in one program, separate workloads) of an NHWC 3x3 conv + ReLU,
    the conv under the same tiling in all three (the fused default's): what differs is
    the fusion alone."""
    x = pypto.spec(shape, F16, layout="NHWC")
    w = pypto.spec((k, 3, 3, shape[-1]), F16, layout="NHWC")

    def fn(a, b):  # type: ignore[no-untyped-def]
        return pypto.relu(pypto.conv2d(a, b, padding=1))

    fused = _lower(pypto.kernel(fn), x, w)
    (i,) = [j for j, wl in enumerate(fused.workloads) if wl.family == "conv2d"]
    tiling = fused.schedules[i].replace(ub_depth=2)
    fused = fused.with_schedule(i, tiling)
    unfused = fused.with_schedule(i, tiling.replace(fuse_tail=False))
    separate = _lower(pypto.kernel(fuse=False)(fn), x, w)
    conv = pypto.schedule_space.Schedule({k: v for k, v in tiling.items() if k != "fuse_tail"})
    separate = separate.with_schedule(i, conv)
    return fused, unfused, separate


def test_the_fused_conv_relu_moves_fewer_bytes_and_takes_fewer_cycles():
    fused, unfused, separate = conv_relu_variants()
    assert [wl.ops for wl in separate.workloads][-2:] == [("conv2d_nhwc",), ("relu",)]
    results = [c.simulate() for c in (fused, unfused, separate)]
    moved = [r.gm_read_bytes + r.gm_write_bytes for r in results]
    dram = [r.dram_read_bytes + r.dram_write_bytes for r in results]
    cycles = [r.cycles for r in results]
    # the unfused tail writes the conv result and reads it back: 2 x 28*28*64 fp16
    assert moved[1] - moved[0] >= 2 * 28 * 28 * 64 * 2
    assert moved[0] < moved[1] and moved[0] < moved[2]
    assert dram[0] < dram[1] and dram[0] < dram[2]
    assert cycles[0] < cycles[1] and cycles[0] < cycles[2]
    rng = np.random.default_rng(0)
    x = pypto.tensor(rng.standard_normal((1, 28, 28, 64)), dtype=F16, layout="NHWC")
    w = pypto.tensor(rng.standard_normal((64, 3, 3, 64)) / 24, dtype=F16, layout="NHWC")
    ref = fused.run_reference(x, w)
    for c in (fused, unfused, separate):
        assert_close(c(x, w), ref, "")


# -- every point is right ------------------------------------------------------------------


@SETTINGS
@given(st.data(), st.integers(1, 70), st.integers(1, 70), st.integers(1, 300),
       st.sampled_from(["relu", "gelu", "sigmoid"]), st.sampled_from(["float16", "float32"]))
def test_unfused_tails_give_the_reference_numbers(data, m, n, k, act, dtype):
    a, b = tensor_of((m, k), dtype, 1), tensor_of((k, n), dtype, 2)
    bias = tensor_of((n,), dtype, 3)

    def fn(x, y, bb):  # type: ignore[no-untyped-def]
        z = pypto.matmul(x, y)
        return getattr(pypto, act)(z + bb), z * 0.5   # the matmul result is an output too

    compiled = _lower(pypto.kernel(fn), a, b, bias)
    wl = compiled.workloads[0]
    space = space_for(wl, compiled.target)
    s = data.draw(random_schedule(wl, compiled.target).filter(
        lambda p: not p["fuse_tail"]), label="schedule")
    assert not space.validate(s)
    npu, cpu, unfused = run_both(fn, a, b, bias, schedules={0: s})
    assert_close(npu, cpu, "")


@pytest.fixture
def split_everywhere(monkeypatch: pytest.MonkeyPatch):
    """Every vector chain offers all its split points (as under UB pressure)."""
    monkeypatch.setattr(fusion, "ub_pressure", lambda wl, target: True)
    space_for.cache_clear()
    yield
    space_for.cache_clear()


@settings(SETTINGS, suppress_health_check=[*SETTINGS.suppress_health_check,
                                          HealthCheck.function_scoped_fixture])
@given(st.data(), st.integers(1, 30), st.integers(1, 90), expressions())
def test_every_split_of_a_vector_chain_gives_the_reference_numbers(split_everywhere, data,
                                                                   rows, cols, steps):
    x, y = tensor_of((rows, cols), "float32", 20), tensor_of((rows, cols), "float32", 21)

    def fn(a, b):  # type: ignore[no-untyped-def]
        vals = [a, b]
        for kind, u, bi, pick in steps:
            v = vals[pick % len(vals)]
            if kind == "unary":
                v = getattr(pypto, u)(v)
            elif kind == "binary":
                v = getattr(pypto, bi)(v, vals[(pick + 1) % len(vals)])
            elif kind == "scalar":
                v = v * 0.5 + 0.25
            elif kind == "rowreduce":
                v = v - pypto.max(v, axis=-1, keepdims=True)
            else:
                v = v + pypto.mean(v, axis=0)
            vals.append(pypto.tanh(v))
        return vals[-1], vals[len(vals) // 2]

    target = data.draw(st.sampled_from(pypto.targets.available_targets()), label="target")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        compiled = pypto.kernel(fn).lower(x, y, target=target)
    schedules = {}
    for i, wl in enumerate(compiled.workloads):
        space = space_for(wl, compiled.target)
        points = space.axes["split_at"].choices[1:] if "split_at" in space.axes else ()
        if points:
            split = data.draw(st.sampled_from(points), label=f"split_at[{i}]")
            schedules[i] = data.draw(random_schedule(wl, compiled.target).filter(
                lambda p, split=split: p["split_at"] == split) | st.just(
                space.default().replace(split_at=split)).filter(space.is_valid))
    npu, cpu, _ = run_both(fn, x, y, schedules=schedules, target=target)
    assert_close(npu, cpu, "")


def test_a_split_chain_needs_only_its_larger_pass_in_ub(split_everywhere):
    compiled = _lower(pypto.kernel(lambda a, b: pypto.softmax(pypto.exp(a) * b)),
                      pypto.spec((64, 512), "float32"), pypto.spec((64, 512), "float32"))
    (wl,) = compiled.workloads
    space = space_for(wl, compiled.target)
    fp = pypto.schedule_space.family_of(wl).footprints
    s = space.default()
    whole = fp(wl, s, compiled.target)["vector"]
    for split in space.axes["split_at"].choices[1:]:
        assert fp(wl, s.replace(split_at=split), compiled.target)["vector"] < whole


# -- the tuner searches it, the database remembers it ----------------------------------------


def test_tuning_measures_both_and_the_lookup_takes_the_faster(tmp_path, monkeypatch):
    """A GEMV-like matmul + ReLU: fused, K cannot be split (the tail reads whole sums),
    so few cores work; unfused, split-K spreads K over the cores. Both are measured
    under one workload key; the compile-time lookup returns the fastest record."""
    from pypto.tuner.loop import tune_task
    from pypto.tuner.tasks import extract_tasks

    url = f"sqlite:///{tmp_path / 'fusion.db'}"
    monkeypatch.setenv("PYPTO_DB", url)
    lookup.reset()
    kernel = pypto.kernel(lambda a, b: pypto.relu(pypto.matmul(a, b)))
    a, b = pypto.spec((16, 4096), F16), pypto.spec((4096, 64), F16)
    (task,) = extract_tasks([_lower(kernel, a, b)])
    store = open_store(url)
    tune_task(task, store, TuneOptions("random", 24, seed=1))
    records = store.records(workload_key=task.workload.key)
    assert {r.schedule["fuse_tail"] for r in records} == {True, False}
    best = min((r for r in records if r.status == "ok"), key=lambda r: r.cycles)
    lookup.reset()
    compiled = _lower(pypto.kernel(lambda a, b: pypto.relu(pypto.matmul(a, b))), a, b)
    assert compiled.sources == ["tuned"]
    assert compiled.schedules[0] == best.schedule
    assert compiled.simulate().cycles == best.cycles
    lookup.reset()


def test_unfused_split_k_can_beat_the_best_fused_schedule():
    """Why the knob is worth searching: on a GEMV-like shape the fused space's best
    (over a sample) loses to an unfused split-K point."""
    kernel = pypto.kernel(lambda a, b: pypto.relu(pypto.matmul(a, b)))
    compiled = _lower(kernel, pypto.spec((16, 8192), F16), pypto.spec((8192, 64), F16))
    space = space_for(compiled.workloads[0], compiled.target)
    rng = random.Random(0)
    fused = [space.default()] + [p for p in (space.sample(rng) for _ in range(40))
                                 if p["fuse_tail"]]
    best_fused = min(compiled.with_schedule(0, p).simulate().cycles for p in fused)
    split = space.default().replace(fuse_tail=False, split_k=8, cores=16, n1=32,
                                    epilogue="VEC")
    assert not space.validate(split)
    assert compiled.with_schedule(0, split).simulate().cycles < best_fused
