"""The compiled matmul K loop (``pypto/codegen/_matmul.pyx``) against its specification,
the Python emitter in ``codegen/matmul.py``: whole programs, byte for byte, for random
matmul workloads (batched, transposed, NZ operands, captured weights whose layout the
schedule picks, fused epilogues on the vector unit or in FIX, fp16/fp32/int8) under
random schedules (split-K, L0 sub-blocks, either L0 walk, buffer depths) on every target.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto import native
from pypto.codegen import lower as lowering
from pypto.codegen import matmul
from pypto.schedule_space import validate
from pypto.targets import available_targets, load_target
from tests.strategies import random_schedule

pytest.importorskip("pypto.codegen._matmul", reason="the compiled emitter is not built")

TARGETS = {name: load_target(name) for name in available_targets()}


@contextmanager
def specification() -> Iterator[None]:
    """Lower with the Python specifications (as ``PYPTO_IMPL=python`` does): the matmul
    emitter's own K loop, and the Python stream builder and sync pass."""
    with native.force_python():
        assert matmul._compiled_loop() is None
        yield


@st.composite
def matmul_workloads(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    """(workload, target) of a random small matmul."""
    target = TARGETS[draw(st.sampled_from(sorted(TARGETS)), label="target")]
    m, n, k = (draw(st.integers(1, 200)) for _ in range(3))
    batch = draw(st.sampled_from([(), (), (2,), (2, 3)]))
    ta, tb = draw(st.booleans()), draw(st.booleans())
    kind = draw(st.sampled_from(["plain", "plain", "epilogue", "relu", "weight", "nz"]))
    dtype = "float16" if kind != "plain" else draw(st.sampled_from(["float16", "float32",
                                                                   "int8"]))
    a_shape = (*batch, *((k, m) if ta else (m, k)))
    b_shape = (*batch, *((n, k) if tb else (k, n)))
    specs = [pypto.spec(a_shape, dtype), pypto.spec(b_shape, dtype)]
    if kind == "epilogue":
        specs.append(pypto.spec((n,), dtype))

        def fn(a, b, bias):  # type: ignore[no-untyped-def]
            return pypto.relu(pypto.matmul(a, b, transpose_a=ta, transpose_b=tb) + bias)
    elif kind == "relu":
        def fn(a, b):  # type: ignore[no-untyped-def]
            return pypto.relu(pypto.matmul(a, b, transpose_a=ta, transpose_b=tb))
    elif kind == "weight":  # a captured constant: the schedule picks its layout
        weight = pypto.tensor(np.ones((k, n)), dtype=dtype)
        specs = [pypto.spec((m, k), dtype)]

        def fn(a):  # type: ignore[no-untyped-def]
            return pypto.matmul(a, weight)
    elif kind == "nz":  # operands stored as fractal NZ by the caller
        c0 = 16
        m, n, k = (c0 * draw(st.integers(1, 8)) for _ in range(3))
        specs = [pypto.spec((m, k), dtype, layout="NZ"), pypto.spec((k, n), dtype, layout="NZ")]

        def fn(a, b):  # type: ignore[no-untyped-def]
            return pypto.matmul(a, b)
    else:
        def fn(a, b):  # type: ignore[no-untyped-def]
            return pypto.matmul(a, b, transpose_a=ta, transpose_b=tb)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = pypto.kernel(fn).lower(*specs, target=target)
    wl = next(w for w in compiled.workloads if w.family == "matmul")
    return wl, compiled.target


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), matmul_workloads())
def test_compiled_loop_equals_the_python_emitter(data, case):
    wl, target = case
    schedule = data.draw(random_schedule(wl, target))
    got = lowering.lower(wl, schedule, target)
    with specification():
        want = lowering.lower(wl, schedule, target)
    assert got == want, (wl.describe(), schedule.to_json())


def test_default_gemm_programs_are_identical():
    """A whole 512^3 GEMM (several blocks per core, split across every core) under its
    default schedule, and with split-K forced, on every target."""
    for target in TARGETS.values():
        compiled = pypto.kernel(lambda a, b: pypto.matmul(a, b)).lower(
            pypto.spec((512, 512), "float16"), pypto.spec((512, 512), "float16"),
            target=target)
        wl, default = compiled.workloads[0], compiled.schedules[0]
        for schedule in (default, default.replace(split_k=2)):
            assert not validate(wl, schedule, target)
            got = lowering.lower(wl, schedule, target)
            with specification():
                want = lowering.lower(wl, schedule, target)
            assert got == want
            assert got.num_instructions > 500
