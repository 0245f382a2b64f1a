"""The central property: on the simulated NPU every op gives the CPU reference's
numbers, for random shapes (odd sizes included), dtypes and schedules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.targets import available_targets, load_target
from tests.strategies import (
    FLOATS,
    assert_close,
    broadcastable_to,
    dims,
    random_schedule,
    run_both,
    tensor_of,
)

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TARGET = load_target("ascend910b")

UNARY = ["relu", "gelu", "exp", "sigmoid", "tanh", "neg", "abs"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]


def _scheduled(data: st.DataObject, fn, *args):  # type: ignore[no-untyped-def]
    """Run with the default schedules, then with random valid ones, on a random target."""
    target = data.draw(st.sampled_from(available_targets()), label="target")
    npu, cpu, compiled = run_both(fn, *args, target=target)
    assert_close(npu, cpu, "")
    schedules = {i: data.draw(random_schedule(wl, compiled.target))
                 for i, wl in enumerate(compiled.workloads)}
    npu2, cpu2, _ = run_both(fn, *args, schedules=schedules, target=target)
    assert_close(npu2, cpu2, "")


@SETTINGS
@given(st.data(), dims(), st.sampled_from(UNARY), st.sampled_from(FLOATS))
def test_unary(data, shape, op, dtype):
    x = tensor_of(shape, dtype, 1)
    _scheduled(data, getattr(pypto, op), x)


@SETTINGS
@given(st.data(), dims(), st.sampled_from(BINARY + ["div"]), st.sampled_from(FLOATS))
def test_binary_broadcast(data, shape, op, dtype):
    other = data.draw(broadcastable_to(shape))
    if data.draw(st.booleans()):
        shape, other = other, shape  # broadcasting either way round
    a = tensor_of(shape, dtype, 2)
    b = tensor_of(other, dtype, 3, low=0.5, high=2.0)
    _scheduled(data, getattr(pypto, op), a, b)


@SETTINGS
@given(st.data(), dims(), st.sampled_from(FLOATS),
       st.floats(-3, 3, allow_nan=False).filter(lambda v: abs(v) > 0.1))
def test_scalar_ops(data, shape, dtype, value):
    x = tensor_of(shape, dtype, 4, low=0.5, high=2.0)
    _scheduled(data, lambda a: (a + value, value - a, a * value, a / value, value / a), x)


@SETTINGS
@given(st.data(), dims(), st.sampled_from(["sum", "max", "mean"]), st.sampled_from(FLOATS),
       st.booleans())
def test_reductions(data, shape, op, dtype, keepdims):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    x = tensor_of(shape, dtype, 5)
    _scheduled(data, lambda a: getattr(pypto, op)(a, axis=axis, keepdims=keepdims), x)


@SETTINGS
@given(st.data(), dims(max_rank=3, max_size=40), st.sampled_from(FLOATS))
def test_softmax_and_layernorm(data, shape, dtype):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = tensor_of(shape, dtype, 6)
    g = tensor_of(shape[-1:], dtype, 7)
    b = tensor_of(shape[-1:], dtype, 8)
    _scheduled(data, lambda a, gg, bb: (pypto.softmax(a, axis=axis),
                                        pypto.layernorm(a, gg, bb)), x, g, b)


@SETTINGS
@given(st.data(), dims(), st.sampled_from(["float16", "float32", "int32", "int8"]),
       st.sampled_from(["float16", "float32", "int32"]))
def test_cast(data, shape, src, dst):
    x = tensor_of(shape, src, 9)
    _scheduled(data, lambda a: pypto.cast(a, dst), x)


@SETTINGS
@given(st.data(), dims(max_rank=4, max_size=12), st.sampled_from(FLOATS))
def test_views_transpose_reshape_slice(data, shape, dtype):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    index = tuple(slice(data.draw(st.integers(0, d - 1)), None, data.draw(st.integers(1, 3)))
                  for d in shape)
    x = tensor_of(shape, dtype, 10)
    y = tensor_of(tuple(shape[p] for p in perm), dtype, 11)

    def fn(a, b):  # type: ignore[no-untyped-def]
        t = pypto.transpose(a, perm) + b
        flat = pypto.reshape(pypto.transpose(a, perm), (-1,))
        return t, flat, a[index] * 2.0, pypto.reshape(t, (-1, shape[0]))

    _scheduled(data, fn, x, y)


@SETTINGS
@given(st.data(), st.integers(1, 100), st.integers(1, 100), st.integers(1, 150),
       st.sampled_from(["float16", "float32", "int8"]), st.booleans(), st.booleans())
def test_matmul(data, m, n, k, dtype, ta, tb):
    a = tensor_of((k, m) if ta else (m, k), dtype, 12)
    b = tensor_of((n, k) if tb else (k, n), dtype, 13)
    _scheduled(data, lambda x, y: pypto.matmul(x, y, transpose_a=ta, transpose_b=tb), a, b)


@SETTINGS
@given(st.data(), st.integers(1, 3), st.integers(1, 40), st.integers(1, 40), st.integers(1, 40),
       st.booleans())
def test_batched_matmul_broadcast(data, batch, m, n, k, share_b):
    a = tensor_of((batch, 2, m, k) if batch > 1 else (2, m, k), "float16", 14)
    b = tensor_of((k, n) if share_b else (1, k, n), "float16", 15)
    _scheduled(data, pypto.matmul, a, b)


@SETTINGS
@given(st.data(), st.integers(1, 80), st.integers(1, 80), st.integers(1, 80),
       st.sampled_from(["relu", "gelu", "sigmoid", "tanh"]))
def test_matmul_fused_epilogue(data, m, n, k, act):
    a, b = tensor_of((m, k), "float16", 16), tensor_of((k, n), "float16", 17)
    bias, res = tensor_of((n,), "float16", 18), tensor_of((m, n), "float16", 19)

    def fn(x, y, bb, r):  # type: ignore[no-untyped-def]
        return getattr(pypto, act)(pypto.matmul(x, y) + bb) * 0.5 + r

    npu, cpu, compiled = run_both(fn, a, b, bias, res)
    assert [wl.family for wl in compiled.workloads] == ["matmul"]  # one fused kernel
    assert_close(npu, cpu, "")
    _scheduled(data, fn, a, b, bias, res)


@st.composite
def expressions(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    """A random chain of ops on values of a shape ``[rows, cols]`` (fusion stress)."""
    steps = draw(st.lists(st.tuples(
        st.sampled_from(["unary", "binary", "scalar", "rowreduce", "bcast_row"]),
        st.sampled_from(UNARY), st.sampled_from(BINARY), st.integers(0, 10)), min_size=1,
        max_size=6))
    return steps


@SETTINGS
@given(st.data(), st.integers(1, 30), st.integers(1, 90), expressions())
def test_random_fused_chains(data, rows, cols, steps):
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
            vals.append(pypto.tanh(v))  # keep magnitudes bounded
        return vals[-1], vals[len(vals) // 2]

    _scheduled(data, fn, x, y)


@pytest.mark.parametrize("target", available_targets())
def test_targets_agree(target):
    a, b = tensor_of((70, 90), "float16", 22), tensor_of((90, 50), "float16", 23)
    npu, cpu, _ = run_both(lambda x, y: pypto.softmax(pypto.matmul(x, y)), a, b, target=target)
    assert_close(npu, cpu, "")


def test_example_gemm_1024():
    """The README example: a 1024^3 fp16 GEMM."""
    rng = np.random.default_rng(0)
    a = pypto.tensor(rng.random((1024, 1024)), dtype="float16")
    b = pypto.ones((1024, 1024), dtype="float16")
    npu, cpu, compiled = run_both(pypto.matmul, a, b)
    assert compiled.sources == ["default"]
    assert_close(npu, cpu, "")
