"""Plotly figures of the tuning report, as the plain ``{"data", "layout"}`` dicts that
``Plotly.newPlot`` takes (the page passes them through ``|tojson``; building them needs no
Plotly Python objects)."""

from __future__ import annotations

from collections.abc import Sequence

from pypto.codegen.isa import Pipe
from pypto.report.tuning_data import Trial, WorkloadReport

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")
FONT = {"size": 11}
#: Above this many trials a workload's dots carry no schedule in their hover text (the
#: best-so-far points and the top-10 table still do): it keeps big reports small.
HOVER_SCHEDULES_UP_TO = 200


def _knobs(schedule: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in schedule.items())


def best_so_far(trials: Sequence[Trial], x: str) -> tuple[list[float], list[float]]:
    """The best ok time after each trial of one run, as a step line: a point where the
    best improves and one at the last trial (``x``: ``index`` or ``seconds``)."""
    xs: list[float] = []
    ys: list[float] = []
    best = None
    last = None
    for t in trials:
        pos = getattr(t, x)
        if pos is None:
            continue
        last = pos
        if t.status == "ok" and t.cycles and (best is None or t.cycles < best):
            best = t.cycles
            xs.append(pos)
            ys.append(best)
    if best is not None and last is not None and xs[-1] != last:
        xs.append(last)
        ys.append(best)
    return xs, ys


def workload_figure(w: WorkloadReport) -> dict:
    """Four panels: best-so-far vs trials with every trial as a dot; best-so-far vs wall
    time; parameter importance; the best schedule's pipe timeline. A fifth when trials
    carry the cost model's score (the ``model`` strategy's): predicted vs measured."""
    us = 1.0 / (w.clock_ghz * 1e3)
    data: list[dict] = []
    hover = len(w.trials) <= HOVER_SCHEDULES_UP_TO
    for n, run in enumerate(w.runs):
        color = COLORS[n % len(COLORS)]
        trials = [t for t in w.trials if t.run == run]
        ok = [t for t in trials if t.status == "ok" and t.cycles]
        data.append({"type": "scatter", "mode": "markers", "name": f"{run}: trials",
                     "legendgroup": run, "x": [t.index for t in ok],
                     "y": [round(t.cycles * us, 4) for t in ok],
                     **({"text": [_knobs(t.schedule) for t in ok]} if hover else {}),
                     "hovertemplate": "trial %{x}: %{y:.3f} µs"
                                      + ("<br>%{text}" if hover else "") + "<extra></extra>",
                     "marker": {"size": 4, "opacity": 0.45, "color": color},
                     "xaxis": "x", "yaxis": "y"})
        xs, ys = best_so_far(trials, "index")
        data.append({"type": "scatter", "mode": "lines", "name": f"{run}: best",
                     "legendgroup": run, "x": xs, "y": [round(c * us, 4) for c in ys],
                     "line": {"shape": "hv", "color": color, "width": 2},
                     "hovertemplate": "after trial %{x}: best %{y:.3f} µs<extra></extra>",
                     "xaxis": "x", "yaxis": "y"})
        xs, ys = best_so_far(trials, "seconds")
        data.append({"type": "scatter", "mode": "lines", "name": f"{run}: best vs time",
                     "legendgroup": run, "showlegend": False, "x": [round(x, 3) for x in xs],
                     "y": [round(c * us, 4) for c in ys],
                     "line": {"shape": "hv", "color": color, "width": 2},
                     "hovertemplate": "%{x:.1f} s: best %{y:.3f} µs<extra></extra>",
                     "xaxis": "x2", "yaxis": "y2"})
    if w.default_cycles:
        for axis in ("", "2"):
            data.append({"type": "scatter", "mode": "lines", "name": "default schedule",
                         "showlegend": axis == "", "legendgroup": "default",
                         "x": [0, max((t.index for t in w.trials), default=1) if axis == ""
                               else max((t.seconds or 0 for t in w.trials), default=1)],
                         "y": [round(w.default_cycles * us, 4)] * 2,
                         "line": {"dash": "dot", "color": "#444"},
                         "hovertemplate": "default %{y:.3f} µs<extra></extra>",
                         "xaxis": f"x{axis}", "yaxis": f"y{axis}"})
    knobs = list(w.importance)[:12][::-1]
    data.append({"type": "bar", "orientation": "h", "name": "importance", "showlegend": False,
                 "x": [round(w.importance[k], 4) for k in knobs], "y": knobs,
                 "marker": {"color": "#4c78a8"},
                 "hovertemplate": "%{y}: %{x:.1%} of the variance<extra></extra>",
                 "xaxis": "x3", "yaxis": "y3"})
    if w.best is not None:
        data.append({"type": "heatmap", "name": "best schedule",
                     "z": [list(row) for row in w.best.timeline],
                     "y": [p.name for p in Pipe], "x0": 0, "dx": round(
                         (w.best.cycles * us) / len(w.best.timeline[0]), 5),
                     "zmin": 0, "zmax": 1, "colorscale": [[0, "#ffffff"], [1, "#08306b"]],
                     "showscale": False,
                     "hovertemplate": "%{y} at %{x:.2f} µs: %{z:.0%} busy<extra></extra>",
                     "xaxis": "x4", "yaxis": "y4"})
    scored = [t for t in w.trials if t.status == "ok" and t.cycles and t.model_score is not None]
    # rows of panels (paper coordinates) and where the second row's titles go
    top, bottom, titled = ((0.76, 1.0), (0.40, 0.62), 0.64) if scored else \
        ((0.6, 1.0), (0.0, 0.36), 0.4)
    layout = {
        "height": 860 if scored else 600, "margin": {"l": 60, "r": 10, "t": 30, "b": 40},
        "font": FONT, "legend": {"orientation": "h", "y": -0.06 if scored else -0.12},
        "hovermode": "closest",
        "xaxis": {"domain": [0, 0.47], "title": {"text": "trial"}, "anchor": "y"},
        "yaxis": {"domain": top, "title": {"text": "µs"}, "type": "log", "anchor": "x"},
        "xaxis2": {"domain": [0.55, 1], "title": {"text": "seconds into the run"},
                   "anchor": "y2"},
        "yaxis2": {"domain": top, "title": {"text": "best µs"}, "type": "log",
                   "anchor": "x2"},
        "xaxis3": {"domain": [0.12, 0.47], "title": {"text": "share of log-time variance"},
                   "anchor": "y3", "tickformat": ".0%"},
        "yaxis3": {"domain": bottom, "anchor": "x3", "automargin": True},
        "xaxis4": {"domain": [0.55, 1], "title": {"text": "µs after launch (best schedule)"},
                   "anchor": "y4"},
        "yaxis4": {"domain": bottom, "anchor": "x4"},
        "annotations": [
            _title("best so far vs trials (dots: every ok trial)", 0.0, top[1]),
            _title("best so far vs wall time", 0.55, top[1]),
            _title("parameter importance (eta squared of log cycles)", 0.0, titled),
            _title("best schedule: pipe activity per time bucket", 0.55, titled)],
    }
    if scored:
        data.append(_predicted_vs_measured(scored, us))
        layout["xaxis5"] = {"domain": [0, 0.47], "anchor": "y5",
                            "title": {"text": "cost model's score when proposed "
                                              "(higher: predicted faster)"}}
        layout["yaxis5"] = {"domain": [0, 0.24], "anchor": "x5", "type": "log",
                            "title": {"text": "measured µs"}}
        layout["annotations"].append(_title(
            f"cost model: predicted vs measured ({len(scored)} trials, Spearman "
            f"{_spearman(scored):+.2f})", 0.0, 0.26))
    return {"data": data, "layout": layout}


