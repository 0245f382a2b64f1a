"""The simulator never beats physics (issue 12, acceptance): random schedules of every
op family on every target, each program checked against what no real chip can do.

* ``cycles >= bound_cycles``: the roofline bound (flops at peak on every core, the
  compulsory bytes at the nominal DRAM bandwidth, plus launch) is a floor;
* ``dram_read_bytes >= `` the compulsory input bytes: every simulation starts with a
  cold L2, so every input byte comes from DRAM at least once;
* ``dram_write_bytes >=`` the compulsory output bytes;
* each pipe's busy cycles fit in its core's cycles.

Each (family, target) case runs ``EXAMPLES`` Hypothesis examples (a shape and a seed)
of ``SCHEDULES`` random schedules and the default each: 7 families x 3 targets x
24 x 6 = 3,024 lowered kernels a run, more programs (a kernel may have several).
``scripts/sim_physics_soak.py`` runs the same checks on many more.
"""

from __future__ import annotations

import random
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.compile.compiled import Compiled
from pypto.schedule_space import space_for, validate
from pypto.sim.roofline import compulsory_bytes
from pypto.targets import available_targets, load_target

EXAMPLES = 24
SCHEDULES = 5


class Pick:
    """The random choices a family builder makes: from Hypothesis (``data``, so failures
    shrink) or from a ``random.Random`` (the soak script)."""

    def __init__(self, data: st.DataObject | None = None,
                 rng: random.Random | None = None) -> None:
        self.data, self.rng = data, rng

    def int(self, low: int, high: int) -> int:
        if self.data is not None:
            return self.data.draw(st.integers(low, high))
        assert self.rng is not None
        return self.rng.randint(low, high)

    def choice(self, options: list) -> Any:
        if self.data is not None:
            return self.data.draw(st.sampled_from(options))
        assert self.rng is not None
        return self.rng.choice(options)

pytestmark = pytest.mark.filterwarnings("ignore:.*no tuned schedule")


def _matmul(pick: Pick) -> tuple[Callable[..., Any], tuple]:
    m, k, n = pick.int(1, 160), pick.int(1, 300), pick.int(1, 260)
    dtype = pick.choice(["float16", "float32"])
    return pypto.matmul, (pypto.spec((m, k), dtype), pypto.spec((k, n), dtype))


def _batched(pick: Pick) -> tuple[Callable[..., Any], tuple]:
    b, m = pick.int(1, 4), pick.int(1, 70)
    k, n = pick.int(1, 130), pick.int(1, 130)
    return ((lambda x, y: pypto.relu(pypto.matmul(x, y))),
            (pypto.spec((b, m, k), "float16"), pypto.spec((b, k, n), "float16")))


