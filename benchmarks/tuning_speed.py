"""Tuning speed: 500 ``tpe`` trials of a 1024^3 fp16 GEMM on ascend910b, through the same
loop as ``pypto tune`` (SQLite database in a temporary file, each trial committed).

Reports wall time, the time inside lowering and simulation (the measurement itself), and
the rest: Optuna (ask/tell, TPE), validation of proposals, database commits, Python glue.
Also how many instructions the trials' programs have (lowering and simulation scale with
it, and the space decides it), so runs over different spaces compare per instruction.
Target (issue 6): overhead outside lower + simulate <= 30% of wall, 500 trials < 60 s.

Prints a table and writes JSON to benchmarks/results/tuning_speed.json.
Run: python benchmarks/tuning_speed.py [--trials N] [--strategy S] [--seed S]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import tempfile
import time
import warnings

import pypto
from pypto.codegen import lower as lowering
from pypto.db import open_store
from pypto.tuner.loop import tune_task
from pypto.tuner.options import TuneOptions
from pypto.tuner.tasks import extract_tasks

OUT = pathlib.Path(__file__).parent / "results" / "tuning_speed.json"


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=500)
    ap.add_argument("--strategy", default="tpe")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", type=int, default=1024)
    args = ap.parse_args()

    n = args.size
    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = k.lower(pypto.spec((n, n), "float16"), pypto.spec((n, n), "float16"))
    (task,) = extract_tasks([c])
    counting = CountingLower()
    lowering.lower = counting  # type: ignore[assignment]
    with tempfile.TemporaryDirectory() as tmp:
        store = TimedStore(open_store(f"sqlite:///{os.path.join(tmp, 'bench.db')}"))
        t0 = time.perf_counter()
        res = tune_task(task, store,  # type: ignore[arg-type]
                        TuneOptions(args.strategy, args.trials, seed=args.seed))
        wall = time.perf_counter() - t0
        store.close()
    lowering.lower = counting.lower
    per_instruction = res.lower_s / max(counting.instructions, 1) * 1e6
    overhead = wall - res.measure_s
    other = overhead - store.write_s
    rows = [
        ("trials measured", f"{res.trials_run}"),
        ("infeasible proposals rejected", f"{res.rejected}"),
        ("duplicate proposals skipped", f"{res.duplicates}"),
        ("wall time", f"{wall:.1f} s"),
        ("trials/s", f"{res.trials_run / wall:.1f}"),
        ("instructions lowered", f"{counting.instructions:,} in {counting.programs} programs"),
        ("lowering", f"{res.lower_s:.1f} s ({res.lower_s / wall:.0%}), "
                     f"{per_instruction:.2f} us per instruction"),
        ("simulation", f"{res.simulate_s:.1f} s ({res.simulate_s / wall:.0%})"),
        ("outside lower+simulate", f"{overhead:.1f} s ({overhead / wall:.0%})"),
        ("  database writes", f"{store.write_s:.1f} s ({store.write_s / wall:.0%})"),
        ("  Optuna + validation + glue", f"{other:.1f} s ({other / wall:.0%})"),
        ("default -> best", f"{task.us(res.default_cycles or 0):.2f} us -> "
                            f"{task.us(res.best_cycles or 0):.2f} us "
                            f"(x{res.speedup or 0:.2f})"),
        ("target: overhead <= 30%", "met" if overhead / wall <= 0.30 else "MISSED"),
        (f"target: {args.trials} trials < 60 s", "met" if wall < 60 else "MISSED"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{args.strategy} tuning of a {n}^3 fp16 GEMM on {task.target.name}, "
          f"{args.trials} trials, seed {args.seed}")
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({
        "benchmark": "tuning_speed", "strategy": args.strategy, "trials": res.trials_run,
        "gemm": [n, n, n], "target": task.target.name, "seed": args.seed,
        "wall_s": round(wall, 3), "lower_s": round(res.lower_s, 3),
        "simulate_s": round(res.simulate_s, 3), "overhead_s": round(overhead, 3),
        "instructions": counting.instructions, "programs": counting.programs,
        "lower_us_per_instruction": round(per_instruction, 3),
        "overhead_share": round(overhead / wall, 4), "db_write_s": round(store.write_s, 3),
        "optuna_and_glue_s": round(other, 3), "rejected": res.rejected,
        "duplicates": res.duplicates, "default_cycles": res.default_cycles,
        "best_cycles": res.best_cycles, "trials_per_s": round(res.trials_run / wall, 2),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "platform": platform.platform()},
        "pypto": pypto.__version__,
    }, indent=2) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
