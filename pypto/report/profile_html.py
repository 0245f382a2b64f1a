"""The profiler's HTML page (``Profiler.visualize``): Jinja2 + Plotly, inlined once.

Per group of identical calls (same kernel, workloads and schedules: drawn once, the
table counts them): a zoomable, hoverable timeline of cores x pipes (each pipe's busy
share per time bin, in the pipe's colour, with the launch overhead marked), a
utilization heatmap (cores x time buckets: the busiest pipe's share), and the bubbles
per pipe by cause. Size is bounded: the timeline has ``BINS`` columns however many
instructions ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pypto.codegen.isa import Op, Pipe
from pypto.report.profile_text import render, shares

if TYPE_CHECKING:
    from pypto.report.profiler import ProfiledCall
    from pypto.sim.result import SimResult

BINS = 400
HEAT_BINS = 100
PIPES = [p for p in Pipe if p != Pipe.SCALAR]
COLORS = {Pipe.MTE2: "#1f77b4", Pipe.MTE1: "#17becf", Pipe.CUBE: "#d62728",
          Pipe.FIX: "#9467bd", Pipe.VEC: "#ff7f0e", Pipe.MTE3: "#2ca02c"}
_WORK = {int(op) for op in Op if op not in (Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER, Op.NOP)}


def busy_bins(r: SimResult, bins: int = BINS) -> np.ndarray:
    """``[core, pipe, bin]``: the share of each bin of the cores' time (launch excluded)
    that the pipe spent on work (instruction spans; flags and barriers not counted)."""
    cores = len(r.core_cycles)
    out = np.zeros((cores, len(Pipe), bins))
    span = int(r.core_cycles.max()) if cores else 0
    if r.trace is None or not span:
        return out
    t = r.trace[np.isin(r.trace["op"], list(_WORK))]
    width = span / bins
    edges = np.arange(bins + 1) * width
    start, end = t["start"].astype(np.float64), t["end"].astype(np.float64)
    first = (start // width).astype(np.int64)
    last = np.minimum(((end - 1e-9) // width).astype(np.int64), bins - 1)
    for i in range(len(t)):  # most spans cover few bins
        for b in range(first[i], last[i] + 1):
            lo, hi = max(start[i], edges[b]), min(end[i], edges[b + 1])
            if hi > lo:
                out[t["core"][i], t["pipe"][i], b] += (hi - lo) / width
    return np.minimum(out, 1.0)


@dataclass
class CallGroup:
    calls: list[int]           # indices of identical calls
    call: ProfiledCall

    @property
    def label(self) -> str:
        n = self.calls
        which = f"call {n[0]}" if len(n) == 1 else f"calls {', '.join(map(str, n[:6]))}" \
            + ("…" if len(n) > 6 else "")
        return f"{self.call.kernel} ({which})"


def group_calls(calls: Sequence[ProfiledCall]) -> list[CallGroup]:
    """Calls with the same kernel, workloads and schedules, in first-seen order."""
    groups: dict[tuple, CallGroup] = {}
    for n, c in enumerate(calls):
        key = (c.kernel, c.target, tuple(w.key for w in c.workloads),
               tuple(s.key for s in c.schedules))
        if key in groups:
            groups[key].calls.append(n)
        else:
            groups[key] = CallGroup([n], c)
    return list(groups.values())


def timeline_figure(r: SimResult, title: str) -> dict:
    """Cores x pipes over time: a heatmap per pipe in that pipe's colour."""
    us = 1.0 / (r.clock_ghz * 1e3)
    grid = busy_bins(r)
    cores = grid.shape[0]
    launch = r.cycles - (int(r.core_cycles.max()) if cores else 0)
    width_us = (int(r.core_cycles.max()) if cores else 0) / BINS * us
    pipes = [p for p in PIPES if grid[:, p].any()]  # rows only for pipes that worked
    rows = [f"core {c} {p.name}" for c in range(cores) for p in pipes]
    data = []
    for p in pipes:
        busy = [c for c in range(cores) if grid[c, p].any()]
        for c in busy:  # a trace per row, so that the hover names its core and pipe
            data.append({"type": "heatmap", "name": rows[c * len(pipes) + pipes.index(p)],
                         "y": [c * len(pipes) + pipes.index(p)],
                         "z": [[round(float(x), 2) if x > 0.005 else None for x in grid[c, p]]],
                         "x0": round(launch * us + width_us / 2, 5), "dx": round(width_us, 6),
                         "zmin": 0, "zmax": 1, "showscale": False, "hoverongaps": False,
                         "colorscale": [[0, "#ffffff"], [1, COLORS[p]]],
                         "hovertemplate": f"core {c} {p.name} at %{{x:.3f}} µs: "
                                          "%{z:.0%} busy<extra></extra>"})
        if busy:
            data.append({"type": "scatter", "mode": "markers", "name": p.name, "x": [None],
                         "y": [None], "marker": {"color": COLORS[p], "symbol": "square",
                                                 "size": 12}, "hoverinfo": "skip"})
    layout = {"title": {"text": title, "font": {"size": 13}},
              "height": max(260, 14 * len(rows) + 110),
              "margin": {"l": 100, "r": 10, "t": 40, "b": 45}, "font": {"size": 10},
              "xaxis": {"title": {"text": "µs since the launch"}, "range": [0, r.time_us]},
              "yaxis": {"autorange": "reversed", "tickvals": list(range(len(rows))),
                        "ticktext": rows, "zeroline": False, "showgrid": False},
              "legend": {"orientation": "h", "y": 1.02, "x": 0.5, "yanchor": "bottom"},
              "shapes": [{"type": "rect", "xref": "x", "yref": "paper", "x0": 0,
                          "x1": launch * us, "y0": 0, "y1": 1, "fillcolor": "#999",
                          "opacity": 0.25, "line": {"width": 0}}],
              "annotations": [{"text": "launch", "x": launch * us / 2, "y": 1, "xref": "x",
                               "yref": "paper", "showarrow": False, "yanchor": "bottom"}]}
    return {"data": data, "layout": layout}


