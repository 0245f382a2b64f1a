"""The vector default heuristic of this checkout against another one (run first with
``--label before`` on the other code), and both against the best schedule a search finds.

    PYTHONPATH=/path/to/old/checkout python benchmarks/vector_default.py --label before
    python benchmarks/vector_default.py --label after [--random 24] [--samples 60] [--seed 0]

Cases: the suite's vector workloads on ascend910b, then ``--random`` random vector
kernels (softmax, layernorm, rms_norm, gelu, add + relu, scale + shift, row sum,
x * sigmoid(x); float16 or float32; up to 2^23 elements, a third of them with fewer rows
than a target has cores) on every target. "best" is the best of ``--samples`` uniform
samples and the default, then a steepest descent over ``Space.neighbors``, and the best
of every label's run. Each label's rows are kept in benchmarks/results/vector_default.json
(``--out``); with a ``before`` and an ``after`` run there, prints per case and per target
the speedup after / before (geomean, worst) and default / best (median, worst).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import random
import statistics
import sys
import time
import warnings
from typing import Any

os.environ["PYPTO_DB"] = "sqlite://"  # defaults only
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from suite import load_cases, steepest_descent  # noqa: E402

import pypto  # noqa: E402
from pypto.schedule_space import space_for  # noqa: E402
from pypto.sim import MODEL_VERSION  # noqa: E402
from pypto.targets import available_targets  # noqa: E402
from pypto.tuner.measure import Measurer  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "results" / "vector_default.json"
MAX_ELEMENTS = 1 << 23

KERNELS: dict[str, tuple[Any, int]] = {  # name: (function, number of operands)
    "softmax": (pypto.softmax, 1),
    "layernorm": (pypto.layernorm, 1),
    "rms_norm": (pypto.rms_norm, 1),
    "gelu": (pypto.gelu, 1),
    "add_relu": (lambda a, b: pypto.relu(a + b), 2),
    "scale_shift": (lambda a, b: a * 0.5 + b, 2),
    "row_sum": (lambda a: pypto.sum(a, axis=-1), 1),
    "sigmoid_mul": (lambda a: a * pypto.sigmoid(a), 1),
}


def random_cases(rng: random.Random, count: int) -> list[tuple[str, Any, list[Any]]]:
    out = []
    for i in range(count):
        kind = rng.choice(sorted(KERNELS))
        dtype = rng.choice(["float16", "float32"])
        few_rows = i % 3 == 0  # fewer rows than cores: the columns must fill them
        rows = rng.randint(1, 24) if few_rows else \
            int(math.exp(rng.uniform(0, math.log(20000))))
        cols = int(math.exp(rng.uniform(math.log(8), math.log(30000))))
        while rows * cols > MAX_ELEMENTS:
            rows = max(1, rows // 2)
        fn, operands = KERNELS[kind]
        out.append((f"{kind} {rows}x{cols} {dtype}", fn,
                    [pypto.spec((rows, cols), dtype)] * operands))
    return out


def _vector_workload(fn: Any, specs: list[Any], target: str) -> tuple[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = pypto.kernel(fn).lower(*specs, target=target)
    wl = next(w for w in compiled.workloads if w.family == "vector")
    return wl, compiled.target


def measure(wl: Any, target: Any, samples: int, rng: random.Random) -> dict[str, Any]:
    """The default's cycles and the best a sample plus a descent finds."""
    space = space_for(wl, target)
    measurer = Measurer(wl, target, space)
    cache: dict[str, float] = {}

    def cycles(s: Any) -> float:
        if s.key not in cache:
            m = measurer(s)
            cache[s.key] = float(m.cycles) if m.ok and m.cycles else math.inf
        return cache[s.key]

    default = space.default()
    pool = [default, *(space.sample(rng) for _ in range(samples))]
    start = min(pool, key=lambda s: (cycles(s), s.key))
    best, best_cycles = steepest_descent(cycles, space, start, max_steps=30)
    return {"default_cycles": cycles(default), "best_cycles": best_cycles,
            "default_schedule": dict(default), "best_schedule": dict(best),
            "measured": len(cache)}


