"""Tuner quality: how few trials each strategy needs to come near the optimum.

For a set of suite workloads (``benchmarks/suite.py``: GEMMs, a batched GEMM, convs, a
softmax), on one target:

1. the optimum is estimated by a uniform random sample plus an iterated local search
   (steepest descent over ``Space.neighbors`` from the best points, then kicks: a random
   neighbour walk from the incumbent and a descent again); the gain of the last phase (the
   kicks) says how settled the estimate is. Any schedule a tuning run finds faster than
   the estimate becomes the optimum (reported too);
2. every strategy of ``--strategies`` tunes each workload once per seed, through the library's
   own ``tune_task`` (what ``pypto tune`` runs), each run on a fresh temporary SQLite
   database; the default schedule is trial 1;
3. reported per workload, median over seeds: best/optimum after 10/25/50/100/200 trials
   and the trials to reach 95% and 99% of the optimum; then per strategy over all runs.

A strategy is taken by its registered name (``pypto.tuner.strategies``), so one added
later runs by its name; the default set is ``random,tpe,model``.

    python benchmarks/tuner_quality.py [--quick] [--strategies random,tpe,model] [--seeds 3]
        [--trials 200] [--names square_1024,bert_softmax_s512] [--target ascend910b]

Prints a table and writes benchmarks/results/tuner_quality.json (``--out`` to change).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from suite import Case, load_cases, steepest_descent  # noqa: E402

from pypto.db import open_store  # noqa: E402
from pypto.sim import MODEL_VERSION  # noqa: E402
from pypto.tuner.loop import tune_task  # noqa: E402
from pypto.tuner.measure import Measurer  # noqa: E402
from pypto.tuner.options import TuneOptions  # noqa: E402
from pypto.tuner.strategies import get_strategy  # noqa: E402
from pypto.tuner.tasks import Task, extract_tasks  # noqa: E402

OUT = pathlib.Path(__file__).parent / "results" / "tuner_quality.json"
#: GEMMs (one odd-shaped, one skinny), a batched GEMM, convs, a softmax
#: and two vector kernels (the softmax costs about 1 s a measurement: the slowest here)
NAMES = ["square_1024", "bert_qkv_s128", "bert_ffn2_s512", "bert_attn_scores_s512",
         "resnet50_res2_3x3", "resnet50_res4_3x3", "bert_layernorm_s512", "bert_softmax_s512"]
#: one of each kind, the vector one the fast layernorm
QUICK_NAMES = ["square_1024", "bert_attn_scores_s512", "resnet50_res4_3x3",
               "bert_layernorm_s512"]
CHECKPOINTS = (10, 25, 50, 100, 200)
#: a space of at most this many valid points is measured whole for its optimum
ENUMERATE_UP_TO = 1000
LEVELS = (0.95, 0.99)


# -- the optimum -----------------------------------------------------------------------------


class Evaluator:
    """Cycles of one task's schedules, each measured once (lower + simulate, as a trial)."""

    def __init__(self, task: Task) -> None:
        self.task = task
        self.space = task.space
        self.measurer = Measurer(task.workload, task.target, task.space)
        self.cache: dict[str, float] = {}

    def __call__(self, schedule: Any) -> float:
        hit = self.cache.get(schedule.key)
        if hit is None:
            m = self.measurer(schedule)
            hit = self.cache[schedule.key] = float(m.cycles) if m.ok and m.cycles else float("inf")
        return hit

    def descend(self, start: Any, max_steps: int = 40) -> tuple[Any, float]:
        """Steepest descent over ``Space.neighbors`` while a neighbour improves."""
        return steepest_descent(self, self.space, start, max_steps)


