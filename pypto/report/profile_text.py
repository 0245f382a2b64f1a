"""The profiler's text report: a Rich table rendered as plain text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pypto.codegen.isa import COMPUTE_PIPES, Pipe

if TYPE_CHECKING:
    from pypto.report.profiler import ProfiledCall
    from pypto.sim.result import SimResult

# The pipes whose utilization the report lists, in the ISA's order.
WORKING_PIPES = tuple(p.name for p in Pipe if p != Pipe.SCALAR)


def shares(r: SimResult) -> tuple[float, float]:
    """(compute, copy) shares of the busy pipe time; copy pipes are those the target's
    data paths run on (``SimResult.copy_pipes``)."""
    compute = sum(int(r.pipe_busy[:, p].sum()) for p in COMPUTE_PIPES)
    copy = sum(int(r.pipe_busy[:, p].sum()) for p in r.copy_pipes)
    total = compute + copy
    return (compute / total, copy / total) if total else (0.0, 0.0)


def top_bubbles(r: SimResult, count: int = 2) -> str:
    """The ``count`` largest bubble causes, each as its share of the core time: every cause,
    queue-full stalls of the scalar unit included (often the largest)."""
    bubbles = sorted(r.bubbles().items(), key=lambda kv: -kv[1])[:count]
    core_time = max(1, r.cycles * len(r.core_cycles))
    return ", ".join(f"{cause} {cycles / core_time:.0%}" for cause, cycles in bubbles) or "-"


HEADER = (("call", "right"), ("kernel", "left"), ("workload", "left"), ("schedule", "left"),
          ("cycles", "right"), ("us", "right"), ("of roofline", "right"),
          ("compute/copy", "right"), ("utilization (avg over cores)", "left"),
          ("top bubbles (share of core time)", "left"))


def render(calls: Sequence[ProfiledCall]) -> str:
    """The report: a table of every workload of every call, then the total."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from pypto.report.console import render as as_text

    if not calls:
        return "No kernel ran on the simulated NPU inside the profiler."
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name, justify in HEADER:
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for n, call in enumerate(calls):
        for i, (wl, src, r) in enumerate(zip(call.workloads, call.sources, call.results)):
            compute, copy = shares(r)
            util = r.utilization()
            pipes = " ".join(f"{p}:{util[p]:.0%}" for p in WORKING_PIPES if util[p] >= 0.005)
            row = (f"{n}", call.kernel, f"{i}: {' + '.join(wl.ops)}", src, f"{r.cycles:,}",
                   f"{r.time_us:.2f}", f"{r.efficiency:.0%}", f"{compute:.0%}/{copy:.0%}",
                   pipes, top_bubbles(r))
            table.add_row(*(Text(cell) for cell in row))
    total = sum(c.result.cycles for c in calls)
    clock = calls[0].results[0].clock_ghz
    return as_text(table) + (f"\ntotal: {len(calls)} call(s), {total:,} cycles, "
                             f"{total / (clock * 1e3):.2f} us on {calls[0].target}")
