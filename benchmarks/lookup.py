"""How fast a kernel finds its schedule in the database (DESIGN §9, issue 5).

Fills a fresh SQLite database with 10^6 records (1,000 matmul shapes x 1,000 schedules,
through ``ScheduleStore.add_records`` in batches: multi-row INSERT ... ON CONFLICT), then
times:

- warm lookup: ``lookup.choose_schedule`` with the result cached in the process;
- cold lookup: cache cleared, store open: the index seek for the best record plus
  re-validation (tuned), or the family scan plus adaptation (nearest);
- first lookup in a new process: importing SQLAlchemy, opening the database, checking
  its schema, then the cold lookup.

Targets (issue 5): warm < 50 us, cold < 5 ms. Prints a table; writes
benchmarks/results/lookup.json. Run: python benchmarks/lookup.py [--records N]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

import pypto
from pypto.compile import resolver as lookup
from pypto.db import Record, TargetInfo, WorkloadInfo, open_store
from pypto.ir.workload import Workload, workload_from_json
from pypto.schedule_space import Schedule, space_for
from pypto.sim import MODEL_VERSION
from pypto.targets import load_target

SHAPES = 1000
BATCH = 50_000
WARM_CALLS = 100_000
COLD_CALLS = 300

NEW_PROCESS = """
import sys, time, warnings
import pypto
from pypto.compile import resolver as lookup
from pypto.ir.partition import partition
from pypto.targets import load_target
warnings.simplefilter("ignore")
k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
graph, _ = k.trace(pypto.spec((1024, 1024), "float16"), pypto.spec((1024, 1024), "float16"))
wl, target = partition(graph).steps[0].workload, load_target("ascend910b")
assert "sqlalchemy" not in sys.modules
t1 = time.perf_counter()
schedule, source = lookup.choose_schedule(wl, target)
t2 = time.perf_counter()
lookup.clear_cache()
schedule, source = lookup.choose_schedule(wl, target)
t3 = time.perf_counter()
print(source, t2 - t1, t3 - t2)
"""


def matmul_workload(template: dict[str, Any], m: int, k: int, n: int) -> Workload:
    spec = json.loads(json.dumps(template))
    spec["inputs"][0]["shape"], spec["inputs"][1]["shape"] = [m, k], [k, n]
    spec["nodes"][0]["shape"], spec["nodes"][0]["attrs"]["strides"] = [m, k], [k, 1]
    spec["nodes"][1]["shape"], spec["nodes"][1]["attrs"]["strides"] = [k, n], [n, 1]
    spec["nodes"][2]["shape"], spec["attrs"]["space"] = [m, n], [m, n]
    return workload_from_json(spec)


def fill(url: str, records: int, probe: Workload, template: dict[str, Any],
         target: TargetInfo) -> dict[str, Any]:
    """``records`` records over SHAPES matmul shapes (the probe's 1024^3 among them)."""
    rng = random.Random(0)
    sizes = [16 * i for i in range(4, 257)]
    shapes = {(1024, 1024, 1024)}
    while len(shapes) < SHAPES:
        shapes.add((rng.choice(sizes), rng.choice(sizes), rng.choice(sizes)))
    infos = [WorkloadInfo.of(probe if s == (1024, 1024, 1024) else
                             matmul_workload(template, *s)) for s in sorted(shapes)]
    per = records // len(infos)
    store = open_store(url)
    t0 = time.perf_counter()
    batch: list[Record] = []
    written = 0
    version = pypto.__version__
    valid = space_for(probe, load_target(target.name))
    probe_points = [valid.sample(i) for i in range(per)]  # real points of the probe's space
    knob_sets = [Schedule(m1=16 * (1 + i % 32), n1=16 * (1 + (i // 32) % 32), k0=64,
                          k1=64 * (1 + i // 1024), l1_depth=2, l0_depth=2, l0c_depth=1,
                          ub_depth=2, cores=24, block_order="mn", swizzle=1, epilogue="VEC")
                 for i in range(per)]
    for info in infos:
        points = probe_points if info.key == probe.key else knob_sets
        for i in range(per):
            knobs = points[i]
            batch.append(Record(info.key, target.key, knobs, cycles=rng.randrange(10**4, 10**7),
                                pypto_version=version, target_name=target.name))
            if len(batch) == BATCH:
                written += store.add_records(batch, workloads=infos if not written else (),
                                             targets=[target])
                batch = []
    if batch:
        written += store.add_records(batch, workloads=infos, targets=[target])
    seconds = time.perf_counter() - t0
    store.close()
    return {"records": written, "workloads": len(infos), "seconds": seconds,
            "records_per_s": written / seconds}


def timed(fn: Any, calls: int) -> dict[str, float]:
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return {"median_us": statistics.median(times) * 1e6,
            "p99_us": times[min(len(times) - 1, int(0.99 * len(times)))] * 1e6,
            "calls": calls}


def query_plan(path: pathlib.Path) -> list[str]:
    import sqlite3

    from sqlalchemy.dialects import sqlite as sqlite_dialect

    from pypto.db.queries import BEST

    sql = str(BEST.params(wk="x", tk="y", mv="z").compile(
        dialect=sqlite_dialect.dialect(), compile_kwargs={"literal_binds": True}))
    conn = sqlite3.connect(path)
    rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}").fetchall()
    conn.close()
    return [row[-1] for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10**6)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    gemm = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    compiled = gemm.lower(pypto.spec((1024, 1024), "float16"), pypto.spec((1024, 1024), "float16"))
    probe, target = compiled.workloads[0], load_target("ascend910b")
    near = gemm.lower(pypto.spec((1000, 1024), "float16"),
                      pypto.spec((1024, 1024), "float16")).workloads[0]
    tinfo = TargetInfo.of(target)

    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "pypto.db"
        url = f"sqlite:///{path}"
        print(f"filling {path} with {args.records:,} records ...", flush=True)
        generation = fill(url, args.records, probe, probe.to_json(), tinfo)
        size_mb = sum(p.stat().st_size for p in path.parent.iterdir()) / 1e6
        plan = query_plan(path)

        lookup.reset()
        import os

        os.environ["PYPTO_DB"] = url
        store = open_store(url)
        best = store.best(probe.key, target.key, MODEL_VERSION)
        assert best is not None
        assert lookup.choose_schedule(probe, target)[1] == "tuned"
        assert lookup.choose_schedule(near, target)[1] == "nearest"

        warm = timed(lambda: lookup.choose_schedule(probe, target), WARM_CALLS)

        def cold(wl: Workload) -> None:
            lookup.clear_cache()
            lookup.choose_schedule(wl, target)

        cold_tuned = timed(lambda: cold(probe), COLD_CALLS)
        cold_nearest = timed(lambda: cold(near), COLD_CALLS // 3)
        best_query = timed(lambda: store.best(probe.key, target.key, MODEL_VERSION), COLD_CALLS)
        store.close()
        lookup.reset()

        runs = []
        for _ in range(3):
            proc = subprocess.run([sys.executable, "-c", NEW_PROCESS], capture_output=True,
                                  text=True, check=True, timeout=300,
                                  env={**os.environ, "PYPTO_DB": url})
            source, first, again = proc.stdout.split()
            assert source == "tuned", proc
            runs.append((float(first), float(again)))
        new_process = {"first_lookup_ms": statistics.median(r[0] for r in runs) * 1e3,
                       "second_cold_lookup_ms": statistics.median(r[1] for r in runs) * 1e3}

    result = {
        "benchmark": "lookup",
        "database": "SQLite (WAL), one file",
        "generation": generation,
        "database_mb": size_mb,
        "best_query_plan": plan,
        "warm_lookup": warm,
        "cold_lookup_tuned": cold_tuned,
        "cold_lookup_nearest": cold_nearest,
        "store_best_query": best_query,
        "new_process": new_process,
        "targets": {"warm_us": 50, "cold_ms": 5},
        "machine": f"{platform.machine()} {platform.python_version()}",
    }
    g = generation
    print(f"\n{g['records']:,} records over {g['workloads']:,} workloads written in "
          f"{g['seconds']:.1f} s ({g['records_per_s']:,.0f} records/s), "
          f"database {size_mb:.0f} MB")
    print("best-record query plan: " + " / ".join(plan))
    print(f"\n{'lookup':<44}{'median':>12}{'p99':>12}")
    for name, r in (("warm (cached in the process)", warm),
                    ("cold, tuned: index seek + validate", cold_tuned),
                    ("cold, nearest: family scan + adapt", cold_nearest),
                    ("store.best() alone", best_query)):
        print(f"{name:<44}{r['median_us']:>10.1f}us{r['p99_us']:>10.1f}us")
    print(f"{'new process: first lookup (import + open)':<44}"
          f"{new_process['first_lookup_ms']:>10.1f}ms")
    print(f"{'new process: cold lookup after that':<44}"
          f"{new_process['second_cold_lookup_ms']:>10.2f}ms")
    print(f"\ntargets: warm < 50 us ({'met' if warm['median_us'] < 50 else 'MISSED'}), "
          f"cold < 5 ms ({'met' if cold_tuned['median_us'] < 5000 else 'MISSED'})")
    out = pathlib.Path(__file__).parent / "results" / "lookup.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
