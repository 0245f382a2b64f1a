"""``pypto report``: one self-contained HTML page of what tuning did.

Jinja2 (autoescape on: every string from the database is escaped) and Plotly, whose
JavaScript is inlined once; the figures go in as JSON (``|tojson``). The page makes no
network request.

Example:
    >>> from pypto.db import open_store
    >>> from pypto.report.tuning_html import write_report
    >>> path = write_report(open_store("sqlite://"), "/tmp/pypto_doctest_report.html")
    >>> "No tuning records" in path.read_text()
    True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pypto.report.tuning_data import WorkloadReport, collect

if TYPE_CHECKING:
    from pypto.db.store import ScheduleStore
    from pypto.targets import Target


def environment():  # -> jinja2.Environment, imported on first use
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("pypto.report", "templates"),
                              autoescape=jinja2.select_autoescape(["html"]),
                              trim_blocks=True, lstrip_blocks=True)


#: the trace types Plotly's cartesian bundle draws (``static/README.md``); the pages use
#: no other
PLOTLY_TRACES = frozenset({"bar", "box", "contour", "heatmap", "histogram", "histogram2d",
                           "histogram2dcontour", "image", "pie", "scatter", "scatterternary",
                           "violin"})


@functools.cache
def plotly_js() -> str:
    """Plotly's JavaScript (its cartesian bundle: ``static/README.md``), to inline once per
    page."""
    from importlib.resources import files

    return files("pypto.report").joinpath("static/plotly-cartesian.min.js").read_text("utf-8")


def summary_rows(reports: Sequence[WorkloadReport]) -> list[dict]:
    """The summary table, one row per workload, values formatted for the page."""
    totals: dict[str, float] = {}
    for w in reports:
        totals[w.target] = totals.get(w.target, 0.0) + (w.us(w.best_cycles) or 0.0)
    rows = []
    for w in reports:
        counts = w.counts()
        best_us, default_us = w.us(w.best_cycles), w.us(w.default_cycles)
        share = best_us / totals[w.target] if best_us and totals[w.target] else None
        rows.append({
            "id": w.id, "workload": w.describe, "key": w.info.key[:12], "target": w.target,
            "flop": f"{w.flops:,}",
            "default_us": _f(default_us, ".2f"), "best_us": _f(best_us, ".2f"),
            "speedup": _f(w.speedup, ".2f", "x"), "efficiency": _f(w.efficiency, ".0%"),
            "bound": "" if w.memory_bound is None else
                     ("memory" if w.memory_bound else "compute"),
            "trials": sum(counts.values()) - counts.get("invalid", 0),
            "failed": counts.get("error", 0) + counts.get("timeout", 0),
            "invalid": counts.get("invalid", 0),
            "strategies": ", ".join(w.strategies) or "-",
            "tuning_s": f"{w.tuning_seconds:.1f}", "share": _f(share, ".0%")})
    return rows


def _f(x: float | None, fmt: str, suffix: str = "") -> str:
    return "-" if x is None else f"{x:{fmt}}{suffix}"


def top_rows(w: WorkloadReport) -> list[dict]:
    best = w.best_cycles
    return [{"rank": i, "us": f"{w.us(r.cycles):.3f}",
             "vs_best": f"{(r.cycles or 0) / best:.3f}" if best else "-",
             "schedule": r.schedule.to_json(), "source": r.source,
             "run": r.run_id if r.run_id is not None else "-"}
            for i, r in enumerate(w.top, 1)]


def failures(w: WorkloadReport, limit: int = 5) -> list[tuple[str, int]]:
    """The most common reasons trials failed or were invalid, with counts."""
    counts: dict[str, int] = {}
    for t in w.trials:
        if t.status != "ok":
            reason = f"{t.status}: {(t.error or 'no reason given')[:200]}"
            counts[reason] = counts.get(reason, 0) + 1
    return sorted(counts.items(), key=lambda kv: -kv[1])[:limit]


def target_roofs(reports: Sequence[WorkloadReport]) -> tuple[dict, dict]:
    """Per target name: cube peak FLOP/s (fp16) and DRAM bytes/s."""
    from pypto.targets import load_target

    peaks, bws = {}, {}
    for name in sorted({w.target for w in reports}):
        t: Target = load_target(name)
        fm, fk, fn = t.fractal("float16")
        peaks[name] = 2.0 * t.cube_cores * fm * fk * fn / t.fractal_passes("float16") \
            * t.clock_ghz * 1e9
        bws[name] = t.gm_bytes_per_cycle_chip * t.clock_ghz * 1e9
    return peaks, bws


def render_report(reports: Sequence[WorkloadReport], *, source: str = "") -> str:
    from pypto.report.tuning_figures import roofline_figure, workload_figure

    peaks, bws = target_roofs(reports)
    sections = [{"w": w, "row": row, "figure": workload_figure(w), "top": top_rows(w),
                 "failures": failures(w)}
                for w, row in zip(reports, summary_rows(reports))]
    return environment().get_template("tuning_report.html").render(
        source=source, generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        rows=[s["row"] for s in sections], sections=sections,
        roofline=roofline_figure(reports, peaks, bws) if reports else None,
        plotly_js=plotly_js())


def write_report(store: ScheduleStore, path: str | Path, *, target: str | None = None,
                 workloads: Sequence[str] = (), simulate: bool = True) -> Path:
    """Write the tuning report of ``store`` to ``path`` and return the path."""
    from pypto.db.location import display_url

    path = Path(path)
    reports = collect(store, target=target, workloads=workloads, simulate=simulate)
    html = render_report(reports, source=display_url(store.url))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html, encoding="utf-8")
    return path
