"""pypto.Profiler: calls, the text report, Chrome trace export and the HTML page."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import pypto


@pytest.fixture
def profiled():
    a = pypto.tensor(np.random.default_rng(0).random((256, 192)), dtype="float16")
    b = pypto.ones((192, 320), dtype="float16")
    gemm = pypto.kernel(lambda x, y: pypto.relu(pypto.matmul(x, y)))
    softmax = pypto.kernel(lambda x: pypto.softmax(x))
    with pypto.Context(device_type="npu"):
        with pypto.Profiler() as prof:
            c = gemm(a, b)
            softmax(c)
    return prof


def test_calls_record_kernel_sources_and_result(profiled):
    assert [c.kernel for c in profiled.calls] == ["<lambda>", "<lambda>"]
    first = profiled.calls[0]
    assert first.sources == ["default"]
    assert [wl.family for wl in first.workloads] == ["matmul"]
    r = first.result
    assert r.cycles >= r.bound_cycles > 0
    assert r.trace is not None and len(r.trace) == r.instructions
    from pypto.sim.hazards import find_hazards

    program = pypto.kernel(lambda x, y: pypto.relu(pypto.matmul(x, y))).lower(
        pypto.spec((256, 192), "float16"), pypto.spec((192, 320), "float16")).programs[0]
    assert find_hazards(program, first.results[0].trace) == []


def test_report_is_a_table_with_pipes_and_bubbles(profiled):
    text = profiled.report()
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["call", "kernel", "workload", "schedule"]
    assert "matmul + relu" in text and "max + sub + exp + sum + div" in text
    assert "CUBE:" in text and "MTE2:" in text
    assert "waits" in text  # a bubble named by the pipe it waited for
    assert lines[-1].startswith("total: 2 call(s)")


def test_visualize_writes_a_self_contained_page(profiled, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = profiled.visualize()
    assert path == Path("pypto_profile.html") and path.exists()
    page = path.read_text()
    assert "Utilization" in page and "Bubbles" in page and "Timeline" in page
    assert page.count("<script>") == 3 and "<link" not in page
    assert re.search(r"<(script|img|iframe)[^>]*\bsrc=", page) is None
    assert "default-src 'none'" in page
    assert profiled.visualize(tmp_path / "sub" / "p.html").exists()


def test_profile_page_size_is_bounded_by_bins_not_instructions(profiled):
    from pypto.report.profile_html import BINS, page_data

    data = page_data(profiled.calls)
    timeline = data["groups"][0]["figures"]["timeline"]["data"]
    rows = [t for t in timeline if t["type"] == "heatmap"]
    assert rows and all(len(t["z"]) == 1 and len(t["z"][0]) == BINS for t in rows)
    r = profiled.calls[0].result
    assert len(rows) <= len(r.core_cycles) * 6 < r.instructions


def test_profile_bubbles_name_every_cause_the_text_report_lists(profiled):
    from pypto.report.profile_html import bubble_rows

    r = profiled.calls[0].result
    rows = bubble_rows(r)
    waits = {(row["pipe"], row["cause"]) for row in rows}
    for cause in r.bubbles():
        if " waits " in cause:
            pipe, src = cause.split(" waits ")
            assert (pipe, f"waits {src}") in waits
    assert sum(row["cycles"] for row in rows if row["cause"].startswith("waits")) == \
        int(r.flag_wait.sum())


def test_guide_profiler_snippets_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ctx = pypto.Context(device_type='npu', device_id=0)
    with ctx:
        A = pypto.tensor(np.random.rand(256, 256), dtype='float16')
        B = pypto.ones((256, 256), dtype='float16')

    @pypto.kernel
    def gemm(A, B):
        return pypto.matmul(A, B)

    profiler = pypto.Profiler()
    with profiler:
        C = gemm(A, B)
    print(profiler.report())
    assert C.shape == (256, 256)

    def run_your_model():
        gemm(A, B)

    with pypto.Profiler() as prof:
        run_your_model()
    prof.visualize()  # interactive performance report
    assert Path("pypto_profile.html").exists()


def test_cpu_calls_are_not_profiled():
    with pypto.Context(device_type="cpu"), pypto.Profiler() as prof:
        pypto.kernel(lambda x: x * 2.0)(pypto.ones((4, 4), dtype="float32"))
    assert prof.calls == []
    assert "No kernel ran" in prof.report()
