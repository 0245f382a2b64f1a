"""What the schedule database costs the first ``lower()`` of a fresh process (issue 15).

A tuned database is made from the shipped GEMM log (``pypto db import
tuning_logs/gemm.jsonl``, 500 records). Then, alternating, fresh processes each run one
``lower()`` of the 1024^3 fp16 GEMM after ``import pypto``:

- ``tuned``: the schedule looked up in that database;
- ``explicit``: the same schedule passed as ``schedule=``, no database: the lowering
  alone.

The lookup's cold cost is the difference of the medians (target < 100 ms). Each process
also says whether SQLAlchemy was imported. Prints a table; writes
benchmarks/results/cold_lookup.json. Run: python benchmarks/cold_lookup.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

PROBE = """
import json, sys, time, warnings
import pypto
warnings.simplefilter("ignore")
explicit = json.loads(sys.argv[1]) if sys.argv[1] != "-" else None
k = pypto.kernel(lambda a, b: pypto.matmul(a, b), schedule=explicit)
specs = (pypto.spec((1024, 1024), "float16"), pypto.spec((1024, 1024), "float16"))
t0 = time.perf_counter()
c = k.lower(*specs, target="ascend910b")
t1 = time.perf_counter()
print(json.dumps({"source": c.sources[0], "seconds": t1 - t0,
                  "sqlalchemy": "sqlalchemy" in sys.modules,
                  "schedule": dict(c.schedules[0])}))
"""


def probe(env: dict[str, str], schedule: str = "-") -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, schedule], env=env, cwd=env["HOME"],
                         capture_output=True, text=True, check=True, timeout=300)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="fresh processes of each kind")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = pathlib.Path(tmp) / "tuned.db"
        env = {**os.environ, "PYPTO_DB": str(db), "HOME": tmp, "XDG_DATA_HOME": tmp}
        subprocess.run([sys.executable, "-m", "pypto.cli", "db", "import",
                        str(ROOT / "tuning_logs" / "gemm.jsonl"), "--db", str(db)],
                       env=env, check=True, capture_output=True, timeout=300)
        first = probe(env)
        assert first["source"] == "tuned", first
        schedule = json.dumps(first["schedule"])
        bare = {**env, "PYPTO_DB": str(pathlib.Path(tmp) / "absent.db")}
        tuned, explicit = [], []
        for _ in range(args.runs):
            tuned.append(probe(env))
            explicit.append(probe(bare, schedule))
    assert all(r["source"] == "tuned" for r in tuned)
    assert all(r["source"] == "explicit" for r in explicit)
    t = statistics.median(r["seconds"] for r in tuned) * 1e3
    e = statistics.median(r["seconds"] for r in explicit) * 1e3
    result = {
        "benchmark": "cold_lookup",
        "runs": args.runs,
        "first_lower_tuned_ms": t,
        "first_lower_explicit_ms": e,
        "cold_lookup_ms": t - e,
        "sqlalchemy_imported": any(r["sqlalchemy"] for r in tuned),
        "target_ms": 100,
        "load": os.getloadavg()[0],
        "machine": f"{platform.machine()} {platform.python_version()}",
    }
    print(f"first lower() in a fresh process, 1024^3 fp16 GEMM, medians of {args.runs}:")
    print(f"  schedule looked up in a tuned SQLite database  {t:8.1f} ms")
    print(f"  the same schedule given explicitly             {e:8.1f} ms")
    print(f"  cold lookup (the difference)                   {t - e:8.1f} ms "
          f"(target < 100 ms: {'met' if t - e < 100 else 'MISSED'})")
    print(f"  SQLAlchemy imported by the lookup: {result['sqlalchemy_imported']}; "
          f"load average {result['load']:.1f}")
    out = pathlib.Path(__file__).parent / "results" / "cold_lookup.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
