"""How close is the untuned default schedule to the best one a local search finds?

For the suite's GEMMs and convs (``benchmarks/suite.py``), on one target: the default
schedule's time against the best of a steepest descent over ``Space.neighbors`` started
from the default and from the best of a random sample. The default is what every untuned
compile gets, so it should sit near the best (issue 12: best/default median >= 0.95, worst >= 0.90).

    python benchmarks/default_quality.py [--samples 64] [--target ascend910b] [--quick]
        [--names square_1024,resnet50_res2_3x3]

Prints a table and writes benchmarks/results/default_quality.json.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from suite import load_cases, steepest_descent  # noqa: E402

from pypto.schedule_space import space_for  # noqa: E402
from pypto.sim import MODEL_VERSION  # noqa: E402

QUICK = {"square_1024", "bert_qkv_s128", "bert_ffn2_s512", "llama7b_decode_b16",
         "resnet50_res2_3x3", "resnet50_res4_3x3"}


class Evaluator:
    """Cycles of a case's workload under a schedule, each schedule measured once."""

    def __init__(self, case: Any) -> None:
        self.case, self.cache = case, {}
        self.space = space_for(case.workload, case.compiled.target)

    def __call__(self, schedule: Any) -> int:
        hit = self.cache.get(schedule.key)
        if hit is None:
            compiled = self.case.compiled.with_schedule(self.case.index, schedule)
            hit = self.cache[schedule.key] = compiled.simulate_each()[self.case.index].cycles
        return hit

    def descend(self, start: Any, max_steps: int = 60) -> tuple[Any, int]:
        """Steepest descent: move to the best neighbour while it improves."""
        return steepest_descent(self, self.space, start, max_steps)


def measure(case: Any, samples: int, seed: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    ev = Evaluator(case)
    default = case.compiled.schedules[case.index]
    default_cycles = ev(default)
    rng = random.Random(seed)
    sampled = [ev.space.sample(rng) for _ in range(samples)]
    start = min(sampled, key=ev) if sampled else default
    results = [ev.descend(default), ev.descend(start)]
    best, best_cycles = min(results, key=lambda r: r[1])
    clock = case.compiled.target.clock_ghz * 1e3
    return {
        "name": case.name, "workload": case.workload.describe(),
        "default_us": default_cycles / clock, "best_us": best_cycles / clock,
        "quality": best_cycles / default_cycles,
        "from_default_us": results[0][1] / clock, "from_sample_us": results[1][1] / clock,
        "best_schedule": dict(best), "default_schedule": dict(default),
        "evaluations": len(ev.cache), "wall_s": time.perf_counter() - t0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", default="ascend910b")
    parser.add_argument("--quick", action="store_true", help="six workloads, 16 samples")
    parser.add_argument("--names", default="", help="comma-separated suite names")
    parser.add_argument("--output", default="default_quality.json",
                        help="file name under benchmarks/results/")
    args = parser.parse_args()
    names = set(filter(None, args.names.split(","))) or (QUICK if args.quick else None)
    samples = 16 if args.quick else args.samples
    cases = load_cases(ops={"matmul", "conv2d"}, names=names, target=args.target)
    rows = []
    print(f"{'workload':<26}{'default us':>12}{'best us':>10}{'best/default':>14}"
          f"{'evals':>7}{'s':>7}")
    for case in cases:
        row = measure(case, samples, args.seed)
        rows.append(row)
        print(f"{row['name']:<26}{row['default_us']:>12.2f}{row['best_us']:>10.2f}"
              f"{row['quality']:>14.3f}{row['evaluations']:>7}{row['wall_s']:>7.1f}",
              flush=True)
    ratios = [r["quality"] for r in rows]
    summary = {"median": statistics.median(ratios), "worst": min(ratios)}
    print(f"best/default: median {summary['median']:.3f}, worst {summary['worst']:.3f} "
          f"({len(rows)} workloads; target median >= 0.95, worst >= 0.90)")
    out = pathlib.Path(__file__).resolve().parent / "results" / args.output
    out.write_text(json.dumps({
        "benchmark": "default_quality", "target": args.target, "samples": samples,
        "seed": args.seed, "model_version": MODEL_VERSION, "summary": summary, "rows": rows,
    }, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
