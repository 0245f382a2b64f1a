"""Strategies over many seeds, in 2 processes: a quick companion of ``tuner_quality.py``
(same runs: ``tuner_quality.curve``, a fresh database each, the default as trial 1),
against the optima of earlier ``tuner_quality.py`` result files.

    python benchmarks/tuner_quality_seeds.py --strategies tpe,model --seeds 9 \
        --names resnet50_res2_3x3,bert_layernorm_s512 --out /tmp/runs.json

Prints per workload and strategy the trials to 95% of the optimum and best/optimum at
50 and 200 trials (medians over seeds), each strategy's medians over all runs and over
the workloads whose default is below 95% of the optimum (where trials to 95% measure
the search, not the default), and per workload how far each strategy's median at 200
trials is below the best strategy's.
One optimum per workload: the lowest of the files' and of every run's best. Writes the
runs as JSON.
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


def run(job: tuple[str, str, int]) -> tuple[str, str, int, list[float]]:
    import tuner_quality
    from suite import load_cases

    from pypto.tuner.tasks import extract_tasks

    name, strategy, seed = job
    case = next(iter(load_cases(names={name}, target="ascend910b")))
    task = next(t for t in extract_tasks([case.compiled])
                if t.workload.key == case.workload.key)
    best, _ = tuner_quality.curve(task, strategy, TRIALS, seed)
    return name, strategy, seed, best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strategies", default="model", help="comma-separated strategy names")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--names", required=True, help="comma-separated suite workload names")
    ap.add_argument("--optimum-from", type=pathlib.Path, action="append",
                    help="tuner_quality.py result files with the optima (repeatable; "
                         "default results/tuner_quality_hard.json)")
    ap.add_argument("--out", type=pathlib.Path, required=True)
    args = ap.parse_args()
    strategies = args.strategies.split(",")
    jobs = [(n, st, s) for n in args.names.split(",") for st in strategies
            for s in range(args.seeds)]
    with multiprocessing.Pool(2) as pool:
        results = pool.map(run, jobs, chunksize=1)
    import tuner_quality

    files = args.optimum_from or [HERE / "results" / "tuner_quality_hard.json"]
    known = tuner_quality.earlier_optima(files, "ascend910b")
    curves: dict[str, dict[str, list[tuple[int, list[float]]]]] = {}
    for name, strategy, seed, best in results:
        curves.setdefault(name, {}).setdefault(strategy, []).append((seed, best))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    optima: dict[str, float] = {}
    for name, by_strategy in curves.items():
        opt = min([known.get(name, {}).get("optimum", float("inf")),
                   *(b[-1] for rs in by_strategy.values() for _, b in rs)])
        optima[name] = opt
        runs[name] = {st: [{"seed": seed, "at_1": tuner_quality.at(best, opt, 1),
                            "to_95": tuner_quality.trials_to(best, opt, 0.95),
                            "at_50": tuner_quality.at(best, opt, 50),
                            "at_200": tuner_quality.at(best, opt, TRIALS), "curve": best}
                           for seed, best in rs] for st, rs in by_strategy.items()}
    overall = report(runs, strategies)
    args.out.write_text(json.dumps({"strategies": strategies, "seeds": args.seeds,
                                    "trials": TRIALS, "optimum_from": [str(f) for f in files],
                                    "optima": optima, "workloads": runs,
                                    "overall": overall}, indent=1) + "\n")
    print(f"wrote {args.out}")


def _medians(rs: list[dict[str, Any]]) -> dict[str, float]:
    return {"to_95": statistics.median((r["to_95"] or TRIALS + 1) for r in rs),
            "at_50": statistics.median(r["at_50"] for r in rs),
            "at_200": statistics.median(r["at_200"] for r in rs)}


def report(runs: dict[str, dict[str, list[dict[str, Any]]]],
           strategies: list[str]) -> dict[str, Any]:
    """Print the per-workload and overall medians; return the overall ones and each
    strategy's largest shortfall at 200 trials against the best strategy's median."""
    print(f"{'workload':28s} {'strategy':8s} {'to 95% (per seed)':44s} @50    @200")
    worst = {st: (0.0, "") for st in strategies}
    for name, by_strategy in runs.items():
        med = {st: _medians(rs) for st, rs in by_strategy.items()}
        top = max(m["at_200"] for m in med.values())
        for st, rs in by_strategy.items():
            seeds = str([r["to_95"] for r in rs])
            print(f"{name:28s} {st:8s} {seeds:44s} {med[st]['at_50']:.3f}  "
                  f"{med[st]['at_200']:.3f}")
            gap = top - med[st]["at_200"]
            if gap > worst[st][0]:
                worst[st] = (gap, name)
    overall: dict[str, Any] = {}
    for st in strategies:
        everything = [r for by in runs.values() for r in by.get(st, [])]
        hard = [r for r in everything if r["at_1"] < 0.95]
        overall[st] = {**_medians(everything), "runs": len(everything),
                       "hard": {**_medians(hard), "runs": len(hard)} if hard else {},
                       "worst_shortfall_at_200": worst[st][0],
                       "worst_shortfall_workload": worst[st][1]}
        o = overall[st]
        print(f"{st}: {o['runs']} runs, to 95% {o['to_95']}, @50 {o['at_50']:.3f}, "
              f"@200 {o['at_200']:.3f}; largest shortfall at 200 against the best strategy "
              f"{o['worst_shortfall_at_200']:.3f} ({o['worst_shortfall_workload'] or '-'})")
        if hard:
            h = o["hard"]
            print(f"  {h['runs']} runs with the default below 95%: to 95% {h['to_95']}, "
                  f"@50 {h['at_50']:.3f}, @200 {h['at_200']:.3f}")
    return overall


if __name__ == "__main__":
    main()