def estimate_optimum(task: Task, samples: int, starts: int, kicks: int,
                     seed: int = 12345) -> dict[str, Any]:
    """A random sample, descents from its best ``starts`` points and the default, then
    ``kicks`` rounds of a 3-5 step neighbour walk from the incumbent and a descent. A space
    of at most ``ENUMERATE_UP_TO`` points is measured whole instead (the optimum is exact)."""
    from pypto.schedule_space import Schedule

    ev, rng = Evaluator(task), random.Random(seed)
    t0 = time.perf_counter()
    default = task.space.default()
    pool = {default.key: default}
    size = task.space.size()
    exact = size.exact and size.value <= ENUMERATE_UP_TO
    if exact:
        names = list(task.space.axes)
        for values in task.space.points():
            s = Schedule(dict(zip(names, values)))
            if task.space.is_valid(s):
                pool[s.key] = s
    else:
        for _ in range(samples):
            s = task.space.sample(rng)
            pool[s.key] = s
    ranked = sorted(pool.values(), key=lambda s: (ev(s), s.key))
    sample_best = ev(ranked[0])
    best, best_cycles = default, ev(default)
    for start in [] if exact else [default, *ranked[:starts]]:
        s, c = ev.descend(start)
        if c < best_cycles:
            best, best_cycles = s, c
    descent_best = best_cycles
    for _ in range(0 if exact else kicks):
        point = best
        for _ in range(rng.randint(3, 5)):
            around = task.space.neighbors(point)
            if not around:
                break
            point = around[rng.randrange(len(around))]
        s, c = ev.descend(point)
        if c < best_cycles:
            best, best_cycles = s, c
    return {"cycles": best_cycles, "exact": exact, "default_cycles": ev(default),
            "sample_best": sample_best,
            "descent_best": descent_best,
            "last_phase_gain": descent_best / best_cycles - 1.0,
            "measurements": len(ev.cache), "seconds": round(time.perf_counter() - t0, 1),
            "schedule": dict(best)}


# -- tuning runs ---------------------------------------------------------------------------


def curve(task: Task, strategy: str, trials: int, seed: int) -> tuple[list[float], Any]:
    """Best cycles so far after each trial of one ``tune_task`` run on a fresh database
    (failed trials keep the best as it was), and the run's result."""
    with tempfile.TemporaryDirectory(prefix="pypto-tq-") as tmp:
        with open_store(f"sqlite:///{tmp}/tune.db") as store:
            res = tune_task(task, store, TuneOptions(strategy, trials, seed=seed))
            cycles = {r.schedule_key: r.cycles for r in store.records(
                workload_key=task.workload.key, target_key=task.target.key)}
    best, out = float("inf"), []
    for key in res.order:
        c = cycles.get(key)
        if c is not None:
            best = min(best, float(c))
        out.append(best)
    return out, res


def at(best: list[float], optimum: float, n: int) -> float | None:
    """best/optimum after ``n`` trials (the last one if the run had fewer)."""
    if not best:
        return None
    return optimum / best[min(n, len(best)) - 1]


def trials_to(best: list[float], optimum: float, level: float) -> int | None:
    """The first trial count at which best/optimum reaches ``level`` (None: never)."""
    return next((i + 1 for i, b in enumerate(best) if optimum / b >= level - 1e-12), None)


def _median(values: list[float | None], missing: float) -> float | None:
    """Median with ``None`` counted as ``missing`` (a run that never got there); None if
    the median itself is such a run."""
    if not values:
        return None
    m = statistics.median(missing if v is None else v for v in values)
    return None if m >= missing else m


# -- the report -----------------------------------------------------------------------------


def summarize(workloads: dict[str, Any], strategies: list[str], trials: int) -> dict[str, Any]:
    """Per workload and strategy, medians over seeds; per strategy, over every run."""
    checkpoints = [c for c in CHECKPOINTS if c <= trials]
    overall: dict[str, Any] = {}
    for strategy in strategies:
        runs = [r for w in workloads.values() for r in w["runs"] if r["strategy"] == strategy]
        for w in workloads.values():
            mine = [r for r in w["runs"] if r["strategy"] == strategy]
            w.setdefault("median", {})[strategy] = {
                **{f"at_{c}": _median([r[f"at_{c}"] for r in mine], float("inf"))
                   for c in checkpoints},
                **{f"to_{int(lv * 100)}": _median([r[f"to_{int(lv * 100)}"] for r in mine],
                                                  float(trials + 1)) for lv in LEVELS}}
        overall[strategy] = {
            "runs": len(runs),
            **{f"at_{c}": _median([r[f"at_{c}"] for r in runs], float("inf"))
               for c in checkpoints},
            **{f"to_{int(lv * 100)}": _median([r[f"to_{int(lv * 100)}"] for r in runs],
                                              float(trials + 1)) for lv in LEVELS},
            **{f"reached_{int(lv * 100)}": sum(r[f"to_{int(lv * 100)}"] is not None
                                               for r in runs) for lv in LEVELS},
            "proposals": {k: sum(r[k] for r in runs) for k in
                          ("duplicates", "rejected", "transferred", "mutated", "uniform")}}
    return overall


