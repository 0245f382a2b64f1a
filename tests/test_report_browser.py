"""Both HTML pages in a real browser: headless Debian Chromium over the DevTools
protocol (tests/browser.py). Skipped when /usr/bin/chromium is absent; .ci/run installs
it, so CI runs them."""

from __future__ import annotations

import re

import numpy as np
import pytest
import report_data
from browser import Browser, chromium_available
from test_tuning_report import EVIL, evil_workload

import pypto
from pypto.db import Record, TargetInfo, open_store
from pypto.report.tuning_html import write_report
from pypto.targets import load_target

pytestmark = pytest.mark.skipif(not chromium_available(),
                                reason="needs Debian's chromium at /usr/bin/chromium "
                                       "(apt-get install chromium; .ci/run installs it)")

DONE = "window.pyptoDoneAt !== undefined"


@pytest.fixture(scope="module")
def browser():
    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def report_page(browser, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("browser")
    store = open_store(f"sqlite:///{tmp / 'r.db'}")
    report_data.fill(store, 2, 30)
    target = load_target("ascend910b")
    info = evil_workload()
    good = store.records(status="ok", limit=1)[0]
    store.add_records([Record(info.key, target.key, good.schedule, cycles=4000,
                              target_name=target.name)],
                      workloads=[info], targets=[TargetInfo.of(target)])
    path = write_report(store, tmp / "report.html")
    page = browser.open(path, wait_for=DONE)
    yield page
    page.ws.close()


def external(page) -> list[str]:
    return [u for u in page.requests if u != page.url and not u.startswith("data:")]


def test_report_loads_without_console_errors_or_requests(report_page):
    assert report_page.errors == []
    assert external(report_page) == []
    assert report_page.requests[0] == report_page.url


def test_report_plots_render_with_data(report_page):
    figures = report_page.eval("window.pyptoFigures")
    assert figures == 1 + 3  # the roofline and one per workload
    assert 1 <= report_page.eval("window.pyptoRendered")  # the first screen's, at load
    report_page.eval("window.pyptoRenderAll()")
    assert report_page.eval("window.pyptoRendered") == figures
    # Plotly draws SVG: one main-svg per figure at least, with markers and lines in it
    assert report_page.eval("document.querySelectorAll('.js-plotly-plot svg.main-svg')"
                            ".length") >= figures
    points = report_page.eval("document.querySelectorAll('#fig-1 .scatterlayer .point')"
                              ".length")
    assert points >= 20  # the dots of the first workload's trials
    assert report_page.eval("document.querySelectorAll('#fig-1 .heatmaplayer image, "
                            "#fig-1 .hm image').length") >= 1


def test_report_draws_a_figure_when_it_is_scrolled_into_view(browser, report_page):
    """Figures far below the first screen are drawn when the page is scrolled to them
    (IntersectionObserver), not at load."""
    from pathlib import Path
    from urllib.parse import unquote, urlparse

    page = browser.open(Path(unquote(urlparse(report_page.url).path)), wait_for=DONE)
    try:
        drawn = page.eval("window.pyptoRendered")
        last = f"fig-{page.eval('window.pyptoFigures') - 1}"
        assert drawn < page.eval("window.pyptoFigures")
        assert page.eval(f"document.querySelectorAll('#{last} svg.main-svg').length") == 0
        page.eval(f"document.getElementById('{last}').scrollIntoView()")
        page.eval(f"new Promise(done => {{ const t = setInterval(() => {{ if (document."
                  f"querySelectorAll('#{last} .scatterlayer .point').length) {{ "
                  f"clearInterval(t); done(); }} }}, 50); }})", timeout=60)
        assert page.eval("window.pyptoRendered") > drawn
        assert page.errors == []
    finally:
        page.ws.close()


def test_report_summary_has_a_row_per_workload(report_page):
    rows = report_page.eval("[...document.querySelectorAll('#summary tbody tr')]"
                            ".map(r => r.cells[0].innerText)")
    assert len(rows) == 3
    assert sum("matmul matmul (float16" in r for r in rows) == 2


def test_a_workload_named_like_a_script_stays_text(report_page):
    assert EVIL in report_page.eval("document.getElementById('summary').innerText")
    assert report_page.eval("document.querySelectorAll('script').length") == 3
    assert report_page.eval("typeof window.alert") == "function"  # never replaced
    assert report_page.errors == []


def test_screenshots_for_the_docs(report_page, profile_page, tmp_path):
    # not for docs/ here (tests must not write the tree): that the capture works at all
    shot = report_page.screenshot(tmp_path / "r.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    shot = profile_page.screenshot(tmp_path / "p.png")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


@pytest.fixture(scope="module")
def profile_page(browser, tmp_path_factory):
    a = pypto.tensor(np.random.default_rng(0).random((256, 192)), dtype="float16")
    b = pypto.ones((192, 320), dtype="float16")
    with pypto.Context(device_type="npu"), pypto.Profiler() as prof:
        c = pypto.kernel(lambda x, y: pypto.relu(pypto.matmul(x, y)))(a, b)
        softmax = pypto.kernel(lambda x: pypto.softmax(x))
        softmax(c)
        softmax(c)
    path = prof.visualize(tmp_path_factory.mktemp("profile") / "p.html")
    page = browser.open(path, wait_for=DONE)
    yield page
    page.ws.close()


def test_profile_page_loads_and_renders(profile_page):
    assert profile_page.errors == []
    assert external(profile_page) == []
    assert profile_page.eval("window.pyptoFigures") == 3 * 2  # 3 figures x 2 call groups
    profile_page.eval("window.pyptoRenderAll()")
    assert profile_page.eval("window.pyptoRendered") == profile_page.eval("window.pyptoFigures")
    assert profile_page.errors == []
    # the timeline: a heatmap per busy (core, pipe) row, a legend entry per pipe
    legend = profile_page.eval("[...document.querySelectorAll('#timeline-1 .legendtext')]"
                               ".map(e => e.textContent)")
    assert {"MTE2", "CUBE"} <= set(legend)
    rows = profile_page.eval("[...document.querySelectorAll('#calls tbody tr')]"
                             ".map(r => [...r.cells].map(c => c.innerText))")
    assert [r[1] for r in rows] == ["1", "2"]  # the two identical softmax calls grouped
    assert all(re.fullmatch(r"\d+% / \d+%", r[-1]) for r in rows)  # compute / copy
    assert float(rows[1][6]) == pytest.approx(2 * float(rows[1][5]), abs=0.011)
    assert profile_page.eval("document.querySelectorAll('.js-plotly-plot svg.main-svg')"
                             ".length") >= 2


def test_tune_with_report_from_the_command_line_renders(browser, tmp_path):
    """Issue 14's acceptance as a user runs it: `pypto tune examples/gemm.py --trials N
    --report r.html` on a fresh database, then the page in the browser."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "r.html"
    done = subprocess.run([sys.executable, "-m", "pypto.cli", "tune",
                           str(root / "examples" / "gemm.py"), "--trials", "12", "--seed", "0",
                           "--db", f"sqlite:///{tmp_path / 'fresh.db'}", "--report", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=900, check=False)
    assert done.returncode == 0, done.stderr
    assert f"tuning report: {out}" in done.stdout
    page = browser.open(out, wait_for=DONE)
    try:
        assert page.errors == [] and external(page) == []
        rows = page.eval("[...document.querySelectorAll('#summary tbody tr')].length")
        assert rows == 1
        page.eval("window.pyptoRenderAll()")
        assert page.eval("document.querySelectorAll('#fig-1 .scatterlayer .point').length") >= 12
        # the default strategy (model) scored its proposals: predicted vs measured
        assert page.eval("document.querySelectorAll('#fig-1 .subplot.x5y5 .point').length") \
            == 12
    finally:
        page.ws.close()