def compare(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, Any]:
    """Per target: speedup after / before and default / best (the best of both runs)."""
    old = {(r["target"], r["case"]): r for r in before}
    rows = []
    print(f"{'target':<11}{'case':<34}{'before':>10}{'after':>10}{'best':>10}"
          f"{'speedup':>9}{'bef/best':>9}{'aft/best':>9}")
    for r in after:
        o = old.get((r["target"], r["case"]))
        if o is None:
            continue
        best = min(r["best_cycles"], o["best_cycles"])
        row = {"target": r["target"], "case": r["case"], "before": o["default_cycles"],
               "after": r["default_cycles"], "best": best,
               "speedup": o["default_cycles"] / r["default_cycles"],
               "before_vs_best": best / o["default_cycles"],
               "after_vs_best": best / r["default_cycles"]}
        rows.append(row)
        print(f"{row['target']:<11}{row['case']:<34}{row['before']:>10.0f}{row['after']:>10.0f}"
              f"{best:>10.0f}{row['speedup']:>9.3f}{row['before_vs_best']:>9.3f}"
              f"{row['after_vs_best']:>9.3f}")
    summary = {}
    for target in sorted({r["target"] for r in rows}):
        rs = [r for r in rows if r["target"] == target]
        s = summary[target] = {
            "cases": len(rs),
            "geomean_speedup": math.exp(statistics.fmean(math.log(r["speedup"]) for r in rs)),
            "worst_speedup": min(r["speedup"] for r in rs),
            "worst_speedup_case": min(rs, key=lambda r: r["speedup"])["case"],
            "before_vs_best_median": statistics.median(r["before_vs_best"] for r in rs),
            "after_vs_best_median": statistics.median(r["after_vs_best"] for r in rs),
            "before_vs_best_worst": min(r["before_vs_best"] for r in rs),
            "after_vs_best_worst": min(r["after_vs_best"] for r in rs),
            "after_worst_case": min(rs, key=lambda r: r["after_vs_best"])["case"],
        }
        print(f"{target}: {s['cases']} cases, speedup geomean {s['geomean_speedup']:.3f} "
              f"(worst {s['worst_speedup']:.3f}, {s['worst_speedup_case']}); default/best "
              f"median {s['before_vs_best_median']:.3f} -> {s['after_vs_best_median']:.3f}, "
              f"worst {s['before_vs_best_worst']:.3f} -> {s['after_vs_best_worst']:.3f} "
              f"({s['after_worst_case']})")
    return {"summary": summary, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="the name of this run: before, after")
    parser.add_argument("--random", type=int, default=24, help="random kernels per target")
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    jobs: list[tuple[str, str, Any, Any]] = []  # (target, case, workload, Target)
    for case in load_cases(ops={"softmax", "layernorm", "elementwise"}):
        jobs.append((case.compiled.target.name, case.name, case.workload, case.compiled.target))
    kernels = random_cases(rng, args.random)
    for target in available_targets():
        for name, fn, specs in kernels:
            wl, tgt = _vector_workload(fn, specs, target)
            jobs.append((target, name, wl, tgt))
    rows = []
    for target, name, wl, tgt in jobs:
        t0 = time.perf_counter()
        rows.append({"target": target, "case": name,
                     **measure(wl, tgt, args.samples, random.Random(f"{args.seed} {name}"))})
        r = rows[-1]
        print(f"{args.label}: {target:<11}{name:<34}{r['default_cycles']:>10.0f}"
              f"{r['best_cycles']:>10.0f}  {r['default_schedule']}  "
              f"{time.perf_counter() - t0:.1f}s", flush=True)
    print(f"pypto from {pathlib.Path(pypto.__file__).parent}")
    data = json.loads(args.out.read_text()) if args.out.exists() else {}
    runs = data.get("runs", {})
    runs[args.label] = {"model_version": MODEL_VERSION, "seed": args.seed,
                        "samples": args.samples, "load_average": os.getloadavg()[0],
                        "rows": rows}
    result = {"benchmark": "vector_default", "runs": runs}
    if "before" in runs and "after" in runs:
        result["comparison"] = compare(runs["before"]["rows"], runs["after"]["rows"])
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
