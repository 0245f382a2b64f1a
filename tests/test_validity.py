"""One validity check, both directions, on every family and target: the constraints of
``space_for(workload, target)`` define a valid schedule, and lowering agrees with them.

(a) every point ``Space.sample`` gives lowers, computes what the CPU reference computes,
    and runs race- and hazard-free;
(b) every point of the raw product of the axes' choices that the space rejects is
    refused by ``lower`` with a ``ScheduleError`` carrying the space's own messages.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.codegen.lower import lower
from pypto.schedule_space import Schedule, default_schedule, space_for, validate
from pypto.targets import available_targets, load_target
from tests.strategies import assert_close, random_schedule, run_both, tensor_of

F16, F32 = "float16", "float32"
TARGETS = available_targets()

Case = tuple[Callable[..., Any], list[pypto.Tensor]]


@st.composite
def matmul_case(draw: st.DrawFn) -> Case:
    """GEMMs: plain, batched, transposed, with a VEC or a FIX (ReLU) epilogue, operands
    stored in NZ, a captured weight (ND or NZ by schedule)."""
    kind = draw(st.sampled_from(["plain", "batched_t", "bias_relu", "relu", "nz", "weight"]))
    m, n, k = (draw(st.integers(1, 72)) for _ in range(3))
    dtype = draw(st.sampled_from([F16, F32, "int8"])) if kind in ("plain", "nz") else F16
    ta, tb = draw(st.booleans()), draw(st.booleans())
    if kind == "batched_t":
        a, b = tensor_of((2, k, m) if ta else (2, m, k), F16, 1), \
            tensor_of((n, k) if tb else (k, n), F16, 2)
        return (lambda x, y: pypto.matmul(x, y, transpose_a=ta, transpose_b=tb)), [a, b]
    if kind == "nz":
        a, b = tensor_of((m, k), dtype, 1), tensor_of((k, n), dtype, 2)
        which = draw(st.sampled_from([(True, False), (False, True), (True, True)]))
        a, b = (pypto.tensor(t.numpy(), dtype=dtype, layout="NZ") if nz else t
                for t, nz in zip((a, b), which))
        return pypto.matmul, [a, b]
    a, b = tensor_of((m, k), dtype, 1), tensor_of((k, n), dtype, 2)
    if kind == "bias_relu":
        return (lambda x, y, z: pypto.relu(x @ y + z)), [a, b, tensor_of((n,), F16, 3)]
    if kind == "relu":
        return (lambda x, y: pypto.relu(pypto.matmul(x, y))), [a, b]
    if kind == "weight":
        return (lambda x, w=b: pypto.matmul(x, w)), [a]
    return pypto.matmul, [a, b]


@st.composite
def vector_case(draw: st.DrawFn) -> Case:
    """Vector chains: softmax, layernorm, reductions, broadcasts, layout copies."""
    kind = draw(st.sampled_from(["softmax", "layernorm", "exp_sum", "sum0", "broadcast",
                                 "transpose", "nhwc"]))
    rows, cols = draw(st.integers(1, 40)), draw(st.integers(1, 300))
    dtype = draw(st.sampled_from([F16, F32]))
    x = tensor_of((rows, cols), dtype, 4)
    if kind == "softmax":
        return pypto.softmax, [x]
    if kind == "layernorm":
        return pypto.layernorm, [x]
    if kind == "exp_sum":
        return (lambda t: pypto.sum(pypto.exp(t), axis=-1)), [x]
    if kind == "sum0":
        return (lambda t: pypto.sum(t, axis=0)), [x]
    if kind == "broadcast":
        y = tensor_of(draw(st.sampled_from([(cols,), (rows, 1), (1, cols)])), dtype, 5)
        return (lambda t, u: pypto.relu(t * u) + t), [x, y]
    if kind == "transpose":
        return (lambda t: pypto.transpose(t) * 2.0), [x]
    # an NHWC tensor read as NCHW: a layout-conversion copy, then the chain
    nhwc = pypto.tensor(tensor_of((1, 3, 4, 5), dtype, 6).numpy(), dtype=dtype, layout="NHWC")
    return (lambda t: pypto.exp(t) + 1.0), [nhwc]


@st.composite
def conv_case(draw: st.DrawFn) -> Case:
    """Convolutions with NCHW, NHWC and NC1HWC0 inputs (with their layout copies)."""
    layout = draw(st.sampled_from(["NCHW", "NHWC", "NC1HWC0"]))
    n, c, k = draw(st.integers(1, 2)), draw(st.sampled_from([2, 4, 8])), draw(
        st.integers(1, 12))
    r = draw(st.sampled_from([1, 3]))
    stride, padding = draw(st.integers(1, 2)), draw(st.integers(0, 1))
    h, w = (draw(st.integers(r, 8)) for _ in range(2))
    data = tensor_of((n, c, h, w), F16, 7).numpy()
    if layout == "NHWC":
        x = pypto.tensor(data.transpose(0, 2, 3, 1), dtype=F16, layout="NHWC")
    elif layout == "NC1HWC0":
        c0 = draw(st.sampled_from([d for d in (1, 2, 4) if c % d == 0]))
        x = pypto.tensor(data.reshape(n, c // c0, c0, h, w).transpose(0, 1, 3, 4, 2),
                         dtype=F16, layout="NC1HWC0")
    else:
        x = pypto.tensor(data, dtype=F16)
    wt = tensor_of((k, c, r, r), F16, 8)
    relu = draw(st.booleans())

    def fn(a, b):  # type: ignore[no-untyped-def]
        y = pypto.conv2d(a, b, stride=stride, padding=padding)
        return pypto.relu(y) if relu else y

    return fn, [x, wt]


CASES = {"matmul": matmul_case(), "vector": vector_case(), "conv2d": conv_case()}
SAMPLED = settings(max_examples=12, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
REJECTED = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("family", sorted(CASES))
@SAMPLED
@given(data=st.data())
def test_sampled_points_lower_run_correctly_and_hazard_free(family, target, data):
    fn, args = data.draw(CASES[family])
    compiled = pypto.kernel(fn).lower(*args, target=target)
    assert family in {wl.family for wl in compiled.workloads}
    schedules = {i: data.draw(random_schedule(wl, compiled.target, max_units=48))
                 for i, wl in enumerate(compiled.workloads)}
    npu, cpu, scheduled = run_both(fn, *args, schedules=schedules, target=target)
    assert_close(npu, cpu, "")
    for result in scheduled.simulate_each(hazards=True):
        assert result.hazards == []


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("family", sorted(CASES))
@REJECTED
@given(data=st.data(), seed=st.integers(0, 2**32))
def test_rejected_raw_points_are_refused_by_lowering_with_the_same_reasons(family, target,
                                                                             data, seed):
    fn, args = data.draw(CASES[family])
    compiled = pypto.kernel(fn).lower(*args, target=target)
    rng = random.Random(seed)
    for wl in compiled.workloads:
        space = space_for(wl, compiled.target)
        assert space.validate(space.default()) == []
        rejected = 0
        for _ in range(60):
            point = Schedule({n: a.choices[rng.randrange(len(a.choices))]
                              for n, a in space.axes.items()})
            problems = space.validate(point)
            assert validate(wl, point, compiled.target) == problems
            if not problems:
                continue
            with pytest.raises(pypto.ScheduleError) as refused:
                lower(wl, point, compiled.target)
            assert all(p in str(refused.value) for p in problems), (problems, refused.value)
            rejected += 1
            if rejected == 4:
                break


@pytest.mark.parametrize("target", TARGETS)
def test_points_off_the_grid_are_refused_naming_the_knob(target):
    compiled = pypto.kernel(lambda a, b, c: pypto.relu(a @ b + c)).lower(
        pypto.spec((96, 40), F16), pypto.spec((40, 64), F16), pypto.spec((64,), F16),
        target=target)
    wl, tgt = compiled.workloads[0], compiled.target
    default = default_schedule(wl, tgt)
    for bad, text in ((default.replace(m1=24), "m1=24 is not one of its choices"),
                      (default.replace(m0=16), "unknown knob(s) ['m0']"),
                      (Schedule({k: v for k, v in default.items() if k != "cores"}),
                       "missing knob 'cores'"),
                      (default.replace(split_k=2), "tail cannot be fused; use fuse_tail=False")):
        problems = validate(wl, bad, tgt)
        assert any(text in p for p in problems), problems
        with pytest.raises(pypto.ScheduleError, match="is not valid for") as refused:
            lower(wl, bad, tgt)
        assert "; ".join(problems) in str(refused.value)


@pytest.mark.parametrize("target", TARGETS)
def test_memory_messages_sum_the_roles_a_memory_holds(target):
    """A memory that holds several roles (an MLU's NRAM) gets one constraint over their
    sum; its message names the roles that overflowed it."""
    compiled = pypto.kernel(lambda a, b, c: pypto.relu(a @ b + c)).lower(
        pypto.spec((256, 256), F16), pypto.spec((256, 256), F16), pypto.spec((256,), F16),
        target=target)
    wl, tgt = compiled.workloads[0], load_target(target)
    space = space_for(wl, tgt)
    big = space.default().replace(m1=256, n1=256, l0c_depth=4, ub_depth=4)
    problems = space.validate(big)
    acc = tgt.role("acc").name
    assert any(p.startswith(f"{acc}: ") and "l0c_depth=4" in p for p in problems), problems
    shared = tgt.role("acc").name == tgt.role("vector").name
    assert any("(acc)" in p and "(vector)" in p for p in problems) == shared, problems


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 600), n=st.integers(1, 600), k=st.integers(1, 600),
       c=st.sampled_from([3, 16, 64]), hw=st.integers(3, 40), target=st.sampled_from(TARGETS))
def test_every_default_is_a_point_of_its_space(m, n, k, c, hw, target):
    """The default heuristics step between the space's grid points while they shrink,
    and end on one (matmul with and without an epilogue, vector, conv2d)."""
    kernels = [(pypto.matmul, [(m, k), (k, n)]),
               (lambda a, b, z: pypto.relu(a @ b + z), [(m, k), (k, n), (n,)]),
               (pypto.layernorm, [(m, n * 8)]),
               (lambda x, w: pypto.relu(pypto.conv2d(x, w, padding=1)),
                [(1, c, hw, hw), (n % 64 + 1, c, 3, 3)])]
    for fn, shapes in kernels:
        compiled = pypto.kernel(fn).lower(*[pypto.spec(s, F16) for s in shapes],
                                          target=target)
        for wl in compiled.workloads:
            s = default_schedule(wl, compiled.target)
            assert validate(wl, s, compiled.target) == [], (wl, s)
