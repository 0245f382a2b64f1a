"""The Chrome trace Perfetto reads whole: no partly overlapping complete slices on any
track, named and sorted tracks, the launch as a slice, the span equal to the kernel time."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import pypto
from pypto.report.chrome_trace import Slice, assign_lanes, json_to_ns

ROOT = Path(__file__).resolve().parents[1]


def perfetto_overlaps(events: list[dict]) -> list[tuple[dict, dict]]:
    """Pairs of complete slices on one (pid, tid) that partly overlap, by the rule
    Perfetto's importer applies: a slice that starts inside an open one must end inside
    it. Times as Perfetto reads them: truncated to integer nanoseconds."""
    tracks: dict[tuple[int, int], list[tuple[int, int, dict]]] = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            start = json_to_ns(e["ts"])
            tracks[(e["pid"], e["tid"])].append((start, start + json_to_ns(e["dur"]), e))
    bad = []
    for slices in tracks.values():
        slices.sort(key=lambda s: (s[0], -s[1]))
        stack: list[tuple[int, int, dict]] = []
        for s in slices:
            while stack and stack[-1][1] <= s[0]:
                stack.pop()
            if stack and s[1] > stack[-1][1]:
                bad.append((stack[-1][2], s[2]))
            stack.append(s)
    return bad


def profile(fn, *args) -> pypto.Profiler:
    with pypto.Context(device_type="npu"), pypto.Profiler() as prof:
        fn(*args)
    return prof


def gemm_softmax():
    a = pypto.tensor(np.random.default_rng(0).random((256, 192)), dtype="float16")
    b = pypto.ones((192, 320), dtype="float16")
    c = pypto.kernel(lambda x, y: pypto.relu(pypto.matmul(x, y)))(a, b)
    pypto.kernel(lambda x: pypto.softmax(x))(c)


def conv():
    x = pypto.ones((1, 32, 28, 28), dtype="float16")
    w = pypto.ones((64, 32, 3, 3), dtype="float16")
    pypto.kernel(lambda x, w: pypto.conv2d(x, w, padding=1))(x, w)


def big_gemm():
    a = pypto.ones((1024, 1024), dtype="float16")
    pypto.kernel(lambda x, y: pypto.matmul(x, y))(a, a)


@pytest.fixture(scope="module", params=[gemm_softmax, conv, big_gemm])
def traced(request, tmp_path_factory):
    prof = profile(request.param)
    path = prof.export_chrome_trace(tmp_path_factory.mktemp("trace") / "t.json")
    return prof, json.loads(path.read_text())["traceEvents"]


def test_no_two_complete_slices_on_a_track_partly_overlap(traced):
    prof, events = traced
    assert perfetto_overlaps(events) == []
    instructions = [e for e in events if e["ph"] == "X" and e["pid"] > 0]
    assert len(instructions) == sum(c.result.instructions for c in prof.calls)


def test_the_trace_spans_the_reported_time_and_starts_with_the_launch(traced):
    prof, events = traced
    spans = [e for e in events if e["ph"] == "X"]
    start = min(json_to_ns(e["ts"]) for e in spans)
    end = max(json_to_ns(e["ts"]) + json_to_ns(e["dur"]) for e in spans)
    total_us = sum(c.result.time_us for c in prof.calls)
    assert start == 0 and abs((end - start) / 1000 - total_us) <= 0.001
    launches = [e for e in spans if e["name"] == "launch"]
    assert len(launches) == sum(len(c.results) for c in prof.calls)
    first = prof.calls[0].results[0]
    launch_us = (first.cycles - int(first.core_cycles.max())) / (first.clock_ghz * 1e3)
    assert launch_us > 0
    assert abs(json_to_ns(launches[0]["dur"]) / 1000 - launch_us) <= 0.001
    # no instruction runs during its workload's launch
    first_instruction = min(json_to_ns(e["ts"]) for e in spans if e["pid"] > 0)
    assert first_instruction >= json_to_ns(launches[0]["dur"])


def test_tracks_are_named_and_sorted_with_flags_apart(traced):
    _, events = traced
    meta = {(e["name"], e["pid"], e["tid"]): e["args"] for e in events if e["ph"] == "M"}
    used = {(e["pid"], e["tid"]) for e in events if e["ph"] == "X"}
    for pid, tid in used:
        assert ("thread_name", pid, tid) in meta and ("thread_sort_index", pid, tid) in meta \
            or pid == 0
        assert ("process_name", pid, 0) in meta and ("process_sort_index", pid, 0) in meta
    assert meta[("process_name", 0, 0)]["name"] == "kernel"
    assert meta[("process_name", 1, 0)]["name"] == "core 0"
    names = {meta[("thread_name", pid, tid)]["name"] for pid, tid in used if pid > 0}
    flag_ops = {e["name"] for e in events if e["ph"] == "X" and e["pid"] > 0
                and meta[("thread_name", e["pid"], e["tid"])]["name"].startswith("flags")}
    assert flag_ops <= {"SET_FLAG", "WAIT_FLAG"}
    pipe_ops = {e["name"] for e in events if e["ph"] == "X" and e["pid"] > 0
                and not meta[("thread_name", e["pid"], e["tid"])]["name"].startswith("flags")}
    assert not pipe_ops & {"SET_FLAG", "WAIT_FLAG"}
    assert any(n.startswith("MTE2") for n in names)


def test_a_counter_gives_the_dmas_in_flight(traced):
    _, events = traced
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and all(e["args"]["copies"] >= 0 for e in counters)
    assert max(e["args"]["copies"] for e in counters) >= 1
    for pid in {e["pid"] for e in counters}:
        assert [e for e in counters if e["pid"] == pid][-1]["args"]["copies"] == 0


def test_in_flight_dmas_take_extra_lanes():
    # a DMA holds its pipe shorter than it takes to complete, so a pipe's DMAs overlap
    prof = profile(big_gemm)
    t = prof.calls[0].results[0].trace
    copies = np.sort(t[(t["op"] == int(pypto.codegen.isa.Op.COPY)) & (t["core"] == 0)
                       & (t["pipe"] == int(pypto.codegen.isa.Pipe.MTE2))], order="start")
    assert (copies["start"][1:] < copies["end"][:-1]).any()  # the reason for lanes
    events = pypto.report.chrome_trace.trace_events(prof.calls)
    lanes = {e["tid"] for e in events if e["ph"] == "X" and e["pid"] == 1
             and e["tid"] // 1000 == int(pypto.codegen.isa.Pipe.MTE2)}
    assert len(lanes) >= 2


def test_assign_lanes_is_the_fewest_disjoint_lanes():
    rng = np.random.default_rng(1)
    for _ in range(50):
        starts = rng.integers(0, 100, 40)
        slices = [Slice(0, 1, "COPY", int(s), int(s + rng.integers(1, 30)), i, "w")
                  for i, s in enumerate(starts)]
        lanes = assign_lanes(slices)
        by_lane = defaultdict(list)
        for s, lane in zip(slices, lanes):
            by_lane[lane].append((s.start, s.end))
        for spans in by_lane.values():
            spans.sort()
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
        depth = max(sum(s.start <= t < s.end for s in slices) for t in range(200))
        assert max(lanes) + 1 == depth  # interval partitioning is optimal


def test_pypto_run_writes_a_whole_trace_of_the_gemm_example(tmp_path):
    out = tmp_path / "t.json"
    proc = subprocess.run([sys.executable, "-m", "pypto.cli", "run",
                           str(ROOT / "examples" / "gemm.py"), "--profile", "--trace", str(out)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    events = json.loads(out.read_text())["traceEvents"]
    assert perfetto_overlaps(events) == []
    total = [ln for ln in proc.stdout.splitlines() if ln.startswith("total:")][0]
    reported_us = float(total.split(" cycles, ")[1].split(" us")[0])
    spans = [e for e in events if e["ph"] == "X"]
    end = max(json_to_ns(e["ts"]) + json_to_ns(e["dur"]) for e in spans)
    assert abs(end / 1000 - reported_us) <= 0.01
    assert any(e["name"] == "launch" for e in spans)
