"""The tuning report's data and page, without a browser (tests/test_report_browser.py
opens the pages in Chromium)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import report_data
from typer.testing import CliRunner

import pypto
from pypto.cli import app
from pypto.db import Record, TargetInfo, WorkloadInfo, open_store
from pypto.report.tuning_data import Trial, collect, importance
from pypto.report.tuning_figures import best_so_far
from pypto.report.tuning_html import render_report, summary_rows, write_report
from pypto.targets import load_target

ROOT = Path(__file__).resolve().parents[1]
EVIL = "<script>alert(1)</script>"


def evil_workload() -> WorkloadInfo:
    """A workload whose family (a free string of its spec) is markup."""
    spec = json.loads(report_data.matmul_workload(128, 128, 128).canonical_json())
    spec["family"] = EVIL
    return WorkloadInfo.from_spec(json.dumps(spec))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    db = tmp_path_factory.mktemp("report") / "r.db"
    s = open_store(f"sqlite:///{db}")
    report_data.fill(s, 3, 40, failures=0.2)
    target = load_target("ascend910b")
    info = evil_workload()
    run = s.start_run(strategy=EVIL, trials_asked=2, workload=info,
                      target=TargetInfo.of(target))
    good = s.records(workload_key=s.workloads()[0].key, status="ok", limit=1)[0]
    s.add_records([Record(info.key, target.key, good.schedule, cycles=5000, run_id=run,
                          target_name=target.name),
                   Record(info.key, target.key, good.schedule.replace(m1=64),
                          status="error", error=EVIL, run_id=run, target_name=target.name)],
                  workloads=[info], targets=[TargetInfo.of(target)])
    return s


@pytest.fixture(scope="module")
def reports(store):
    return collect(store)


def test_one_report_per_workload_with_every_record_in_run_order(store, reports):
    assert len(reports) == 4
    for w in reports:
        records = store.records(workload_key=w.info.key)
        assert len(w.trials) == len(records)
        ok = [r.cycles for r in records if r.status == "ok"]
        assert w.best_cycles == min(ok)
        for run in w.runs:
            assert [t.index for t in w.trials if t.run == run] == \
                list(range(1, 1 + sum(t.run == run for t in w.trials)))
        assert [r.cycles for r in w.top] == sorted(ok)[:10]


def test_summary_numbers_follow_from_the_records_and_the_simulations(reports):
    rows = {r["key"]: r for r in summary_rows(reports)}
    for w in reports:
        row = rows[w.info.key[:12]]
        counts = w.counts()
        assert row["trials"] == len(w.trials) - counts.get("invalid", 0)
        assert row["invalid"] == counts.get("invalid", 0)
        assert row["flop"] == f"{w.flops:,}"
        if w.default is not None:  # the synthetic matmuls: both schedules simulated
            assert row["speedup"] == f"{w.default.cycles / w.best_cycles:.2f}x"
            assert row["efficiency"] == f"{w.bound_cycles / w.best_cycles:.0%}"
            assert row["bound"] in ("compute", "memory")
            assert w.best is not None and len(w.best.timeline[0]) == 60
            assert all(0 <= x <= 1 for row_ in w.best.timeline for x in row_)
    assert sorted(r["strategies"] for r in rows.values()) == \
        sorted(["random, tpe"] * 3 + [EVIL])
    shares = [float(r["share"].rstrip("%")) for r in rows.values() if r["share"] != "-"]
    assert abs(sum(shares) - 100) <= len(shares)  # rounded percentages


def test_a_workload_whose_schedules_cannot_run_gets_a_note_not_a_crash(reports):
    evil = [w for w in reports if w.info.family == EVIL][0]
    assert evil.default is None and evil.notes


def test_importance_finds_the_knob_that_sets_the_time():
    trials = [Trial(int(1000 * 2 ** a + b), "ok", None, "run", i, None, {"a": a, "b": b})
              for i, (a, b) in enumerate((a, b) for a in range(4) for b in range(3))]
    imp = importance(trials)
    assert list(imp) == ["a", "b"] and imp["a"] > 0.99 and imp["b"] < 0.01
    assert importance(trials[:2]) == {}


def test_best_so_far_is_a_decreasing_step_line_to_the_last_trial():
    cycles = [50, 40, None, 45, 30, 35]
    trials = [Trial(c, "ok" if c else "error", None, "r", i, float(i), {})
              for i, c in enumerate(cycles, 1)]
    assert best_so_far(trials, "index") == ([1, 2, 5, 6], [50, 40, 30, 30])


def test_every_database_string_is_escaped(reports):
    page = render_report(reports)
    assert EVIL not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # three scripts: Plotly's, the figures' (JSON, which escapes '<') and the drawing
    assert len(re.findall(r"<script>", page)) == 3


def test_the_page_is_self_contained(reports):
    page = render_report(reports)
    scripts = re.findall(r"<script[^>]*src=", page)
    assert scripts == [] and "<link" not in page
    assert "default-src 'none'" in page  # a CSP forbids any request anyway
    assert page.count("* plotly.js (cartesian - minified) v") == 1   # the bundle, once


def test_the_pages_draw_only_what_the_inlined_bundle_has(reports):
    """Plotly's cartesian bundle draws a known set of trace types: every figure of both
    pages uses only those."""
    import numpy as np

    from pypto.report import profile_html
    from pypto.report.tuning_figures import roofline_figure, workload_figure
    from pypto.report.tuning_html import PLOTLY_TRACES, target_roofs

    figures = [workload_figure(w) for w in reports]
    figures.append(roofline_figure(reports, *target_roofs(reports)))
    k = pypto.kernel(lambda a: pypto.relu(a))
    with pypto.Profiler() as prof:
        k(pypto.tensor(np.ones((64, 64)), dtype="float16"))
    for group in profile_html.page_data(prof.calls)["groups"]:
        figures += group["figures"].values()
    traces = {t.get("type", "scatter") for f in figures for t in f["data"]}
    assert {"scatter", "bar", "heatmap"} <= traces <= PLOTLY_TRACES


def test_an_empty_database_gives_a_page_that_says_so(tmp_path):
    path = write_report(open_store(f"sqlite:///{tmp_path / 'none.db'}"), tmp_path / "r.html")
    assert "No tuning records" in path.read_text()


def test_report_command_filters_and_fails_clearly(store, tmp_path):
    runner = CliRunner()
    out = tmp_path / "one.html"
    key = store.workloads()[0].key
    r = runner.invoke(app, ["report", "--db", store.url, "-w", key[:10], "-o", str(out)])
    assert r.exit_code == 0, r.output
    page = out.read_text()
    assert page.count('class="workload-row"') == 1 and key[:12] in page
    r = runner.invoke(app, ["report", "--db", store.url, "--target", "nope", "-o", str(out)])
    assert r.exit_code == 1 and "targets there: ascend910b" in r.output
    r = runner.invoke(app, ["report", "--db", str(tmp_path / "missing.db")])
    assert r.exit_code == 1 and "no schedule database" in r.output


def test_pypto_report_after_pypto_tune_as_subprocesses(tmp_path):
    db = f"sqlite:///{tmp_path / 't.db'}"
    tune = subprocess.run([sys.executable, "-m", "pypto.cli", "tune",
                           str(ROOT / "examples" / "gemm.py"), "--trials", "20", "--seed", "1",
                           "--db", db], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert tune.returncode == 0, tune.stderr
    rep = subprocess.run([sys.executable, "-m", "pypto.cli", "report", "--db", db, "-o",
                          str(tmp_path / "r.html")], capture_output=True, text=True,
                         cwd=tmp_path, timeout=600)
    assert rep.returncode == 0, rep.stderr
    page = (tmp_path / "r.html").read_text()
    assert page.count('class="workload-row"') == 1
    assert "matmul matmul (float16[1024, 1024], float16[1024, 1024])" in page


def test_scored_records_get_a_predicted_vs_measured_panel(reports):
    """Records the ``model`` strategy proposed carry its score: a fifth panel plots the
    scores against the measured times, with their rank correlation; without scores, no
    such panel."""
    import dataclasses

    from pypto.report.tuning_figures import workload_figure

    w = reports[0]
    assert not any(t.get("xaxis") == "x5" for t in workload_figure(w)["data"])
    ok = [t for t in w.trials if t.status == "ok" and t.cycles]
    # scores that rank the trials exactly (higher: faster), then a model that is no help
    exact = {id(t): 1e6 / t.cycles for t in ok}
    scored = dataclasses.replace(w, trials=[dataclasses.replace(t, model_score=exact.get(id(t)))
                                            for t in w.trials])
    fig = workload_figure(scored)
    (panel,) = [t for t in fig["data"] if t.get("xaxis") == "x5"]
    assert len(panel["x"]) == len(ok) and fig["layout"]["yaxis5"]["type"] == "log"
    titles = [a["text"] for a in fig["layout"]["annotations"]]
    assert any(f"({len(ok)} trials, Spearman +1.00)" in t for t in titles)
    flat = dataclasses.replace(w, trials=[dataclasses.replace(t, model_score=1.0)
                                          for t in w.trials])
    assert any("Spearman +0.00" in a["text"]
               for a in workload_figure(flat)["layout"]["annotations"])
