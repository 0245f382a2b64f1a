"""The measured dataset the cost-model benchmarks train and test on (cached as JSON).

For every suite workload (``suite.load_cases``), within a time budget: the default
schedule, uniform valid samples of its space (``Space.sample``), and an iterated local
search over ``Space.neighbors`` from the best point so far, restarted from a random good
point when it stalls, so the good region of each space is in the data and the top-k
metrics mean something. Each measurement is one lower + simulate (``Measurer``) with a
time limit; points that time out are left out (they are far from the best anyway).

    python benchmarks/cost_model_data.py [--budget 30] [--out /tmp/pypto_cost_model_dataset.json]
        [--names a,b]

The file holds plain data: per workload its name, family, canonical JSON and the
measured ``(schedule JSON, cycles)`` pairs. Re-running adds only the workloads missing.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite import load_cases  # noqa: E402

from pypto.schedule_space import Schedule, space_for  # noqa: E402

DEFAULT_PATH = Path("/tmp/pypto_cost_model_dataset.json")
TARGET = "ascend910b"


def measure_workload(wl: Any, target: Any, budget_s: float, seed: int,
                     time_limit: float) -> dict[str, int]:
    """Schedule JSON -> cycles for ``wl``: default, samples, then local search."""
    from pypto.tuner.measure import Measurer

    rng = random.Random(seed)
    space = space_for(wl, target)
    measurer = Measurer(wl, target, space=space, time_limit=time_limit)
    seen: dict[str, int | None] = {}
    start = time.perf_counter()

    def run(s: Schedule) -> int | None:
        key = s.to_json()
        if key not in seen:
            m = measurer(s)
            seen[key] = m.cycles if m.ok else None
        return seen[key]

    def left() -> float:
        return budget_s - (time.perf_counter() - start)

    run(space.default())
    # a third of the budget on uniform samples (at least a few)
    n = 0
    while n < 8 or left() > budget_s * 2 / 3:
        run(space.sample(rng))
        n += 1
        if left() <= 0 or n >= 400:
            break
    # iterated local search: first-improvement hill climbing from the best
    ok = lambda: sorted((c, k) for k, c in seen.items() if c is not None)  # noqa: E731
    current = Schedule.from_json(ok()[0][1]) if ok() else space.default()
    while left() > 0:
        best_c = seen.get(current.to_json()) or run(current)
        neighbors = space.neighbors(current)
        rng.shuffle(neighbors)
        moved = False
        for nb in neighbors:
            if left() <= 0:
                break
            c = run(nb)
            if c is not None and best_c is not None and c < best_c:
                current, moved = nb, True
                break
        if not moved:  # a local optimum: restart from one of the top 5, one random step
            top = ok()[:5]
            base = Schedule.from_json(rng.choice(top)[1]) if top else space.default()
            nbs = space.neighbors(base)
            current = rng.choice(nbs) if nbs else space.sample(rng)
    return {k: c for k, c in seen.items() if c is not None}


def build(path: Path = DEFAULT_PATH, budget_s: float = 30.0, seed: int = 0,
          time_limit: float = 3.0, names: set[str] | None = None) -> dict[str, Any]:
    """Measure the suite (the workloads not in ``path`` yet) and return the dataset."""
    data: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {
        "target": TARGET, "workloads": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_cases(names=names, target=TARGET)
    for case in cases:
        if case.name in data["workloads"]:
            continue
        t0 = time.perf_counter()
        wl, target = case.workload, case.compiled.target
        points = measure_workload(wl, target, budget_s, seed, time_limit)
        best = min(points.values())
        default = points.get(space_for(wl, target).default().to_json())
        data["workloads"][case.name] = {
            "family": wl.family, "workload": wl.to_json(),
            "default_json": space_for(wl, target).default().to_json(),
            "points": sorted(([k, c] for k, c in points.items()), key=lambda kc: kc[1])}
        path.write_text(json.dumps(data))
        print(f"{case.name:28s} {len(points):5d} points  best {best:>10,}  default "
              f"{default if default is None else format(default, ','):>10}  "
              f"{time.perf_counter() - t0:5.1f} s", flush=True)
    return data


def load(path: Path = DEFAULT_PATH) -> dict[str, Any]:
    return json.loads(path.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=30.0, help="seconds per workload")
    ap.add_argument("--time-limit", type=float, default=3.0, help="seconds per measurement")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=DEFAULT_PATH)
    ap.add_argument("--names", default=None,
                    help="comma-separated suite workload names (default: the whole suite)")
    args = ap.parse_args()
    build(args.out, args.budget, args.seed, args.time_limit,
          set(args.names.split(",")) if args.names else None)


if __name__ == "__main__":
    main()
