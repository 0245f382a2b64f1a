"""What the study of records costs a tuning run per trial (issue 14, item 4).

Every ``pypto tune`` writes each record it commits to the Optuna study that Optuna's
tools open (``pypto.tuner.record_study``): one ``add_trials`` of one finished trial,
which is one journal line beside a SQLite database (plus Optuna reading back what was
appended). This measures that call alone for T records of the 1024^3 fp16 GEMM on
ascend910b (18 axes; schedules sampled from its space), in CPU time of this process (the
machine is shared: wall time there mostly measures the other jobs) and in wall time, and
compares it with the CPU time of one ``tpe`` trial of ``benchmarks/tuning_speed.py``
(given, default from its last results).

Prints a table; writes benchmarks/results/study_cost.json.
Run: python benchmarks/study_cost.py [--trials 500]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import statistics
import tempfile
import time
import warnings

import pypto
from pypto.db import Record
from pypto.tuner.record_study import RecordStudy
from pypto.tuner.tasks import extract_tasks

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "study_cost.json"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=500)
    args = ap.parse_args()
    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (task,) = extract_tasks([k.lower(pypto.spec((1024, 1024), "float16"),
                                         pypto.spec((1024, 1024), "float16"))])
    rng = random.Random(0)
    records = [Record(task.workload.key, task.target.key, task.space.sample(rng),
                      cycles=30000 + i) for i in range(args.trials)]
    cpu: list[float] = []
    wall: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        study = RecordStudy.open(f"sqlite:///{pathlib.Path(tmp) / 'cost.db'}", task)
        assert study is not None
        for r in records:
            c0, w0 = time.process_time(), time.perf_counter()
            study.add([r])
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        journal = (pathlib.Path(tmp) / "cost.db.optuna-journal").stat().st_size
    speed = ROOT / "benchmarks" / "results" / "tuning_speed.json"
    trial_ms = None
    if speed.exists():
        s = json.loads(speed.read_text())
        trial_ms = 1e3 * s["wall_s"] / s["trials"]
    result = {
        "trials": args.trials, "axes": len(task.space.axes),
        "cpu_ms_median": round(1e3 * statistics.median(cpu), 3),
        "cpu_ms_mean": round(1e3 * statistics.mean(cpu), 3),
        "wall_ms_median": round(1e3 * statistics.median(wall), 3),
        "wall_ms_mean": round(1e3 * statistics.mean(wall), 3),
        "journal_bytes_per_trial": round(journal / args.trials),
        "tuning_speed_ms_per_trial": None if trial_ms is None else round(trial_ms, 1),
        "load_average": os.getloadavg()[0], "cpus": os.cpu_count(),
    }
    for name, value in result.items():
        print(f"{name:<28} {value}")
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
