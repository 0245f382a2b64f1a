"""Cost-model quality, leave one workload out (issue 13 item 7, DESIGN §8).

For every suite workload, a model of its op family is trained on the measured schedules
of the *other* suite workloads of that family, then ranks the held-out workload's
measured schedules: Spearman (scores vs speed) and TenSet's top-1 / top-5 score (the
best measured cycles over the best among the model's top 1 / top 5). Objectives
compared: ``rank:pairwise``, ``rank:ndcg``, ``reg:squarederror``, and the analytic prior
alone (no training); each trained objective under every ``--prior-margins`` weight of
log(prior) as the trees' base margin (0: trees alone). The dataset comes from
``cost_model_data.py`` (built if missing).

    python benchmarks/cost_model_eval.py [--dataset PATH] [--objectives ...] [--rounds 300]
        [--prior-margins 0 1]

Prints a table per objective; writes benchmarks/results/cost_model_eval.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost_model_data  # noqa: E402

from pypto.cost_model.features import FEATURE_VERSION, featurize  # noqa: E402
from pypto.cost_model.metrics import spearman, top_k_score  # noqa: E402
from pypto.cost_model.model import DEFAULT_PRIOR_MARGIN, CostModel  # noqa: E402
from pypto.ir.workload import workload_from_json  # noqa: E402
from pypto.schedule_space import Schedule, space_for  # noqa: E402
from pypto.targets import load_target  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "cost_model_eval.json"
OBJECTIVES = ("rank:pairwise", "rank:ndcg", "reg:squarederror", "prior")


def featurized(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per workload: family, features and cycles of its measured schedules."""
    target = load_target(data["target"])
    out = {}
    for name, entry in data["workloads"].items():
        wl = workload_from_json(entry["workload"])
        schedules = [Schedule.from_json(s) for s, _ in entry["points"]]
        cycles = np.array([c for _, c in entry["points"]], dtype=np.float64)
        t0 = time.perf_counter()
        x = featurize(wl, schedules, target, space_for(wl, target))
        out[name] = {"family": entry["family"], "x": x, "cycles": cycles,
                     "featurize_s": time.perf_counter() - t0}
    return out


def evaluate(sets: dict[str, dict[str, Any]], objective: str, rounds: int,
             seed: int, prior_margin: float = DEFAULT_PRIOR_MARGIN) -> list[dict[str, Any]]:
    rows = []
    for name, held in sets.items():
        train = [(s["x"], s["cycles"]) for n, s in sets.items()
                 if n != name and s["family"] == held["family"] and len(s["cycles"]) >= 2]
        model = CostModel(held["family"], objective=objective if objective != "prior"
                          else "rank:pairwise", seed=seed, rounds=rounds,
                          prior_margin=prior_margin)
        t0 = time.perf_counter()
        if objective != "prior" and train:
            model.fit(train)
        fit_s = time.perf_counter() - t0
        scores = model.predict(held["x"])
        rows.append({"workload": name, "family": held["family"], "points": len(held["cycles"]),
                     "train_workloads": len(train) if objective != "prior" else 0,
                     "spearman": spearman(scores, held["cycles"]),
                     "top1": top_k_score(scores, held["cycles"], 1),
                     "top5": top_k_score(scores, held["cycles"], 5), "fit_s": fit_s})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    top1 = [r["top1"] for r in rows]
    return {"mean_top1": statistics.fmean(top1), "median_top1": statistics.median(top1),
            "min_top1": min(top1), "top1_ge_0.90": sum(t >= 0.90 for t in top1),
            "mean_top5": statistics.fmean(r["top5"] for r in rows),
            "mean_spearman": statistics.fmean(r["spearman"] for r in rows),
            "workloads": len(rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", type=Path, default=cost_model_data.DEFAULT_PATH)
    ap.add_argument("--objectives", nargs="+", default=list(OBJECTIVES))
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prior-margins", nargs="+", type=float, default=[DEFAULT_PRIOR_MARGIN],
                    help="weights of log(prior) in the base margin to compare")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    data = (cost_model_data.load(args.dataset) if args.dataset.exists()
            else cost_model_data.build(args.dataset))
    sets = featurized(data)
    n_points = sum(len(s["cycles"]) for s in sets.values())
    feat_rate = n_points / sum(s["featurize_s"] for s in sets.values())
    print(f"dataset {args.dataset}: {len(sets)} workloads, {n_points} measured schedules; "
          f"featurize {feat_rate:,.0f} schedules/s (incl. knob extraction)")
    results: dict[str, Any] = {}
    runs = [(o, k) for o in args.objectives for k in (args.prior_margins if o != "prior"
                                                        else [0.0])]
    for objective, margin in runs:
        rows = evaluate(sets, objective, args.rounds, args.seed, margin)
        label = (objective if objective == "prior" or len(args.prior_margins) == 1
                 else f"{objective}, prior margin {margin:g}")
        results[label] = {"objective": objective, "prior_margin": margin, "rows": rows,
                          "summary": summary(rows)}
        print(f"\n== {label} (leave one workload out)")
        print(f"{'workload':28s} {'family':7s} {'points':>6s} {'spearman':>8s} {'top1':>6s} "
              f"{'top5':>6s}")
        for r in rows:
            print(f"{r['workload']:28s} {r['family']:7s} {r['points']:6d} {r['spearman']:8.3f} "
                  f"{r['top1']:6.3f} {r['top5']:6.3f}")
        s = results[label]["summary"]
        print(f"mean top-1 {s['mean_top1']:.3f} (median {s['median_top1']:.3f}, min "
              f"{s['min_top1']:.3f}, {s['top1_ge_0.90']}/{s['workloads']} >= 0.90); mean top-5 "
              f"{s['mean_top5']:.3f}; mean Spearman {s['mean_spearman']:.3f}")
    best = max((o for o in results if o != "prior"),
               key=lambda o: (results[o]["summary"]["mean_top1"],
                              results[o]["summary"]["min_top1"]), default=None)
    if best:
        print(f"\nbest by mean held-out top-1: {best}")
    out = {"benchmark": "cost_model_eval", "target": data["target"],
           "feature_version": FEATURE_VERSION, "dataset": str(args.dataset),
           "workloads": len(sets), "points": n_points, "featurize_per_s": feat_rate,
           "rounds": args.rounds, "seed": args.seed, "best_objective": best,
           "results": results,
           "machine": {"python": platform.python_version(), "platform": platform.platform()}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
