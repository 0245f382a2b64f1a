"""The profiler's HTML page: a timeline per core and pipe (busy share per time bin), a
utilization heatmap (core x pipe) and the bubble table. Self-contained: no scripts, no
network."""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pypto.codegen.isa import Op, Pipe
from pypto.report.profile_text import render, shares

if TYPE_CHECKING:
    from pypto.report.profiler import ProfiledCall
    from pypto.sim.result import SimResult

BINS = 600
PIPES = [p for p in Pipe if p != Pipe.SCALAR]
COLORS = {Pipe.MTE2: "31,119,180", Pipe.MTE1: "23,190,207", Pipe.CUBE: "214,39,40",
          Pipe.FIX: "148,103,189", Pipe.VEC: "255,127,14", Pipe.MTE3: "44,160,44"}
_WORK = {int(op) for op in Op if op not in (Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER, Op.NOP)}


def busy_bins(r: SimResult, bins: int = BINS) -> np.ndarray:
    """``[core, pipe, bin]`` share of each time bin the pipe spent on work."""
    cores = len(r.core_cycles)
    out = np.zeros((cores, len(Pipe), bins))
    if r.trace is None or not r.cycles:
        return out
    width = r.cycles / bins
    for rec in r.trace:
        if int(rec["op"]) not in _WORK:
            continue
        s, e = float(rec["start"]), float(rec["end"])
        b0, b1 = int(s // width), min(int((e - 1e-9) // width), bins - 1)
        for b in range(b0, b1 + 1):
            lo, hi = max(s, b * width), min(e, (b + 1) * width)
            out[int(rec["core"]), int(rec["pipe"]), b] += max(0.0, hi - lo) / width
    return np.minimum(out, 1.0)


def _timeline(r: SimResult) -> str:
    grid = busy_bins(r)
    cores = grid.shape[0]
    row_h, label_w, bin_w = 9, 90, 1.5
    height = cores * (len(PIPES) * row_h + 6) + 20
    parts = [f'<svg width="{label_w + BINS * bin_w + 10}" height="{height}" '
             'xmlns="http://www.w3.org/2000/svg" font-size="9" font-family="monospace">']
    y = 10
    for c in range(cores):
        parts.append(f'<text x="0" y="{y + 8}">core {c}</text>')
        for p in PIPES:
            parts.append(f'<text x="45" y="{y + 8}" fill="#555">{p.name}</text>')
            for b in np.flatnonzero(grid[c, p] > 0.02):
                parts.append(f'<rect x="{label_w + b * bin_w:.1f}" y="{y}" width="{bin_w}" '
                             f'height="{row_h - 1}" fill="rgba({COLORS[p]},{grid[c, p, b]:.2f})"/>')
            y += row_h
        y += 6
    parts.append("</svg>")
    return "".join(parts)


def _heatmap(r: SimResult) -> str:
    cores = len(r.core_cycles)
    head = "".join(f"<th>{p.name}</th>" for p in PIPES)
    rows = []
    for c in range(cores):
        cells = []
        for p in PIPES:
            u = r.pipe_busy[c, p] / max(1, r.cycles)
            cells.append(f'<td style="background:rgba({COLORS[p]},{u:.2f})">{u:.0%}</td>')
        rows.append(f"<tr><th>core {c}</th>{''.join(cells)}</tr>")
    return f'<table class="heat"><tr><th></th>{head}</tr>{"".join(rows)}</table>'


def _bubbles(r: SimResult) -> str:
    total = max(1, r.cycles * len(r.core_cycles))
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v}</td><td>{v / total:.1%}</td></tr>"
                   for k, v in list(r.bubbles().items())[:12])
    return ("<table><tr><th>bubble (pipe blocked on)</th><th>cycles, all cores</th>"
            f"<th>share of core time</th></tr>{rows}</table>")


def write_profile_html(calls: Sequence[ProfiledCall], path: Path) -> Path:
    sections = []
    for n, call in enumerate(calls):
        for i, (wl, src, r) in enumerate(zip(call.workloads, call.sources, call.results)):
            compute, copy = shares(r)
            sections.append(
                f"<h2>call {n}: {html.escape(call.kernel)}, workload {i}</h2>"
                f"<p>{html.escape(wl.describe())}<br>schedule ({src}): "
                f"<code>{html.escape(call.schedules[i].to_json())}</code><br>"
                f"{r.cycles} cycles = {r.time_us:.2f} us; roofline bound {r.bound_cycles} "
                f"({r.efficiency:.0%}); compute {compute:.0%} / copy {copy:.0%} of busy time</p>"
                f"<h3>Timeline (busy share per time bin)</h3>{_timeline(r)}"
                f"<h3>Utilization (core x pipe)</h3>{_heatmap(r)}"
                f"<h3>Bubbles</h3>{_bubbles(r)}")
    body = "".join(sections) or "<p>No kernel ran on the simulated NPU.</p>"
    page = (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>PyPTO profile</title>"
        "<style>body{font-family:sans-serif;margin:20px}table{border-collapse:collapse;"
        "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
        "pre{font-size:11px}</style></head><body><h1>PyPTO profile</h1>"
        f"<pre>{html.escape(render(calls))}</pre>{body}</body></html>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page)
    return path