def _fmt(v: float | None, trials: int, ratio: bool = True) -> str:
    if v is None:
        return f">{trials}" if not ratio else "-"
    return f"{v:.3f}" if ratio else f"{v:g}"


def print_tables(result: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    trials, strategies = result["trials"], result["strategies"]
    checkpoints = [c for c in CHECKPOINTS if c <= trials]
    console = Console(width=160)
    opt = Table(title="optimum estimate (random sample + iterated local search)")
    for col in ("workload", "default/opt", "sample best/opt", "last phase gain",
                "runs beat it by", "measurements", "s"):
        opt.add_column(col, justify="left" if col == "workload" else "right")
    for name, w in result["workloads"].items():
        e, o = w["estimate"], w["optimum"]
        opt.add_row(name, f"{o / e['default_cycles']:.3f}", f"{o / e['sample_best']:.3f}",
                    f"{e['last_phase_gain']:.2%}", f"{e['cycles'] / o - 1:.2%}",
                    str(e["measurements"]), f"{e['seconds']:.0f}")
    console.print(opt)
    table = Table(title=f"best/optimum, median over {result['seeds']} seed(s)")
    table.add_column("workload")
    table.add_column("strategy")
    for c in checkpoints:
        table.add_column(f"@{c}", justify="right")
    for lv in LEVELS:
        table.add_column(f"to {lv:.0%}", justify="right")
    for name, w in result["workloads"].items():
        for strategy in strategies:
            m = w["median"][strategy]
            table.add_row(name, strategy, *(_fmt(m[f"at_{c}"], trials) for c in checkpoints),
                          *(_fmt(m[f"to_{int(lv * 100)}"], trials, ratio=False)
                            for lv in LEVELS))
    for strategy in strategies:
        m = result["overall"][strategy]
        table.add_row("[b]all runs[/b]", strategy,
                      *(_fmt(m[f"at_{c}"], trials) for c in checkpoints),
                      *(f"{_fmt(m[f'to_{int(lv * 100)}'], trials, ratio=False)} "
                        f"({m[f'reached_{int(lv * 100)}']}/{m['runs']})" for lv in LEVELS))
    console.print(table)
    for strategy in strategies:
        p = result["overall"][strategy]["proposals"]
        console.print(f"{strategy}: proposals over all runs: " +
                      ", ".join(f"{v} {k}" for k, v in p.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="4 workloads, 50 trials, 2 seeds, a smaller optimum search")
    ap.add_argument("--strategies", default="random,tpe,model",
                    help="comma-separated registered strategy names")
    ap.add_argument("--seeds", type=int, default=None)
    ap.add_argument("--trials", type=int, default=None)
    ap.add_argument("--names", default=None, help="comma-separated suite workload names")
    ap.add_argument("--target", default="ascend910b")
    ap.add_argument("--samples", type=int, default=None, help="random sample of the optimum")
    ap.add_argument("--kicks", type=int, default=None, help="local-search kicks")
    ap.add_argument("--out", type=pathlib.Path, default=OUT)
    ap.add_argument("--optimum-from", type=pathlib.Path, action="append", default=[],
                    help="reuse the optimum estimates of an earlier result file of this "
                         "benchmark or of default_quality.py (same target and timing model; "
                         "repeat the option for several files: per workload the lowest "
                         "optimum wins), e.g. to compare two versions of the tuner on one "
                         "optimum; its optimum is a floor for this one's")
    ap.add_argument("--merge", type=pathlib.Path, nargs="+", default=None,
                    help="measure nothing: merge the runs of these result files (same target "
                         "and trials; when a later file has runs of a strategy for a workload, "
                         "an earlier file's runs of it become '<strategy>-earlier'), take per "
                         "workload the lowest optimum of the files, of --optimum-from and of "
                         "--floor, and recompute the tables")
    ap.add_argument("--floor", type=pathlib.Path, default=None,
                    help="with --merge: a cost_model_data.py dataset whose best measured "
                         "schedule per workload is an optimum floor")
    args = ap.parse_args()
    if args.merge:
        merge(args.merge, args.optimum_from, args.floor, args.target, args.out)
        return

    strategies = [s for s in args.strategies.split(",") if s]
    for s in strategies:
        get_strategy(s, 0)                         # an unknown name fails before any work
    trials = args.trials or (50 if args.quick else 200)
    seeds = args.seeds or (2 if args.quick else 3)
    samples = args.samples or (100 if args.quick else 300)
    kicks = args.kicks if args.kicks is not None else (2 if args.quick else 6)
    names = args.names.split(",") if args.names else (QUICK_NAMES if args.quick else NAMES)
    cases = {c.name: c for c in load_cases(names=set(names), target=args.target)}
    missing = [n for n in names if n not in cases]
    if missing:
        raise SystemExit(f"not in the suite: {', '.join(missing)}")

    earlier = earlier_optima(args.optimum_from, args.target)
    t0 = time.perf_counter()
    workloads: dict[str, Any] = {}
    for name in names:
        case: Case = cases[name]
        task = next(t for t in extract_tasks([case.compiled])
                    if t.workload.key == case.workload.key)
        if name in earlier:
            est = earlier[name]["estimate"]
        else:
            est = estimate_optimum(task, samples, starts=3, kicks=kicks)
        print(f"{name}: optimum estimate {est['cycles']:.0f} cycles "
              f"({est['measurements']} measurements, {est['seconds']:.0f} s)", flush=True)
        runs: list[dict[str, Any]] = []
        curves = []
        for strategy in strategies:
            for seed in range(seeds):
                t1 = time.perf_counter()
                best, res = curve(task, strategy, trials, seed)
                curves.append((strategy, seed, best, res, time.perf_counter() - t1))
        optimum = min([est["cycles"], earlier.get(name, {}).get("optimum", float("inf")),
                       *(b[-1] for _, _, b, _, _ in curves if b)])
        for strategy, seed, best, res, seconds in curves:
            runs.append({
                "strategy": strategy, "seed": seed, "trials": len(best),
                "best_cycles": best[-1] if best else None, "status": res.status,
                "seconds": round(seconds, 1),
                **{f"at_{c}": at(best, optimum, c) for c in CHECKPOINTS if c <= trials},
                **{f"to_{int(lv * 100)}": trials_to(best, optimum, lv) for lv in LEVELS},
                # (getattr: a tuner before these counts existed ran this too)
                **{k: getattr(res, k, 0) for k in ("duplicates", "rejected", "transferred",
                                                   "mutated", "uniform")},
                "curve": best})
            print(f"  {strategy} seed {seed}: {optimum / best[-1]:.3f} of the optimum after "
                  f"{len(best)} trials ({seconds:.0f} s; {runs[-1]['mutated']} mutated, "
                  f"{runs[-1]['uniform']} uniform, {res.duplicates} duplicates)", flush=True)
        workloads[name] = {"op": case.op, "workload": case.workload.describe(),
                           "space_size": str(task.space.size()), "optimum": optimum,
                           "estimate": est, "runs": runs}

    result: dict[str, Any] = {
        "benchmark": "tuner_quality", "target": args.target, "strategies": strategies,
        "trials": trials, "seeds": seeds, "quick": args.quick,
        "optimum_search": {"samples": samples, "starts": 3, "kicks": kicks,
                           "from": [str(p) for p in args.optimum_from]},
        "model_version": MODEL_VERSION,
        "workloads": workloads, "wall_s": round(time.perf_counter() - t0, 1),
        "commit": _commit(), "machine": {"python": platform.python_version(),
                                         "platform": platform.platform()}}
    result["overall"] = summarize(workloads, strategies, trials)
    print_tables(result)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {args.out}")


def merge(paths: list[pathlib.Path], optimum_from: list[pathlib.Path],
          floor: pathlib.Path | None, target: str, out: pathlib.Path) -> None:
    """Runs of several result files over one optimum per workload (the lowest any file,
    estimate or run found), every figure recomputed from the runs' curves."""
    files = [json.loads(p.read_text()) for p in paths]
    trials = {f["trials"] for f in files}
    if len(trials) != 1 or any(f["target"] != target for f in files):
        raise SystemExit("--merge wants result files of one target and one --trials")
    n = trials.pop()
    floors = earlier_optima(optimum_from, target)
    if floor is not None:
        data = json.loads(floor.read_text())
        for name, w in data["workloads"].items():
            best = min(c for _, c in w["points"])
            if name not in floors or best < floors[name]["optimum"]:
                floors[name] = {**floors.get(name, {}), "optimum": best}
    workloads: dict[str, Any] = {}
    strategies: list[str] = []
    for f in files:
        for name, w in f["workloads"].items():
            mine = workloads.setdefault(name, {**w, "runs": []})
            new = {r["strategy"] for r in w["runs"]}
            mine["runs"] = [{**r, "strategy": f"{r['strategy']}-earlier"}
                            if r["strategy"] in new else r for r in mine["runs"]] + w["runs"]
            mine["optimum"] = min(mine["optimum"], w["optimum"])
            strategies += [s for s in f["strategies"] if s not in strategies]
    present = {r["strategy"] for w in workloads.values() for r in w["runs"]}
    strategies = [name for s in strategies for name in (f"{s}-earlier", s) if name in present]
    for name, w in workloads.items():
        w["optimum"] = min([w["optimum"], floors.get(name, {}).get("optimum", float("inf")),
                            *(r["curve"][-1] for r in w["runs"] if r["curve"])])
        for r in w["runs"]:
            best = r["curve"]
            r.update({f"at_{c}": at(best, w["optimum"], c) for c in CHECKPOINTS if c <= n})
            r.update({f"to_{int(lv * 100)}": trials_to(best, w["optimum"], lv)
                      for lv in LEVELS})
        w.pop("median", None)
    result: dict[str, Any] = {
        "benchmark": "tuner_quality", "target": target, "strategies": strategies,
        "trials": n, "seeds": max(f["seeds"] for f in files), "quick": False,
        "merged_from": [str(p) for p in paths], "floor": str(floor or ""),
        "optimum_search": [f.get("optimum_search") for f in files],
        "model_version": MODEL_VERSION, "workloads": workloads, "commit": _commit()}
    result["overall"] = summarize(workloads, strategies, n)
    print_tables(result)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"wrote {out}")


def earlier_optima(paths: list[pathlib.Path], target: str) -> dict[str, Any]:
    """Per workload ``{"estimate", "optimum"}`` from earlier result files: this benchmark's
    (``workloads``) or ``default_quality.py``'s (``rows``, its ``best_cycles`` an estimate
    by the same ``estimate_optimum``). The lowest optimum of the files wins; a file of
    another target or timing model is refused (its cycles mean something else)."""
    out: dict[str, Any] = {}
    for path in paths:
        data = json.loads(path.read_text())
        version = data.get("model_version")
        if data.get("target", target) != target or (version and version != MODEL_VERSION):
            raise SystemExit(f"{path}: measured for {data.get('target')} under {version}, "
                             f"not {target} under {MODEL_VERSION}; estimate the optimum anew")
        if "workloads" in data:
            found = {n: {"estimate": w["estimate"], "optimum": w["optimum"]}
                     for n, w in data["workloads"].items()}
        else:
            found = {}
            for r in data["rows"]:
                per_us = r["default_cycles"] / r["default_us"]
                est = {"cycles": r["best_cycles"], "exact": r.get("exact", False),
                       "default_cycles": r["default_cycles"],
                       "sample_best": r["sample_best_us"] * per_us,
                       "descent_best": r["descent_best_us"] * per_us,
                       "last_phase_gain": r["descent_best_us"] / r["best_us"] - 1.0,
                       "measurements": r["evaluations"], "seconds": r["wall_s"],
                       "from": str(path)}
                found[r["name"]] = {"estimate": est, "optimum": r["best_cycles"]}
        for name, entry in found.items():
            if name not in out or entry["optimum"] < out[name]["optimum"]:
                out[name] = entry
    return out


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True,
                              cwd=pathlib.Path(__file__).parent).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


if __name__ == "__main__":
    main()