def utilization_figure(r: SimResult) -> dict:
    """Cores x time buckets: the busiest working pipe's share of each bucket."""
    grid = busy_bins(r, HEAT_BINS)
    us = 1.0 / (r.clock_ghz * 1e3)
    cores = grid.shape[0]
    launch = r.cycles - (int(r.core_cycles.max()) if cores else 0)
    width_us = (int(r.core_cycles.max()) if cores else 0) / HEAT_BINS * us
    z = grid[:, [int(p) for p in PIPES], :].max(axis=1) if cores else np.zeros((0, HEAT_BINS))
    return {"data": [{"type": "heatmap", "z": np.round(z, 2).tolist(),
                      "y": [f"core {c}" for c in range(cores)],
                      "x0": round(launch * us + width_us / 2, 5), "dx": round(width_us, 6),
                      "zmin": 0, "zmax": 1, "colorscale": "Viridis",
                      "colorbar": {"title": {"text": "busy"}, "tickformat": ".0%"},
                      "hovertemplate": "%{y} at %{x:.3f} µs: busiest pipe %{z:.0%}"
                                       "<extra></extra>"}],
            "layout": {"height": max(200, 12 * cores + 90), "font": {"size": 10},
                       "margin": {"l": 60, "r": 10, "t": 10, "b": 45},
                       "xaxis": {"title": {"text": "µs since the launch"}},
                       "yaxis": {"autorange": "reversed", "type": "category"}}}


def bubble_rows(r: SimResult) -> list[dict]:
    """Per pipe, the cycles it lost and why, as shares of the cores' kernel time:
    waiting on a flag from another pipe, nothing issued yet (starved), and the scalar
    unit blocked because the pipe's queue was full."""
    core_time = max(1, r.cycles * len(r.core_cycles))
    rows = []
    for p in Pipe:
        causes = {f"waits {q.name}": int(r.flag_wait[:, p, q].sum()) for q in Pipe}
        causes["starved (nothing issued)"] = int(r.starved[:, p].sum())
        causes = {k: v for k, v in causes.items() if v}
        stall = int(r.queue_stall[:, p].sum())
        if stall:
            causes["its queue full (SCALAR waits)"] = stall
        for cause, cycles in sorted(causes.items(), key=lambda kv: -kv[1]):
            rows.append({"pipe": p.name, "cause": cause, "cycles": cycles,
                         "share": f"{cycles / core_time:.1%}"})
    return rows


def bubble_figure(rows: list[dict]) -> dict:
    causes = sorted({r["cause"] for r in rows})
    pipes = [p.name for p in Pipe if any(r["pipe"] == p.name for r in rows)]
    data = [{"type": "bar", "orientation": "h", "name": cause, "y": pipes,
             "x": [sum(r["cycles"] for r in rows if r["pipe"] == p and r["cause"] == cause)
                   for p in pipes],
             "hovertemplate": "%{y}: %{x} cycles<extra>" + cause + "</extra>"}
            for cause in causes]
    return {"data": data, "layout": {"barmode": "stack", "height": 60 + 28 * max(1, len(pipes)),
                                     "margin": {"l": 70, "r": 10, "t": 10, "b": 40},
                                     "font": {"size": 10},
                                     "xaxis": {"title": {"text": "cycles, all cores"}},
                                     "legend": {"font": {"size": 9}}}}


def page_data(calls: Sequence[ProfiledCall]) -> dict:
    """Everything the template shows."""
    groups = []
    for g in group_calls(calls):
        r = g.call.result
        compute, copy = shares(r)
        bubbles = bubble_rows(r)
        groups.append({
            "label": g.label, "count": len(g.calls), "kernel": g.call.kernel,
            "workloads": [w.describe() for w in g.call.workloads],
            "sources": g.call.sources, "schedules": [s.to_json() for s in g.call.schedules],
            "cycles": r.cycles, "us": f"{r.time_us:.2f}",
            "total_us": f"{r.time_us * len(g.calls):.2f}",
            "efficiency": f"{r.efficiency:.0%}", "compute_share": f"{compute:.0%}",
            "copy_share": f"{copy:.0%}", "bubbles": bubbles,
            "figures": {"timeline": timeline_figure(r, g.label),
                        "utilization": utilization_figure(r),
                        "bubbles": bubble_figure(bubbles)}})
    total = sum(c.result.cycles for c in calls)
    return {"groups": groups, "calls": len(calls), "total_cycles": total,
            "total_us": f"{sum(c.result.time_us for c in calls):.2f}",
            "target": calls[0].target if calls else "", "text": render(calls)}


def write_profile_html(calls: Sequence[ProfiledCall], path: Path) -> Path:
    from pypto.report.tuning_html import environment, plotly_js

    html = environment().get_template("profile.html").render(plotly_js=plotly_js(),
                                                             **page_data(calls))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
