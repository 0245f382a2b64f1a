"""Shared by the tests of the operators of issue 16 item 7 (tests/test_ops_*.py): run a
kernel on the simulated NPU of a drawn target under its default schedules and under
random valid ones, check every program is race-free, agrees with the CPU reference,
and agrees with an independent NumPy computation (float64) within a stated tolerance."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import pypto
from pypto.targets import available_targets
from tests.strategies import assert_close, random_schedule, run_both

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TARGETS = available_targets()


def host(shape: Sequence[int], dtype: str, seed: int, low: float = -2.0,
         high: float = 2.0) -> np.ndarray:
    """Random host data of ``dtype`` (integers in [-8, 8))."""
    rng = np.random.default_rng(seed)
    if dtype in ("int8", "int32"):
        return rng.integers(-8, 8, tuple(shape)).astype(dtype)
    return rng.uniform(low, high, tuple(shape)).astype(dtype)


def check_against_numpy(npu: Any, expected: Any, *, rtol: float, atol: float) -> None:
    """NPU results equal ``expected`` (NumPy arrays computed independently, in float64
    where it matters) within ``rtol``/``atol``; NaN where NumPy has NaN; same dtype."""
    outs = npu if isinstance(npu, (list, tuple)) else [npu]
    refs = expected if isinstance(expected, (list, tuple)) else [expected]
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        got = o.numpy()
        assert got.shape == r.shape, (got.shape, r.shape)
        assert got.dtype == r.dtype, (got.dtype, r.dtype)
        if r.dtype.kind in "iub":
            np.testing.assert_array_equal(got, r)
        else:
            np.testing.assert_allclose(got.astype(np.float64), r.astype(np.float64),
                                       rtol=rtol, atol=atol, equal_nan=True)


def run_scheduled(data: st.DataObject, fn: Callable[..., Any], arrays: Sequence[np.ndarray],
                  expected: Any, *, rtol: float, atol: float, target: str | None = None,
                  layouts: Sequence[str | None] | None = None) -> Any:
    """``fn`` on the tensors of ``arrays`` on a drawn target (or ``target``): default
    schedules, then random ones; each run race-free, equal to the CPU reference and
    within tolerance of ``expected``. Returns the default run's ``Compiled``."""
    if target is None:
        target = data.draw(st.sampled_from(TARGETS), label="target")
    layouts = layouts or [None] * len(arrays)
    tensors = [pypto.tensor(a, dtype=a.dtype.name, layout=lay) for a, lay in zip(arrays, layouts)]
    npu, cpu, compiled = run_both(fn, *tensors, target=target)
    assert_close(npu, cpu, "")
    check_against_numpy(npu, expected, rtol=rtol, atol=atol)
    schedules = {i: data.draw(random_schedule(wl, compiled.target), label=f"schedule {i}")
                 for i, wl in enumerate(compiled.workloads)}
    npu2, cpu2, _ = run_both(fn, *tensors, schedules=schedules, target=target)
    assert_close(npu2, cpu2, "")
    check_against_numpy(npu2, expected, rtol=rtol, atol=atol)
    return compiled