def _conv2d(pick: Pick) -> tuple[Callable[..., Any], tuple]:
    c, kk = pick.int(1, 24), pick.int(1, 24)
    h, w = pick.int(3, 14), pick.int(3, 14)
    r = pick.choice([1, 3])
    pad, stride = pick.int(0, r // 2), pick.int(1, 2)
    return ((lambda x, y: pypto.conv2d(x, y, stride=stride, padding=pad)),
            (pypto.spec((1, c, h, w), "float16"), pypto.spec((kk, c, r, r), "float16")))


def _rows_cols(pick: Pick) -> tuple[int, int]:
    return pick.int(1, 300), pick.int(1, 1100)


def _elementwise(pick: Pick) -> tuple[Callable[..., Any], tuple]:
    shape = _rows_cols(pick)
    dtype = pick.choice(["float16", "float32"])
    return ((lambda a, b: pypto.relu(a + b) * a),
            (pypto.spec(shape, dtype), pypto.spec(shape, dtype)))


def _reduction(pick: Pick) -> tuple[Callable[..., Any], tuple]:
    shape = _rows_cols(pick)
    return ((lambda a: pypto.sum(a, axis=-1)), (pypto.spec(shape, "float16"),))


def _softmax(pick: Pick) -> tuple[Callable[..., Any], tuple]:
    shape = _rows_cols(pick)
    return pypto.softmax, (pypto.spec(shape, pick.choice(["float16", "float32"])),)


def _layernorm(pick: Pick) -> tuple[Callable[..., Any], tuple]:
    return pypto.layernorm, (pypto.spec(_rows_cols(pick), "float16"),)


FAMILIES = {"matmul": _matmul, "batched_matmul": _batched, "conv2d": _conv2d,
            "elementwise": _elementwise, "reduction": _reduction, "softmax": _softmax,
            "layernorm": _layernorm}


def check_physics(compiled: Compiled) -> int:
    """Assert the invariants on each program of ``compiled``; how many were checked."""
    for wl, program, result in zip(compiled.workloads, compiled.programs,
                                   compiled.simulate_each()):
        what = f"{program.name} on {compiled.target.name}"
        reads, writes = compulsory_bytes(wl)
        assert result.cycles >= result.bound_cycles, what
        assert result.dram_read_bytes >= reads, what
        assert result.dram_write_bytes >= writes, what
        core_cycles = result.core_cycles[:, None]
        assert (result.pipe_busy <= core_cycles).all(), what
        assert (result.core_cycles <= result.cycles).all(), what
    return len(compiled.programs)


def random_schedules(compiled: Compiled, rng: random.Random) -> Compiled:
    """``compiled`` with a random valid schedule for each of its workloads."""
    for i, wl in enumerate(compiled.workloads):
        schedule = space_for(wl, compiled.target).sample(rng)
        assert not validate(wl, schedule, compiled.target)
        compiled = compiled.with_schedule(i, schedule)
    return compiled


def run_case(family: str, target: str, pick: Pick, seed: int, schedules: int) -> int:
    """Lower one random instance of ``family`` and check ``schedules`` random schedules
    of it (and its default); the number of programs checked."""
    fn, specs = FAMILIES[family](pick)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        compiled = pypto.kernel(fn).lower(*specs, target=load_target(target))
    rng = random.Random(seed)
    checked = check_physics(compiled)
    for _ in range(schedules):
        checked += check_physics(random_schedules(compiled, rng))
    return checked


@pytest.mark.parametrize("target", available_targets())
@pytest.mark.parametrize("family", sorted(FAMILIES))
@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_random_schedules_never_beat_physics(family: str, target: str, data: st.DataObject,
                                             seed: int) -> None:
    assert run_case(family, target, Pick(data), seed, SCHEDULES) >= SCHEDULES


def test_cold_l2_reads_every_input_line() -> None:
    """The DRAM read bound is tight where it should be: an aligned add reads each input
    exactly once from DRAM, whole lines and no more."""
    compiled = pypto.kernel(lambda a, b: a + b).lower(
        pypto.spec((256, 1024), "float16"), pypto.spec((256, 1024), "float16"),
        target="ascend910b")
    result = compiled.simulate()
    reads, writes = compulsory_bytes(compiled.workloads[0])
    assert (result.dram_read_bytes, result.dram_write_bytes) == (reads, writes)
    assert np.all(result.pipe_busy <= result.cycles)


@pytest.mark.parametrize("target", available_targets())
def test_a_strided_1x1_conv_needs_only_the_pixels_it_reads(target: str) -> None:
    """A 1x1 conv with stride 2 reads a quarter of its input: the compulsory bytes (and
    the roofline bound) count those pixels, not the whole tensor, and the simulator's
    DRAM reads still cover them (found by the random-schedule test: 2,048 bytes read
    against 2,064 counted for a 24-channel 6x6 input)."""
    conv = pypto.kernel(lambda x, y: pypto.conv2d(x, y, stride=2, padding=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        compiled = conv.lower(pypto.spec((1, 24, 6, 6), "float16"),
                              pypto.spec((7, 24, 1, 1), "float16"), target=load_target(target))
    [wl] = [w for w in compiled.workloads
            if any(n.op in ("conv2d_nhwc", "conv2d_nchw") for n in w.nodes)]
    reads, _ = compulsory_bytes(wl)
    assert reads == (3 * 3 * 24 + 7 * 24) * 2
    check_physics(compiled)
    check_physics(random_schedules(compiled, random.Random(0)))
