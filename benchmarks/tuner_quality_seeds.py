"""One strategy over many seeds, in 2 processes: a quick companion of ``tuner_quality.py``
(same runs: ``tuner_quality.curve``, a fresh database each, the default as trial 1),
against the optima of ``benchmarks/results/tuner_quality_hard.json``.

    python benchmarks/tuner_quality_seeds.py --strategy model --seeds 5 \
        --names resnet50_res2_3x3,bert_layernorm_s512 --out /tmp/runs.json

Prints per workload the trials to 95% of the optimum and best/optimum at 50 and 200
trials (medians over seeds), then the medians over all runs; writes the runs as JSON.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import pathlib
import statistics
import sys
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TRIALS = 200


def run(job: tuple[str, str, int]) -> tuple[str, int, list[float]]:
    import tuner_quality
    from suite import load_cases

    from pypto.tuner.tasks import extract_tasks

    name, strategy, seed = job
    case = next(iter(load_cases(names={name}, target="ascend910b")))
    task = next(t for t in extract_tasks([case.compiled])
                if t.workload.key == case.workload.key)
    best, _ = tuner_quality.curve(task, strategy, TRIALS, seed)
    return name, seed, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strategy", default="model")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--names", required=True, help="comma-separated suite workload names")
    ap.add_argument("--out", type=pathlib.Path, required=True)
    args = ap.parse_args()
    jobs = [(n, args.strategy, s) for n in args.names.split(",") for s in range(args.seeds)]
    with multiprocessing.Pool(2) as pool:
        results = pool.map(run, jobs, chunksize=1)
    import tuner_quality

    known = tuner_quality.earlier_optima([HERE / "results" / "tuner_quality_hard.json"],
                                         "ascend910b")
    runs: dict[str, list[dict[str, Any]]] = {}
    for name, seed, best in results:
        opt = min(known.get(name, {}).get("optimum", best[-1]), best[-1])
        runs.setdefault(name, []).append({
            "seed": seed, "to_95": tuner_quality.trials_to(best, opt, 0.95),
            "at_50": tuner_quality.at(best, opt, 50), "at_200": tuner_quality.at(best, opt, 200),
            "curve": best})
    everything = [r for rs in runs.values() for r in rs]
    for name, rs in runs.items():
        print(f"{name:28s} to 95%: {[r['to_95'] for r in rs]}  "
              f"@50 {statistics.median(r['at_50'] for r in rs):.3f}  "
              f"@200 {statistics.median(r['at_200'] for r in rs):.3f}")
    overall = {"to_95": statistics.median((r["to_95"] or TRIALS + 1) for r in everything),
               "at_50": statistics.median(r["at_50"] for r in everything),
               "at_200": statistics.median(r["at_200"] for r in everything)}
    print(f"all {len(everything)} runs: to 95% {overall['to_95']}, "
          f"@50 {overall['at_50']:.3f}, @200 {overall['at_200']:.3f}")
    args.out.write_text(json.dumps({"strategy": args.strategy, "seeds": args.seeds,
                                    "trials": TRIALS, "workloads": runs,
                                    "overall": overall}, indent=1) + "\n")


if __name__ == "__main__":
    main()
