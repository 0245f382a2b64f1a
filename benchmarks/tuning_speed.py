"""Tuning speed: ``tpe`` trials through the same loop as ``pypto tune`` (SQLite database
in a temporary file, each trial committed), on ascend910b, for one of two cases:

* ``gemm`` (the default): 500 trials of a 1024^3 fp16 GEMM (the matmul K loop);
* ``softmax``: a 4096x4096 fp32 softmax along the rows (the vector emitter).

Reports wall time, the time inside lowering and simulation (the measurement itself), and
the rest: Optuna (ask/tell, TPE), validation of proposals, database commits, Python glue.
Also how many instructions the trials' programs have (lowering and simulation scale with
it, and the space decides it), so runs over different spaces compare per instruction.
``--runs N`` repeats the tuning (a fresh database each time) and reports the median run
by trials/s, with every run's figure and the load average before each.
Targets: gemm (issue 6): overhead outside lower + simulate <= 30% of wall, 500 trials
< 60 s; softmax (issue 16 item 8): >= 20 trials/s.

Prints a table and writes JSON to benchmarks/results/tuning_speed.json: the gemm case's
fields at the top level, the softmax case's under ``"softmax"`` (or ``--key``; running
one case keeps what the file holds of the other).
Run: python benchmarks/tuning_speed.py [--case gemm|softmax] [--trials N] [--runs N]
     [--strategy S] [--seed S] [--size N] [--key K]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import tempfile
import time
import warnings
from typing import Any

import pypto
from pypto import native
from pypto.codegen import lower as lowering
from pypto.db import open_store
from pypto.tuner.loop import tune_task
from pypto.tuner.options import TuneOptions
from pypto.tuner.tasks import Task, extract_tasks

OUT = pathlib.Path(__file__).parent / "results" / "tuning_speed.json"
CASES = {"gemm": (500, 1024), "softmax": (200, 4096)}  # default trials and size
SOFTMAX_TARGET = 20.0  # trials/s


class TimedStore:
    """Forwards to a store, timing the writes."""

    def __init__(self, store: object) -> None:
        self._store, self.write_s = store, 0.0

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._store, name)
        if name not in ("add_records", "start_run", "update_run"):
            return attr

        def timed(*a: object, **k: object) -> object:
            t0 = time.perf_counter()
            try:
                return attr(*a, **k)  # type: ignore[operator]
            finally:
                self.write_s += time.perf_counter() - t0
        return timed


class CountingLower:
    """Stands in for ``lowering.lower`` (the tuner's measure imports it per call),
    counting the instructions of the programs it makes."""

    def __init__(self) -> None:
        self.lower, self.instructions, self.programs = lowering.lower, 0, 0

    def __call__(self, *args: object, **kwargs: object) -> object:
        program = self.lower(*args, **kwargs)  # type: ignore[arg-type]
        self.instructions += program.num_instructions
        self.programs += 1
        return program


def make_task(case: str, n: int) -> Task:
    if case == "gemm":
        k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
        specs = [pypto.spec((n, n), "float16")] * 2
    else:
        k = pypto.kernel(lambda a: pypto.softmax(a, -1))
        specs = [pypto.spec((n, n), "float32")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = k.lower(*specs)
    (task,) = extract_tasks([c])
    return task


def one_run(task: Task, args: argparse.Namespace) -> dict[str, Any]:
    """One tuning on a fresh database: the figures of the table."""
    load = os.getloadavg()[0]
    cpu0 = time.process_time()
    counting = CountingLower()
    lowering.lower = counting  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            store = TimedStore(open_store(f"sqlite:///{os.path.join(tmp, 'bench.db')}"))
            t0 = time.perf_counter()
            res = tune_task(task, store,  # type: ignore[arg-type]
                            TuneOptions(args.strategy, args.trials, seed=args.seed))
            wall = time.perf_counter() - t0
            cpu = time.process_time() - cpu0
            store.close()
    finally:
        lowering.lower = counting.lower
    overhead = wall - res.measure_s
    return {
        "trials": res.trials_run, "wall_s": round(wall, 3), "lower_s": round(res.lower_s, 3),
        "simulate_s": round(res.simulate_s, 3), "overhead_s": round(overhead, 3),
        "instructions": counting.instructions, "programs": counting.programs,
        "lower_us_per_instruction": round(res.lower_s / max(counting.instructions, 1) * 1e6, 3),
        "overhead_share": round(overhead / wall, 4), "db_write_s": round(store.write_s, 3),
        "optuna_and_glue_s": round(overhead - store.write_s, 3), "rejected": res.rejected,
        "duplicates": res.duplicates, "default_cycles": res.default_cycles,
        "best_cycles": res.best_cycles, "default_us": round(task.us(res.default_cycles or 0), 3),
        "best_us": round(task.us(res.best_cycles or 0), 3),
        "trials_per_s": round(res.trials_run / wall, 2), "cpu_s": round(cpu, 3),
        "trials_per_cpu_s": round(res.trials_run / cpu, 2), "load_average_before": load,
    }


def table(case: str, r: dict[str, Any], args: argparse.Namespace) -> list[tuple[str, str]]:
    wall = r["wall_s"]
    rows = [
        ("trials measured", f"{r['trials']}"),
        ("infeasible proposals rejected", f"{r['rejected']}"),
        ("duplicate proposals skipped", f"{r['duplicates']}"),
        ("wall time", f"{wall:.1f} s"),
        ("trials/s", f"{r['trials_per_s']:.1f} (per CPU second of this process: "
                     f"{r['trials_per_cpu_s']:.1f})"),
        ("instructions lowered", f"{r['instructions']:,} in {r['programs']} programs"),
        ("lowering", f"{r['lower_s']:.1f} s ({r['lower_s'] / wall:.0%}), "
                     f"{r['lower_us_per_instruction']:.2f} us per instruction"),
        ("simulation", f"{r['simulate_s']:.1f} s ({r['simulate_s'] / wall:.0%})"),
        ("outside lower+simulate", f"{r['overhead_s']:.1f} s ({r['overhead_share']:.0%})"),
        ("  database writes", f"{r['db_write_s']:.1f} s ({r['db_write_s'] / wall:.0%})"),
        ("  Optuna + validation + glue", f"{r['optuna_and_glue_s']:.1f} s "
                                         f"({r['optuna_and_glue_s'] / wall:.0%})"),
        ("default -> best", f"{r['default_us']:.2f} us -> {r['best_us']:.2f} us"),
    ]
    if case == "gemm":
        rows += [("target: overhead <= 30%", "met" if r["overhead_share"] <= 0.30 else "MISSED"),
                 (f"target: {args.trials} trials < 60 s", "met" if wall < 60 else "MISSED")]
    else:
        rows += [(f"target: >= {SOFTMAX_TARGET:g} trials/s",
                  "met" if r["trials_per_s"] >= SOFTMAX_TARGET else "MISSED")]
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", choices=sorted(CASES), default="gemm")
    ap.add_argument("--trials", type=int, default=None, help="default: 500 gemm, 200 softmax")
    ap.add_argument("--runs", type=int, default=1, help="tunings; the median is reported")
    ap.add_argument("--strategy", default="tpe")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", type=int, default=None, help="default: 1024 gemm, 4096 softmax")
    ap.add_argument("--key", default="softmax",
                    help="the softmax case's key in the JSON (e.g. to keep a run of other code "
                         "beside it)")
    args = ap.parse_args()
    args.trials = args.trials or CASES[args.case][0]
    n = args.size or CASES[args.case][1]

    task = make_task(args.case, n)
    runs = [one_run(task, args) for _ in range(args.runs)]
    by_speed = sorted(runs, key=lambda r: r["trials_per_s"])
    median = by_speed[(len(by_speed) - 1) // 2]
    what = f"a {n}^3 fp16 GEMM" if args.case == "gemm" else f"a {n}x{n} fp32 softmax"
    print(f"{args.strategy} tuning of {what} on {task.target.name}, {args.trials} trials, "
          f"seed {args.seed}, implementation {native.implementation()}"
          + (f"; median of {len(runs)} runs" if len(runs) > 1 else ""))
    rows = table(args.case, median, args)
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    if len(runs) > 1:
        print("  every run: " + ", ".join(
            f"{r['trials_per_s']:.1f} trials/s, {r['trials_per_cpu_s']:.1f} per CPU s (load "
            f"{r['load_average_before']:.1f})" for r in runs))
    record = {
        "benchmark": "tuning_speed", "strategy": args.strategy, "seed": args.seed,
        "target": task.target.name, "implementation": native.implementation(),
        **median, "runs": len(runs),
        "trials_per_s_runs": [r["trials_per_s"] for r in runs],
        "trials_per_s_median": round(statistics.median(r["trials_per_s"] for r in runs), 2),
        "trials_per_cpu_s_runs": [r["trials_per_cpu_s"] for r in runs],
        "load_average_runs": [r["load_average_before"] for r in runs],
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "platform": platform.platform()},
        "pypto": pypto.__version__,
    }
    saved = json.loads(OUT.read_text()) if OUT.exists() else {}
    if args.case == "gemm":
        out = {**record, "gemm": [n, n, n],
               **{k: v for k, v in saved.items() if k.startswith("softmax") or k == args.key}}
    else:
        out = {**saved, args.key: {**record, "shape": [n, n], "dtype": "float32"}}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
