"""The default heuristic on shapes outside the suite: random GEMMs (M, N, K in [16, 6000])
and random convs on every target, the cost-estimated default (``Space.default``)
against the previous heuristic (the halving one, kept as ``shrunk_default``).

    python benchmarks/default_random.py [--gemms 30] [--convs 6] [--seed 0]

Prints one row per case (old and new cycles, speedup), the geomean speedup and the
worst case per target, and writes benchmarks/results/default_random.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import random
import time
import warnings
from typing import Any

os.environ["PYPTO_DB"] = "sqlite://"  # defaults only

import pypto  # noqa: E402
from pypto.codegen.lower import lower  # noqa: E402
from pypto.schedule_space import conv2d, matmul, space_for  # noqa: E402
from pypto.sim import MODEL_VERSION  # noqa: E402
from pypto.sim.timing import simulate  # noqa: E402
from pypto.targets import available_targets  # noqa: E402


def _workload(fn: Any, specs: list[Any], target: str, family: str) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = pypto.kernel(fn).lower(*specs, target=target)
    wl = next(w for w in compiled.workloads if w.family == family)
    return wl, compiled.target


def cases(rng: random.Random, gemms: int, convs: int) -> list[tuple[str, Any, list[Any], str]]:
    out: list[tuple[str, Any, list[Any], str]] = []
    for _ in range(gemms):
        m, n, k = (int(math.exp(rng.uniform(math.log(16), math.log(6000)))) for _ in "mnk")
        out.append((f"gemm {m}x{n}x{k}", pypto.matmul,
                    [pypto.spec((m, k), "float16"), pypto.spec((k, n), "float16")], "matmul"))
    for _ in range(convs):
        hw, c, k = rng.choice([7, 14, 28, 56]), rng.choice([32, 64, 96, 128, 256, 512]), \
            rng.choice([32, 64, 128, 256, 512])
        rs, stride = rng.choice([1, 3]), rng.choice([1, 1, 2])
        n = rng.choice([1, 2, 4])

        def fn(x: Any, w: Any, stride: int = stride, pad: int = rs // 2) -> Any:
            return pypto.conv2d(x, w, stride=stride, padding=pad)
        out.append((f"conv n{n} {hw}x{hw}x{c} -> {k} {rs}x{rs}/{stride}", fn,
                    [pypto.spec((n, hw, hw, c), "float16", layout="NHWC"),
                     pypto.spec((k, c, rs, rs), "float16")], "conv2d"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gemms", type=int, default=30)
    parser.add_argument("--convs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    picked = cases(random.Random(args.seed), args.gemms, args.convs)
    rows, summary = [], {}
    for target in available_targets():
        speedups = []
        for name, fn, specs, family in picked:
            t0 = time.perf_counter()
            wl, tgt = _workload(fn, specs, target, family)
            space = space_for(wl, tgt)
            new = space.default()
            old = (matmul if family == "matmul" else conv2d).shrunk_default(wl, tgt, space)
            assert space.validate(new) == [] and space.validate(old) == []
            new_c = simulate(lower(wl, new, tgt), tgt).cycles
            old_c = new_c if old == new else simulate(lower(wl, old, tgt), tgt).cycles
            speedups.append(old_c / new_c)
            rows.append({"target": target, "case": name, "old_cycles": int(old_c),
                         "new_cycles": int(new_c), "speedup": old_c / new_c,
                         "new_schedule": dict(new), "old_schedule": dict(old)})
            print(f"{target:<11}{name:<36}{old_c:>11}{new_c:>11}{old_c / new_c:>8.3f}"
                  f"{time.perf_counter() - t0:>7.1f}s", flush=True)
        geo = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
        worst = min(range(len(speedups)), key=speedups.__getitem__)
        summary[target] = {"geomean": geo, "worst": speedups[worst],
                           "worst_case": picked[worst][0], "cases": len(speedups)}
        print(f"{target}: geomean speedup {geo:.3f}, worst {speedups[worst]:.3f} "
              f"({picked[worst][0]})", flush=True)
    out = pathlib.Path(__file__).resolve().parent / "results" / "default_random.json"
    out.write_text(json.dumps({"benchmark": "default_random", "seed": args.seed,
                               "model_version": MODEL_VERSION, "summary": summary,
                               "rows": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
