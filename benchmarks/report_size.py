"""How big the tuning report gets and how fast a browser renders it (issue 14).

Builds a SQLite database of W matmul workloads x T records each through the store API
(``tests/report_data.py``: schedules sampled from each workload's space, made-up cycles,
two runs of different strategies per workload, 5% failed or invalid), writes the report
with ``pypto.report.tuning_html.write_report`` (which simulates each workload's default
and best schedule) and opens it in headless Debian Chromium over the DevTools protocol
(``tests/browser.py``). Render times, the median of 3 loads, by the page's own
``performance.now()`` from navigation start: the first paint of text (the summary table;
Plotly's script comes last in the page), the first screen (``window.pyptoDoneAt``:
figures render as they come near the viewport) and every figure
(``window.pyptoRenderAll()``). For scale, the same for a page of the inlined Plotly
bundle (the cartesian one) and one 3-point plot (the floor any such page pays here), and
for a page of Plotly's full bundle (what the pages inlined before), with the load
average, since the machine is shared.

Targets (issue 14): 50 workloads x 500 trials under 10 MB, rendered in under 5 s.
Prints a table; writes benchmarks/results/report_size.json.
Run: python benchmarks/report_size.py [--workloads 50] [--trials 500]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import report_data  # noqa: E402
from browser import Browser, chromium_available  # noqa: E402

from pypto.db import open_store  # noqa: E402
from pypto.report.tuning_html import write_report  # noqa: E402

#: when the browser first drew text (the summary table: Plotly comes last in the page)
FIRST_PAINT = "performance.getEntriesByName('first-contentful-paint')[0].startTime"


def baseline_page(js: str) -> str:
    """Plotly's bundle ``js`` and one tiny plot: what every Plotly page costs at least."""
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><script>" + js
            + "</script></head><body><div id='a'></div><script>Plotly.newPlot('a', "
            "[{y: [1, 2, 3]}]).then(() => { window.pyptoDoneAt = performance.now(); });"
            "</script></body></html>")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", type=int, default=50)
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--loads", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = pathlib.Path(tmp) / "bench.db"
        store = open_store(f"sqlite:///{db}")
        t0 = time.perf_counter()
        report_data.fill(store, args.workloads, args.trials)
        fill_s = time.perf_counter() - t0
        records = store.stats().records
        t0 = time.perf_counter()
        path = write_report(store, pathlib.Path(tmp) / "report.html")
        write_s = time.perf_counter() - t0
        size = path.stat().st_size
        from plotly.offline import get_plotlyjs

        from pypto.report.tuning_html import plotly_js

        base = pathlib.Path(tmp) / "plotly_only.html"
        base.write_text(baseline_page(plotly_js()))
        full = pathlib.Path(tmp) / "plotly_full_only.html"
        full.write_text(baseline_page(get_plotlyjs()))
        render_ms: list[float] = []
        all_ms: list[float] = []
        base_ms: list[float] = []
        full_ms: list[float] = []
        paint_ms: list[float] = []
        errors: list[str] = []
        requests: list[str] = []
        if chromium_available():
            with Browser() as b:
                for _ in range(args.loads):
                    page = b.open(base, wait_for="window.pyptoDoneAt !== undefined",
                                  timeout=120)
                    base_ms.append(page.eval("window.pyptoDoneAt"))
                    page.ws.close()
                    page = b.open(full, wait_for="window.pyptoDoneAt !== undefined",
                                  timeout=120)
                    full_ms.append(page.eval("window.pyptoDoneAt"))
                    page.ws.close()
                    page = b.open(path, wait_for="window.pyptoDoneAt !== undefined",
                                  timeout=120)
                    render_ms.append(page.eval("window.pyptoDoneAt"))
                    paint_ms.append(page.eval(FIRST_PAINT))
                    all_ms.append(page.eval("window.pyptoRenderAll()", timeout=300))
                    errors += page.errors
                    requests += [u for u in page.requests
                                 if u != page.url and not u.startswith("data:")]
                    page.ws.close()
    result = {
        "workloads": args.workloads, "trials_per_workload": args.trials,
        "records": records, "fill_s": round(fill_s, 1), "write_report_s": round(write_s, 1),
        "html_bytes": size, "html_mb": round(size / 1e6, 2),
        "render_ms_median": round(statistics.median(render_ms), 0) if render_ms else None,
        "render_ms": [round(x) for x in render_ms],
        "first_paint_ms_median": round(statistics.median(paint_ms), 0) if paint_ms else None,
        "render_all_ms_median": round(statistics.median(all_ms), 0) if all_ms else None,
        "plotly_only_ms_median": round(statistics.median(base_ms), 0) if base_ms else None,
        "plotly_full_only_ms_median": round(statistics.median(full_ms), 0) if full_ms else None,
        "plotly_bytes": len(plotly_js()), "plotly_full_bytes": len(get_plotlyjs()),
        "console_errors": errors,
        "network_requests": requests, "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0], "python": platform.python_version(),
    }
    rows = [("records", records), ("write_report s", result["write_report_s"]),
            ("HTML MB", result["html_mb"]),
            ("first paint ms", result["first_paint_ms_median"]),
            ("first screen ms", result["render_ms_median"]),
            ("all figures ms", result["render_all_ms_median"]),
            ("Plotly-only page ms", result["plotly_only_ms_median"]),
            ("full-Plotly page ms", result["plotly_full_only_ms_median"]),
            ("load average", round(result["load_average"], 1)),
            ("console errors", len(errors)), ("network requests", len(requests))]
    for name, value in rows:
        print(f"{name:<20} {value}")
    out = ROOT / "benchmarks" / "results" / "report_size.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