def _predicted_vs_measured(scored: Sequence[Trial], us: float) -> dict:
    """The trials the ``model`` strategy proposed: its score against the measured time."""
    return {"type": "scatter", "mode": "markers", "name": "predicted vs measured",
            "showlegend": False, "x": [round(t.model_score or 0.0, 4) for t in scored],
            "y": [round((t.cycles or 0) * us, 4) for t in scored],
            "marker": {"size": 4, "opacity": 0.5, "color": "#9467bd"},
            "hovertemplate": "score %{x:.3f}: %{y:.3f} µs<extra></extra>",
            "xaxis": "x5", "yaxis": "y5"}


def _spearman(scored: Sequence[Trial]) -> float:
    """Rank correlation of the scores with speed: +1, the model ranked them exactly."""
    import numpy as np

    from pypto.cost_model.metrics import spearman

    return spearman(np.array([t.model_score for t in scored], dtype=np.float64),
                    np.array([t.cycles for t in scored], dtype=np.float64))


def _title(text: str, x: float, y: float) -> dict:
    return {"text": f"<b>{text}</b>", "x": x, "y": y, "xref": "paper", "yref": "paper",
            "xanchor": "left", "yanchor": "bottom", "showarrow": False, "font": FONT}


def roofline_figure(reports: Sequence[WorkloadReport], peak_flops: dict[str, float],
                    bandwidth: dict[str, float]) -> dict:
    """Every workload's default and best schedule on the roofline of its target:
    FLOP per compulsory GM byte against achieved FLOP/s (launch included), under the
    DRAM bandwidth and cube peak of each target."""
    data: list[dict] = []
    for which, symbol in (("default", "circle-open"), ("best", "circle")):
        pts = [(w, getattr(w, f"{which}_cycles")) for w in reports]
        pts = [(w, c) for w, c in pts if c and w.intensity and w.flops]
        data.append({"type": "scatter", "mode": "markers", "name": f"{which} schedule",
                     "x": [round(w.intensity, 4) for w, _ in pts],
                     "y": [w.flops / (c / (w.clock_ghz * 1e9)) for w, c in pts],
                     "text": [w.describe for w, _ in pts],
                     "marker": {"symbol": symbol, "size": 9},
                     "hovertemplate": "%{text}<br>%{x:.1f} FLOP/B, %{y:.3s}FLOP/s"
                                      "<extra>" + which + "</extra>"})
    xs = [w.intensity for w in reports if w.intensity]
    lo, hi = (min(xs) / 4, max(xs) * 4) if xs else (0.1, 1000.0)
    for n, (target, peak) in enumerate(sorted(peak_flops.items())):
        bw = bandwidth[target]
        ridge = peak / bw
        grid = sorted({lo, hi, min(max(ridge, lo), hi)})
        data.append({"type": "scatter", "mode": "lines", "name": f"{target} roof",
                     "x": grid, "y": [min(peak, x * bw) for x in grid],
                     "line": {"color": COLORS[(n + 5) % len(COLORS)], "dash": "dash"},
                     "hovertemplate": "%{x:.1f} FLOP/B: roof %{y:.3s}FLOP/s<extra></extra>"})
    layout = {"height": 420, "margin": {"l": 70, "r": 10, "t": 20, "b": 50}, "font": FONT,
              "xaxis": {"type": "log", "title": {"text": "FLOP per compulsory GM byte"}},
              "yaxis": {"type": "log", "title": {"text": "achieved FLOP/s"}},
              "hovermode": "closest"}
    return {"data": data, "layout": layout}
