"""How close is the untuned default schedule to the best one a search finds?

For the suite's GEMMs and convs (``benchmarks/suite.py``), on one target: the default
schedule's time against an estimate of the optimum by ``tuner_quality.estimate_optimum``
(a uniform random sample of the space, steepest descents over ``Space.neighbors`` from
the default and the sample's best points, then kicks: random 3-5 step neighbour walks
from the incumbent, each followed by a descent; small spaces are measured whole). The
default is what every untuned compile gets, so it should sit near the optimum (issue
12: default/optimum median >= 0.95, worst >= 0.90).

    python benchmarks/default_quality.py [--samples 300] [--starts 3] [--kicks 6]
        [--target ascend910b] [--quick] [--names square_1024,resnet50_res2_3x3] [--merge]

Prints a table and writes benchmarks/results/default_quality.json (after every workload;
``--merge`` keeps the rows of workloads not measured this time, so the large GEMMs can
be measured with a smaller search: each row records its own).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from suite import SUITE, Case, load_cases  # noqa: E402
from tuner_quality import estimate_optimum  # noqa: E402

from pypto.sim import MODEL_VERSION  # noqa: E402
from pypto.tuner.tasks import extract_tasks  # noqa: E402

QUICK = {"square_1024", "bert_qkv_s128", "bert_ffn2_s512", "llama7b_decode_b16",
         "resnet50_res2_3x3", "resnet50_res4_3x3"}


def measure(case: Case, samples: int, starts: int, kicks: int, seed: int) -> dict[str, Any]:
    """The default against the optimum estimate of ``case``'s workload."""
    task = next(t for t in extract_tasks([case.compiled])
                if t.workload.key == case.workload.key)
    est = estimate_optimum(task, samples, starts=starts, kicks=kicks, seed=seed)
    clock = case.compiled.target.clock_ghz * 1e3
    return {
        "name": case.name, "workload": case.workload.describe(),
        "default_us": est["default_cycles"] / clock, "best_us": est["cycles"] / clock,
        "quality": est["cycles"] / est["default_cycles"],
        "default_cycles": est["default_cycles"], "best_cycles": est["cycles"],
        "sample_best_us": est["sample_best"] / clock,
        "descent_best_us": est["descent_best"] / clock, "exact": est["exact"],
        "search": {"samples": samples, "starts": starts, "kicks": kicks, "seed": seed},
        "best_schedule": est["schedule"], "default_schedule": dict(task.space.default()),
        "evaluations": est["measurements"], "wall_s": est["seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--starts", type=int, default=3, help="descents from the sample")
    parser.add_argument("--kicks", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", default="ascend910b")
    parser.add_argument("--quick", action="store_true",
                        help="six workloads, 64 samples, 2 kicks")
    parser.add_argument("--names", default="", help="comma-separated suite names")
    parser.add_argument("--merge", action="store_true",
                        help="keep the output file's rows of other workloads")
    parser.add_argument("--output", default="default_quality.json",
                        help="file name under benchmarks/results/")
    args = parser.parse_args()
    names = set(filter(None, args.names.split(","))) or (QUICK if args.quick else None)
    samples, kicks = (64, 2) if args.quick else (args.samples, args.kicks)
    out = pathlib.Path(__file__).resolve().parent / "results" / args.output
    cases = load_cases(ops={"matmul", "conv2d"}, names=names, target=args.target)
    order = [e["name"] for e in json.loads(SUITE.read_text())["workloads"]]
    rows: dict[str, dict[str, Any]] = {}
    print(f"{'workload':<26}{'default us':>12}{'best us':>10}{'best/default':>14}"
          f"{'evals':>7}{'s':>7}")
    for case in cases:
        row = measure(case, samples, args.starts, kicks, args.seed)
        rows[case.name] = row
        print(f"{row['name']:<26}{row['default_us']:>12.2f}{row['best_us']:>10.2f}"
              f"{row['quality']:>14.3f}{row['evaluations']:>7}{row['wall_s']:>7.1f}",
              flush=True)
        summary, count = write(out, args.target, rows, order, args.merge)
    print(f"best/default: median {summary['median']:.3f}, worst {summary['worst']:.3f} "
          f"({count} workloads; target median >= 0.95, worst >= 0.90)")
    print(f"wrote {out}")


def write(out: pathlib.Path, target: str, rows: dict[str, dict[str, Any]], order: list[str],
          merge: bool) -> tuple[dict[str, float], int]:
    """Write the result file (with ``merge``, also the rows it holds of other workloads,
    read again now: runs on different workloads can share it); return its summary
    (best/default: median, worst) and how many workloads it has."""
    if merge and out.exists():
        rows = {**{r["name"]: r for r in json.loads(out.read_text())["rows"]}, **rows}
    listed = [rows[n] for n in order if n in rows]
    ratios = [r["quality"] for r in listed]
    summary = {"median": statistics.median(ratios), "worst": min(ratios)}
    out.write_text(json.dumps({
        "benchmark": "default_quality", "target": target, "model_version": MODEL_VERSION,
        "optimum": "tuner_quality.estimate_optimum: random sample, descents, kicks",
        "summary": summary, "rows": listed,
    }, indent=1) + "\n")
    return summary, len(listed)


if __name__ == "__main__":
    main()
