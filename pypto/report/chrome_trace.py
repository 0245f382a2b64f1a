"""Chrome Trace Event JSON of profiled calls: one process per core, one thread per pipe
(Perfetto and chrome://tracing open it)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pypto.codegen.isa import Op, Pipe

if TYPE_CHECKING:
    from pypto.report.profiler import ProfiledCall


def trace_events(calls: Sequence[ProfiledCall]) -> list[dict]:
    events: list[dict] = []
    cores_seen: set[int] = set()
    offset = 0.0  # microseconds: calls and workloads one after another
    for n, call in enumerate(calls):
        for i, r in enumerate(call.results):
            us_per_cycle = 1.0 / (r.clock_ghz * 1e3)
            label = f"{call.kernel}[{n}] workload {i}"
            t = r.trace
            if t is None:
                continue
            for rec in t:
                core, pipe = int(rec["core"]), int(rec["pipe"])
                cores_seen.add(core)
                events.append({
                    "name": Op(int(rec["op"])).name, "cat": label, "ph": "X",
                    "pid": core, "tid": pipe,
                    "ts": offset + int(rec["start"]) * us_per_cycle,
                    "dur": max(int(rec["end"]) - int(rec["start"]), 1) * us_per_cycle,
                    "args": {"instruction": int(rec["index"]), "workload": label},
                })
            offset += r.cycles * us_per_cycle
    for core in sorted(cores_seen):
        events.append({"name": "process_name", "ph": "M", "pid": core,
                       "args": {"name": f"core {core}"}})
        for pipe in Pipe:
            events.append({"name": "thread_name", "ph": "M", "pid": core, "tid": int(pipe),
                           "args": {"name": pipe.name}})
    return events


def write_chrome_trace(calls: Sequence[ProfiledCall], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"traceEvents": trace_events(calls),
                                "displayTimeUnit": "ns"}))
    return path
