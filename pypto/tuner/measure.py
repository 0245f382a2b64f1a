"""Measure one schedule: lower it and time it on the simulator (no numbers computed).

``measure`` never raises for a bad schedule: it returns a ``Measurement`` whose status is
``ok`` (with cycles), ``invalid`` (the space or the lowering rejects it: not a trial),
``error`` (lowering or simulation failed) or ``timeout``.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pypto.errors import PyptoError

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Schedule, Space
    from pypto.targets import Target


@dataclass(frozen=True)
class Measurement:
    status: str                      # ok | invalid | error | timeout
    cycles: int | None = None
    problems: tuple[str, ...] = ()   # validation messages (invalid) or the error (error)
    lower_s: float = 0.0
    simulate_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def counts(self) -> bool:
        """Whether this is a trial (invalid points are rejected, not measured)."""
        return self.status != "invalid"

    @property
    def error(self) -> str | None:
        return "; ".join(self.problems) if self.problems else None


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Iterator[None]:
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass
class Measurer:
    """Measures schedules of one workload on one target (space and bound built once)."""

    workload: Workload
    target: Target
    space: Space | None = None
    time_limit: float | None = None
    bound_cycles: int = field(init=False)

    def __post_init__(self) -> None:
        from pypto.schedule_space import space_for
        from pypto.sim.roofline import workload_bound

        if self.space is None:
            self.space = space_for(self.workload, self.target)
        self.bound_cycles = workload_bound(self.workload, self.target)

    def check(self, schedule: Schedule) -> list[str]:
        """Every reason ``schedule`` is not a valid point (empty when it is): the space's
        constraints, the one definition of validity."""
        assert self.space is not None
        try:
            return self.space.validate(schedule)
        except PyptoError as e:
            return [str(e)]

    def __call__(self, schedule: Schedule) -> Measurement:
        return measure(self.workload, self.target, schedule, measurer=self)


def measure(wl: Workload, target: Target, schedule: Schedule, *,
            measurer: Measurer | None = None, time_limit: float | None = None) -> Measurement:
    """Lower ``schedule`` of ``wl`` for ``target`` and simulate it (timing only)."""
    from pypto.codegen.lower import lower
    from pypto.sim.timing import simulate

    m = measurer or Measurer(wl, target, time_limit=time_limit)
    problems = m.check(schedule)
    if problems:
        return Measurement("invalid", problems=tuple(problems))
    t0 = time.perf_counter()
    t1 = t0
    try:
        with _time_limit(m.time_limit):
            program = lower(wl, schedule, target)
            t1 = time.perf_counter()
            result = simulate(program, target, bound_cycles=m.bound_cycles)
    except _Timeout:
        return Measurement("timeout", problems=(f"over {m.time_limit:g} s",),
                           lower_s=t1 - t0, simulate_s=time.perf_counter() - t1)
    except PyptoError as e:
        # the lowering rejecting a schedule the space let through is still invalid
        status = "invalid" if t1 == t0 else "error"
        return Measurement(status, problems=(f"{type(e).__name__}: {e}",),
                           lower_s=t1 - t0)
    except Exception as e:  # noqa: BLE001 - a crash on one schedule must not end the run
        return Measurement("error", problems=(f"{type(e).__name__}: {e}",),
                           lower_s=t1 - t0, simulate_s=time.perf_counter() - t1)
    t2 = time.perf_counter()
    return Measurement("ok", cycles=int(result.cycles), lower_s=t1 - t0, simulate_s=t2 - t1)
