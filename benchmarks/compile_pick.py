"""The compile-time pick for a workload never tuned (issue 13 items 6-7, DESIGN §9).

For every suite workload, its own records hidden: a database holds the measured
schedules of the *other* suite workloads of its family (``cost_model_data.py``'s
dataset). The lookup chain then answers twice, through ``ScheduleResolver``:

- without a cost model: ``nearest`` (the nearest tuned shape's best, adapted);
- with the model trained on that database (``train_from_store``): ``model``.

Each pick is measured on the simulator and compared with the workload's tuned best (the
best of its own hidden records) and with its default schedule. The model step departs
from the default only by the model's calibrated margin (``pypto.cost_model.calibration``,
computed when ``train_from_store`` trains it, by cross-validation over the *other*
workloads: the held-out one never enters it); the uncalibrated pick (the best-scored
candidate, whatever its margin) is measured too, to show what the margin costs and saves.
Also timed: the model step alone (``model_pick`` with
the model loaded; wall and process CPU time, median of 5, with the load average, since
the machine may be shared), and the whole cold lookup (store, model load, pick).

    python benchmarks/compile_pick.py [--dataset PATH] [--rounds 300]

Prints a table; writes benchmarks/results/compile_pick.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost_model_data  # noqa: E402

from pypto.compile.model_pick import model_pick, scored_pool  # noqa: E402
from pypto.compile.resolver import ScheduleResolver  # noqa: E402
from pypto.db import Record, open_store  # noqa: E402
from pypto.db.cost_models import load_from_store, train_from_store  # noqa: E402
from pypto.ir.workload import workload_from_json  # noqa: E402
from pypto.schedule_space import Schedule, space_for  # noqa: E402
from pypto.targets import load_target  # noqa: E402
from pypto.tuner.measure import Measurer  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "compile_pick.json"


def fill(url: str, data: dict[str, Any], family: str, hidden: str, target: Any) -> None:
    store = open_store(url)
    for name, entry in data["workloads"].items():
        if name == hidden or entry["family"] != family:
            continue
        wl = workload_from_json(entry["workload"])
        store.add(wl, target, [Record.measured(wl, target, Schedule.from_json(s), cycles=int(c))
                               for s, c in entry["points"]])
    store.close()


def resolve(url: str, wl: Any, target: Any) -> tuple[Schedule, str, float]:
    resolver = ScheduleResolver(url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        schedule, source = resolver.resolve(wl, target)
        elapsed = time.perf_counter() - t0
    resolver.close()
    return schedule, source, elapsed


def cycles(s: Schedule, known: dict[str, int], meas: Measurer) -> int | None:
    """Measured cycles of ``s``: from the dataset when it holds them, else simulated."""
    c = known.get(s.to_json())
    if c is not None:
        return int(c)
    m = meas(s)
    return m.cycles if m.ok else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", type=Path, default=cost_model_data.DEFAULT_PATH)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--objective", default=None, help="default: the model's default")
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--names", default=None,
                    help="comma-separated suite workloads to hold out (default: all)")
    ap.add_argument("--keep", type=Path, default=None,
                    help="an earlier result file whose rows of the workloads not held out "
                         "now are kept (their families' models and picks do not depend on "
                         "the ones rerun)")
    args = ap.parse_args()
    data = (cost_model_data.load(args.dataset) if args.dataset.exists()
            else cost_model_data.build(args.dataset))
    target = load_target(data["target"])
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="pypto_pick_"))
    names = set(args.names.split(",")) if args.names else None
    earlier = json.loads(args.keep.read_text())["rows"] if args.keep is not None else []
    for name, entry in data["workloads"].items():
        if names is not None and name not in names:
            continue
        wl = workload_from_json(entry["workload"])
        family = entry["family"]
        if sum(e["family"] == family for n, e in data["workloads"].items() if n != name) == 0:
            continue
        tuned = min(c for _, c in entry["points"])
        known = {s: c for s, c in entry["points"]}
        url = f"sqlite:///{tmp / (name + '.db')}"
        fill(url, data, family, name, target)
        nearest, nearest_src, _ = resolve(url, wl, target)
        store = open_store(url)
        train_from_store(store, target, family, rounds=args.rounds, objective=args.objective)
        model = load_from_store(store, target, family)
        lat, cpu = [], []
        for _ in range(5):
            t0, c0 = time.perf_counter(), time.process_time()
            model_pick(store, wl, target, model)
            lat.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        scored = scored_pool(store, wl, target, model)
        store.close()
        assert scored is not None
        raw = scored[0][int(scored[1].argmax())]
        picked, picked_src, cold_s = resolve(url, wl, target)
        meas = Measurer(wl, target, space=space_for(wl, target))

        c_model, c_nearest = cycles(picked, known, meas), cycles(nearest, known, meas)
        c_default = cycles(space_for(wl, target).default(), known, meas)
        c_raw = cycles(raw, known, meas)
        margin = model.metrics.get("departure_margin")
        row = {"workload": name, "family": family, "tuned_best": tuned,
               "model_source": picked_src, "nearest_source": nearest_src,
               "model_cycles": c_model, "nearest_cycles": c_nearest, "default_cycles": c_default,
               "model_vs_tuned": tuned / c_model if c_model else 0.0,
               "nearest_vs_tuned": tuned / c_nearest if c_nearest else 0.0,
               "default_vs_tuned": tuned / c_default if c_default else 0.0,
               "raw_cycles": c_raw, "raw_vs_tuned": tuned / c_raw if c_raw else 0.0,
               "model_vs_default": c_default / c_model if c_model and c_default else 0.0,
               "raw_vs_default": c_default / c_raw if c_raw and c_default else 0.0,
               "departure_margin": margin, "departed": picked != space_for(wl, target).default(),
               "held_out_picks": len(model.metrics.get("held_out", [])),
               "pick_ms": 1e3 * statistics.median(lat),
               "pick_cpu_ms": 1e3 * statistics.median(cpu), "cold_lookup_ms": 1e3 * cold_s,
               "load_average": os.getloadavg()[0]}
        rows.append(row)
        print(f"{name:28s} {family:7s} model {row['model_vs_tuned']:.3f} ({picked_src}"
              f"{', departed' if row['departed'] else ''}) uncalibrated "
              f"{row['raw_vs_tuned']:.3f} nearest "
              f"{row['nearest_vs_tuned']:.3f} ({nearest_src}) default {row['default_vs_tuned']:.3f}"
              f"  pick {row['pick_ms']:.1f} ms (cpu {row['pick_cpu_ms']:.1f} ms, load "
              f"{row['load_average']:.1f})  cold lookup {row['cold_lookup_ms']:.0f} ms",
              flush=True)
    if args.keep is not None:
        rerun = {r["workload"] for r in rows}
        kept = [r for r in earlier if r["workload"] not in rerun]
        # the kept file's order, then the dataset's (which may hold only the rerun ones)
        order = list(dict.fromkeys([*(r["workload"] for r in earlier), *data["workloads"]]))
        rows = sorted([*kept, *({**r, "rerun": True} for r in rows)],
                      key=lambda r: order.index(r["workload"]))
    keys = ("model_vs_tuned", "raw_vs_tuned", "nearest_vs_tuned", "default_vs_tuned",
            "model_vs_default", "raw_vs_default")
    med = {k: statistics.median(r[k] for r in rows)
           for k in (*keys, "pick_ms", "pick_cpu_ms", "cold_lookup_ms")}
    worst = {k: min(r[k] for r in rows) for k in keys}
    below = {k: sum(r[k] < 0.95 for r in rows) for k in ("model_vs_default", "raw_vs_default")}
    better = sum(r["model_vs_tuned"] > r["nearest_vs_tuned"] + 1e-9 for r in rows)
    worse = sum(r["model_vs_tuned"] < r["nearest_vs_tuned"] - 1e-9 for r in rows)
    print(f"\nmedian over {len(rows)} workloads: model pick / tuned best "
          f"{med['model_vs_tuned']:.3f}, nearest / tuned {med['nearest_vs_tuned']:.3f}, "
          f"default / tuned {med['default_vs_tuned']:.3f}; model better than nearest on "
          f"{better}, worse on {worse}; pick {med['pick_ms']:.1f} ms (median), max "
          f"{max(r['pick_ms'] for r in rows):.1f} ms; cpu {med['pick_cpu_ms']:.1f} ms (median), "
          f"max {max(r['pick_cpu_ms'] for r in rows):.1f} ms; cold lookup "
          f"{med['cold_lookup_ms']:.0f} ms")
    print("worst: " + ", ".join(f"{k} {v:.3f}" for k, v in worst.items()) +
          f"; below 0.95 of the default: model {below['model_vs_default']}, uncalibrated "
          f"{below['raw_vs_default']}; departed from the default on "
          f"{sum(r['departed'] for r in rows)} of {len(rows)}")
    out = {"benchmark": "compile_pick", "target": data["target"], "rounds": args.rounds,
           "dataset": str(args.dataset), "kept_from": str(args.keep or ""), "rows": rows,
           "median": med, "worst": worst,
           "below_095_of_default": below, "departed": sum(r["departed"] for r in rows),
           "model_better_than_nearest": better, "model_worse_than_nearest": worse}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
