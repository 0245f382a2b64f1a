"""``pypto.Profiler``: records every kernel call run on the simulated NPU.

Example:
    >>> import pypto
    >>> a = pypto.ones((64, 64), dtype="float16")
    >>> with pypto.Profiler() as prof:
    ...     _ = pypto.kernel(lambda x: pypto.relu(x))(a)
    >>> prof.calls[0].sources
    ['default']
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pypto.compile import listeners

if TYPE_CHECKING:
    from pypto.compile.compiled import Compiled
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Schedule
    from pypto.sim.result import SimResult

DEFAULT_HTML = "pypto_profile.html"


@dataclass
class ProfiledCall:
    """One kernel call: its workloads, their schedules' sources, and the timing."""

    kernel: str
    workloads: list[Workload]
    schedules: list[Schedule]
    sources: list[str]
    results: list[SimResult]  # one per workload, with traces
    target: str

    @property
    def result(self) -> SimResult:
        """The whole call's timing (workloads run one after another)."""
        from pypto.sim.result import SimResult

        return SimResult.combine(self.results)


class Profiler:
    """Collects the simulated timing of every kernel call inside its ``with`` block."""

    runs_on_device = True  # a call listener (pypto.compile.listeners) that times each call

    def __init__(self) -> None:
        self.calls: list[ProfiledCall] = []

    def __enter__(self) -> Profiler:
        listeners.subscribe(self)
        return self

    def __exit__(self, *exc: object) -> None:
        listeners.unsubscribe(self)

    def kernel_called(self, compiled: Compiled) -> None:
        self.record(compiled)

    def record(self, compiled: Compiled) -> None:
        results = compiled.simulate_each(trace=True)
        self.calls.append(ProfiledCall(compiled.name, compiled.workloads, compiled.schedules,
                                       compiled.sources, results, compiled.target.name))

    # -- outputs ------------------------------------------------------------------------
    def report(self) -> str:
        """A text table: per call and workload, cycles, time, compute vs copy share,
        per-pipe utilization and the largest bubbles."""
        from pypto.report.profile_text import render

        return render(self.calls)

    def export_chrome_trace(self, path: str | Path) -> Path:
        """Write Chrome Trace Event JSON (open it in Perfetto or chrome://tracing)."""
        from pypto.report.chrome_trace import write_chrome_trace

        return write_chrome_trace(self.calls, Path(path))

    def visualize(self, path: str | Path | None = None) -> Path:
        """Write an HTML page (timeline per core and pipe, utilization, bubbles) and
        return its path (``pypto_profile.html`` in the working directory by default)."""
        from pypto.report.profile_html import write_profile_html

        return write_profile_html(self.calls, Path(path or DEFAULT_HTML))
