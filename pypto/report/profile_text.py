"""The profiler's text report."""

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


def _table(header: Sequence[str], rows: list[Sequence[str]]) -> list[str]:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*header), fmt.format(*("-" * w for w in widths))] + \
        [fmt.format(*map(str, r)) for r in rows]


def render(calls: Sequence[ProfiledCall]) -> str:
    if not calls:
        return "No kernel ran on the simulated NPU inside the profiler."
    rows = []
    for n, call in enumerate(calls):
        for i, (wl, src, r) in enumerate(zip(call.workloads, call.sources, call.results)):
            compute, copy = shares(r)
            util = r.utilization()
            pipes = " ".join(f"{p}:{util[p]:.0%}" for p in WORKING_PIPES if util[p] >= 0.005)
            bubbles = r.bubbles()
            # every cause, queue-full stalls of the scalar unit included (often the largest)
            top = ", ".join(f"{k} {v / max(1, r.cycles * len(r.core_cycles)):.0%}"
                            for k, v in list(bubbles.items())[:2]) or "-"
            rows.append((f"{n}", call.kernel, f"{i}: {' + '.join(wl.ops)}", src, r.cycles,
                         f"{r.time_us:.2f}", f"{r.efficiency:.0%}", f"{compute:.0%}/{copy:.0%}",
                         pipes, top))
    header = ("call", "kernel", "workload", "schedule", "cycles", "us", "of roofline",
              "compute/copy", "utilization (avg over cores)", "top bubbles (share of core time)")
    total = sum(c.result.cycles for c in calls)
    clock = calls[0].results[0].clock_ghz
    lines = _table(header, rows)
    lines.append(f"total: {len(calls)} call(s), {total} cycles, {total / (clock * 1e3):.2f} us "
                 f"on {calls[0].target}")
    return "\n".join(lines)
