"""The compiled vector emitter (``pypto/codegen/_vector.pyx`` over ``vector_plan``)
against its specification, the Python tile loop of ``codegen/vector.py`` over
``vector_chain.ChainEmitter``: whole programs, byte for byte, for random vector chains
(elementwise ops of every table, broadcast and sliced operands, compare and where,
casts, reductions, softmax, layernorm, and long rows lowered as multi-pass kernels on
a target with a small vector memory) under random schedules (tile shapes, column
chunks, buffer depths, in place, split chains, core counts) on every target.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto import native
from pypto.codegen import lower as lowering
from pypto.codegen import vector, vector_plan
from pypto.codegen.memories import memory_map
from pypto.codegen.place import Arena
from pypto.codegen.vector_chain import (
    BINARY_OPS,
    COMPARE_OPS,
    REDUCE_OPS,
    UNARY_OPS,
    ChainEmitter,
)
from pypto.schedule_space import validate
from pypto.schedule_space.chain import analyze
from pypto.targets import available_targets, load_target
from tests.strategies import random_schedule
from tests.test_long_rows import CHAINS as LONG_ROW_CHAINS
from tests.test_long_rows import small_vector_memory

_vector = pytest.importorskip("pypto.codegen._vector", reason="the compiled emitter is not built")

TARGETS = {name: load_target(name) for name in available_targets()}

UNARY = {"relu": pypto.relu, "exp": lambda a: pypto.exp(a * 0.25), "neg": pypto.neg,
         "abs": pypto.abs, "sigmoid": pypto.sigmoid, "tanh": pypto.tanh, "gelu": pypto.gelu,
         "sqrt": lambda a: pypto.sqrt(pypto.abs(a)), "log": lambda a: pypto.log(pypto.abs(a) + 1.0),
         "rsqrt": lambda a: pypto.rsqrt(pypto.abs(a) + 1.0),
         "reciprocal": lambda a: pypto.reciprocal(pypto.abs(a) + 1.0),
         "add_scalar": lambda a: a + 1.5, "mul_scalar": lambda a: a * -0.5,
         "cast": lambda a: pypto.cast(pypto.cast(a, "float32"), a.dtype)}
BINARY = {"add": pypto.add, "sub": pypto.sub, "mul": pypto.mul, "maximum": pypto.maximum,
          "minimum": pypto.minimum, "div": lambda a, b: a / (pypto.abs(b) + 1.0),
          "where": lambda a, b: pypto.where(pypto.greater(a, b), a, b),
          "compare": lambda a, b: pypto.cast(pypto.less_equal(a, b), a.dtype) + a}
REDUCE = {"sum": pypto.sum, "max": pypto.max, "min": pypto.min, "mean": pypto.mean}


@contextmanager
def specification() -> Iterator[None]:
    """Lower with the Python specifications (as ``PYPTO_IMPL=python`` does)."""
    with native.force_python():
        assert vector._compiled_loop() is None
        yield


@contextmanager
def plans_made() -> Iterator[list[bool]]:
    """Whether each vector lowering inside the block made a plan (ran compiled)."""
    made: list[bool] = []
    real = vector_plan.plan

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        p = real(*args, **kwargs)
        made.append(p is not None)
        return p

    vector_plan.plan = spy  # type: ignore[assignment]
    try:
        yield made
    finally:
        vector_plan.plan = real  # type: ignore[assignment]


@st.composite
def chains(draw: st.DrawFn) -> tuple[Callable, list]:
    """A random vector kernel and the specs of its inputs."""
    kind = draw(st.sampled_from(["elementwise", "elementwise", "reduction", "softmax",
                                 "layernorm", "sliced"]), label="kind")
    dtype = draw(st.sampled_from(["float16", "float32"]), label="dtype")
    rank = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(rank - 1)) + (
        draw(st.integers(1, 300)),)
    if kind == "softmax":
        return (lambda a: pypto.softmax(a, -1)), [pypto.spec(shape, dtype)]
    if kind == "layernorm":
        cols = shape[-1]
        specs = [pypto.spec(shape, dtype), pypto.spec((cols,), dtype), pypto.spec((cols,), dtype)]
        return (lambda a, g, b: pypto.layernorm(a, g, b)), specs
    if kind == "sliced":  # a view whose rows do not lie at one stride: several DMA runs
        outer = (draw(st.integers(2, 5)), draw(st.integers(3, 6)), draw(st.integers(2, 80)))
        lo = draw(st.integers(0, 1))

        def sliced(a):  # type: ignore[no-untyped-def]
            return pypto.relu(a[:, lo:outer[1] - 1, 1:]) * 2.0
        return sliced, [pypto.spec(outer, dtype)]
    ops = draw(st.lists(st.sampled_from(sorted(UNARY) + sorted(BINARY)), min_size=1,
                        max_size=4), label="ops")
    other_shape = draw(st.sampled_from([shape, shape[-1:], (*shape[:-1], 1), (1,)]))
    reduce = draw(st.sampled_from(sorted(REDUCE)), label="reduce") if kind == "reduction" \
        else None
    keepdims = draw(st.booleans())

    def fn(a, b):  # type: ignore[no-untyped-def]
        x = a
        for op in ops:
            x = UNARY[op](x) if op in UNARY else BINARY[op](x, b)
        if reduce is not None:
            x = REDUCE[reduce](x, axis=-1, keepdims=keepdims)
            if keepdims:
                x = x * a  # the reduction used again on whole rows
        return x
    return fn, [pypto.spec(shape, dtype), pypto.spec(other_shape, dtype)]


def vector_workloads(fn: Callable, specs: list, target) -> list:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = pypto.kernel(fn).lower(*specs, target=target)
    return [(wl, s) for wl, s in zip(compiled.workloads, compiled.schedules)
            if wl.family == "vector"]


def assert_identical(wl, schedule, target) -> None:  # type: ignore[no-untyped-def]
    with plans_made() as made:
        got = lowering.lower(wl, schedule, target)
    assert made and all(made), "the compiled emitter did not run"
    with specification():
        want = lowering.lower(wl, schedule, target)
    assert got == want, (wl.describe(), schedule.to_json(), target.name)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), chains(), st.sampled_from(sorted(TARGETS)))
def test_compiled_emitter_equals_the_python_emitter(data, chain, target_name):
    fn, specs = chain
    target = TARGETS[target_name]
    for wl, default in vector_workloads(fn, specs, target):
        assert_identical(wl, default, target)
        schedule = data.draw(random_schedule(wl, target, max_units=512))
        assert_identical(wl, schedule, target)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), st.sampled_from(sorted(LONG_ROW_CHAINS)), st.integers(1, 5),
       st.integers(300, 1200), st.sampled_from(["float16", "float32"]),
       st.sampled_from(sorted(TARGETS)))
def test_long_rows_multi_pass_programs_are_identical(data, name, rows, cols, dtype, target):
    """Rows longer than the vector memory (cut to 4 KiB): chunked, multi-pass points."""
    target = small_vector_memory(target)
    specs = [pypto.spec((rows, cols), dtype), pypto.spec((rows, 1), dtype)]
    for wl, default in vector_workloads(LONG_ROW_CHAINS[name], specs, target):
        assert_identical(wl, default, target)
        for _ in range(2):
            assert_identical(wl, data.draw(random_schedule(wl, target, max_units=512)), target)


def test_a_4096_softmax_is_identical_at_its_default_in_place_and_split():
    """The tuning benchmark's softmax (ascend910b): its default, single buffers in
    place, and the chain split into two passes, each thousands of tiles over the cores."""
    target = TARGETS["ascend910b"]
    ((wl, default),) = vector_workloads(lambda a: pypto.softmax(a, -1),
                                        [pypto.spec((4096, 4096), "float32")], target)
    for schedule in (default, default.replace(depth=1, inplace=True),
                     default.replace(split_at=2, cores=40)):
        assert not validate(wl, schedule, target)
        assert_identical(wl, schedule, target)


TABLE_OPS = sorted(op for table in (UNARY_OPS, BINARY_OPS, COMPARE_OPS, REDUCE_OPS)
                   for op in table if callable(getattr(pypto, op, None)))


@pytest.mark.parametrize("op", TABLE_OPS)
@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_every_op_of_the_tables_lowers_identically(op, dtype):
    """Each op of ``vector_chain``'s tables that the frontend offers (an op added to a
    table later is picked up here), alone on a 2-D tile, over every target."""
    f = getattr(pypto, op)
    if op in REDUCE_OPS:
        fn, specs = (lambda a: f(a, axis=-1, keepdims=True)), [pypto.spec((6, 50), dtype)]
    elif op == "cast":
        other = "float32" if dtype == "float16" else "float16"
        fn, specs = (lambda a: f(a, other)), [pypto.spec((6, 50), dtype)]
    elif op in UNARY_OPS:
        fn, specs = (lambda a: f(a)), [pypto.spec((6, 50), dtype)]
    else:
        fn, specs = (lambda a, b: f(a, b)), [pypto.spec((6, 50), dtype), pypto.spec((50,), dtype)]
    for target in TARGETS.values():
        workloads = vector_workloads(fn, specs, target)
        assert workloads
        for wl, default in workloads:
            assert_identical(wl, default, target)
            assert_identical(wl, default.replace(tile_rows=1, cores=2), target)


def test_a_chain_with_an_op_the_plan_does_not_know_runs_the_python_emitter():
    """``plan`` gives ``None`` (and ``vector.emit`` then runs its own loop) for an op
    that is in none of ``vector_chain``'s tables, instead of guessing its lowering."""
    target = TARGETS["ascend910b"]
    ((wl, s),) = vector_workloads(lambda a: pypto.relu(a), [pypto.spec((8, 64), "float32")],
                                  target)
    i = next(i for i, n in enumerate(wl.nodes) if n.op == "relu")
    nodes = list(wl.nodes)
    nodes[i] = dataclasses.replace(nodes[i], op="an_op_from_the_future")
    odd = dataclasses.replace(wl, nodes=tuple(nodes))
    chain = analyze(odd, inplace=s["inplace"])
    ub = target.role("vector")
    arena = Arena(memory_map(target).roles["vector"], ub.capacity, ub.alignment, ub.name)
    emitter = ChainEmitter(odd, chain, s["tile_rows"], s["tile_cols"], s["depth"], arena,
                           {0: 0}, {odd.outputs[0]: 1}, False)
    assert vector_plan.plan(emitter, memory_map(target), loaded=False) is None
    emitter.wl = wl
    assert vector_plan.plan(emitter, memory_map(target), loaded=False) is not None


def test_the_extension_numbers_are_the_plans():
    """``_vector.pyx`` reads plans by the column and step numbers ``vector_plan`` writes."""
    for name, value in _vector.NUMBERS.items():
        assert getattr(vector_plan, name) == value, name
