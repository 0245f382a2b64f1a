"""Fusion as a choice, in simulated figures (ascend910b).

1. ResNet-50 stage-2 3x3 conv + ReLU (1x56x56x64 -> 64, padding 1, NHWC fp16): the
   ReLU fused into the conv's epilogue, unfused in the same program (``fuse_tail=False``:
   the conv result goes to GM, the ReLU runs as a vector pass after a SYNC_ALL), and as
   a separate workload (``fuse=False``), the conv under the same tiling in all three;
   plus the separate workloads under their own default schedules.
2. What the tuner picks: ``tune_task`` (strategy ``model``) on matmul + ReLU shapes; the
   best measured fused and unfused schedules, and which one the lookup returns.

Prints two tables; writes JSON to benchmarks/results/fusion.json.
Run: nice -n 10 python benchmarks/fusion.py [--trials N]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import tempfile
import warnings
from typing import Any

import pypto
from pypto.schedule_space import Schedule

F16 = "float16"


def _lower(kernel: pypto.Kernel, *args: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        return kernel.lower(*args, target="ascend910b")


def _row(name: str, compiled: Any) -> dict[str, Any]:
    r = compiled.simulate()
    return {"variant": name, "workloads": len(compiled.workloads), "cycles": int(r.cycles),
            "time_us": round(r.time_us, 2), "gm_bytes": int(r.gm_read_bytes + r.gm_write_bytes),
            "dram_bytes": int(r.dram_read_bytes + r.dram_write_bytes)}


def conv_relu() -> list[dict[str, Any]]:
    x = pypto.spec((1, 56, 56, 64), F16, layout="NHWC")
    w = pypto.spec((64, 3, 3, 64), F16, layout="NHWC")

    def fn(a: Any, b: Any) -> Any:
        return pypto.relu(pypto.conv2d(a, b, padding=1))

    fused = _lower(pypto.kernel(fn), x, w)
    i = next(j for j, wl in enumerate(fused.workloads) if wl.family == "conv2d")
    tiling = fused.schedules[i].replace(ub_depth=2)
    separate_own = _lower(pypto.kernel(fuse=False)(fn), x, w)
    conv = Schedule({k: v for k, v in tiling.items() if k != "fuse_tail"})
    return [_row("fused (default schedule)", fused),
            _row("fused, ub_depth=2", fused.with_schedule(i, tiling)),
            _row("unfused in one program", fused.with_schedule(i, tiling.replace(
                fuse_tail=False))),
            _row("separate workloads", separate_own.with_schedule(i, conv)),
            _row("separate, own defaults", separate_own)]


def tuned_choice(m: int, n: int, k: int, trials: int, tmp: str) -> dict[str, Any]:
    from pypto.compile.resolver import ScheduleResolver
    from pypto.db import open_store
    from pypto.tuner.loop import tune_task
    from pypto.tuner.options import TuneOptions
    from pypto.tuner.tasks import extract_tasks

    kernel = pypto.kernel(lambda a, b: pypto.relu(pypto.matmul(a, b)))
    compiled = _lower(kernel, pypto.spec((m, k), F16), pypto.spec((k, n), F16))
    (task,) = extract_tasks([compiled])
    url = f"sqlite:///{tmp}/fusion_{m}x{n}x{k}.db"
    store = open_store(url)
    tune_task(task, store, TuneOptions("model", trials, seed=0))
    ok = [r for r in store.records(workload_key=task.workload.key) if r.status == "ok"]
    best = {flag: min((r.cycles for r in ok if r.schedule["fuse_tail"] is flag), default=None)
            for flag in (True, False)}
    resolver = ScheduleResolver(url)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        schedule, source = resolver.resolve(task.workload, task.target)
    return {"shape": f"{m}x{n}x{k}", "trials": len(ok),
            "measured_fused": sum(r.schedule["fuse_tail"] for r in ok),
            "default_cycles": int(compiled.simulate().cycles),
            "best_fused_cycles": best[True], "best_unfused_cycles": best[False],
            "lookup_source": source, "lookup_fuse_tail": schedule["fuse_tail"],
            "lookup_split_k": schedule["split_k"]}


def tuned_choices(trials: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp:
        return [tuned_choice(m, n, k, trials, tmp) for m, n, k in
                ((16, 64, 8192), (64, 256, 4096), (1024, 1024, 1024))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # an empty database: default schedules, not the shipped tuning logs' records
        os.environ["PYPTO_DB"] = f"sqlite:///{tmp}/empty.db"
        conv = conv_relu()
        tuned = tuned_choices(args.trials)
    print("ResNet-50 3x3 conv + ReLU, 1x56x56x64 -> 64, fp16 NHWC, ascend910b")
    print(f"{'variant':<28}{'workloads':>10}{'cycles':>10}{'us':>9}{'GM bytes':>12}"
          f"{'DRAM bytes':>12}")
    for r in conv:
        print(f"{r['variant']:<28}{r['workloads']:>10}{r['cycles']:>10,}{r['time_us']:>9.2f}"
              f"{r['gm_bytes']:>12,}{r['dram_bytes']:>12,}")
    print(f"\nmatmul + ReLU tuned ({args.trials} trials, strategy model): best fused vs "
          "unfused")
    print(f"{'shape MxNxK':<16}{'default':>9}{'fused':>9}{'unfused':>9}{'measured f/u':>14}"
          f"{'lookup':>24}")
    for t in tuned:
        pick = f"fuse_tail={t['lookup_fuse_tail']} split_k={t['lookup_split_k']}"
        print(f"{t['shape']:<16}{t['default_cycles']:>9,}{t['best_fused_cycles'] or 0:>9,}"
              f"{t['best_unfused_cycles'] or 0:>9,}"
              f"{t['measured_fused']:>7}/{t['trials'] - t['measured_fused']:<6}{pick:>24}")
    out = pathlib.Path(__file__).parent / "results" / "fusion.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"benchmark": "fusion", "target": "ascend910b",
                               "conv_relu": conv, "tuned_matmul_relu": tuned,
                               "trials": args.trials,
                               "machine": f"{platform.machine()} {platform.python_version()}"},
                              indent=2) + "\n")


if __name__ == "__main__":
    main()
