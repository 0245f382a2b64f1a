"""Is the schedule landscape worth searching? Simulate random points of a workload's
schedule space and compare the best with the median and the default.

    python benchmarks/landscape.py [--samples 2000] [--size 1024]

Prints a table and writes benchmarks/results/landscape.json. Issue 4's bar: on a 1024^3
fp16 GEMM the best of 2,000 random points is at least 1.5x faster than the median.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import statistics
import time

import pypto
from pypto.schedule_space import space_for
from pypto.sim.timing import engine_name


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n = args.size
    compiled = pypto.kernel(pypto.matmul).lower(pypto.spec((n, n), "float16"),
                                                pypto.spec((n, n), "float16"))
    wl, target = compiled.workloads[0], compiled.target
    space = space_for(wl, target)
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    times: list[tuple[float, dict]] = []
    for _ in range(args.samples):
        s = space.sample(rng)
        r = compiled.with_schedule(0, s).simulate()
        times.append((r.time_us, dict(s)))
    wall = time.perf_counter() - t0
    default_us = compiled.simulate().time_us
    us = sorted(t for t, _ in times)
    best_us, best = min(times, key=lambda t: t[0])
    median = statistics.median(us)
    result = {
        "benchmark": "landscape", "workload": f"matmul {n}x{n}x{n} float16",
        "target": target.name, "samples": args.samples, "seed": args.seed,
        "engine": engine_name(), "space_size": str(space.size()),
        "best_us": best_us, "median_us": median, "p10_us": us[len(us) // 10],
        "p90_us": us[9 * len(us) // 10], "default_us": default_us,
        "median_over_best": median / best_us, "default_over_best": default_us / best_us,
        "best_schedule": best, "wall_s": wall,
    }
    print(f"{'':<22}{'us':>10}")
    for key in ("best_us", "p10_us", "median_us", "p90_us", "default_us"):
        print(f"{key:<22}{result[key]:>10.2f}")
    print(f"median / best = {result['median_over_best']:.2f}x; default / best = "
          f"{result['default_over_best']:.2f}x; {args.samples} samples in {wall:.1f} s "
          f"({engine_name()} engine)")
    print(f"best: {json.dumps(best, sort_keys=True)}")
    out = pathlib.Path(__file__).parent / "results" / "landscape.json"
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
