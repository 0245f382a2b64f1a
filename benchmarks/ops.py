"""The operators of issue 16 item 7 at model sizes, simulated on one target: the
workloads each becomes, the default schedule's time and efficiency (roofline bound /
time), and the best of ``--samples`` random schedules per workload (of at most
``MAX_UNITS`` tiles: a quick look at the headroom a tuning run has; ``pypto tune``
searches properly).

Prints a table and writes JSON to benchmarks/results/ops.json.
Run: python benchmarks/ops.py [--samples 20] [--target ascend910b]
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import platform
import random
import warnings

import pypto
from pypto.schedule_space import family_of, space_for
from pypto.sim import MODEL_VERSION

MAX_UNITS = 512  # random schedules with more tiles are redrawn (program size)


def _gelu_erf(x):  # type: ignore[no-untyped-def]
    # x * (...) last, so every op reads a value of the chain: one vector workload (an
    # op on x alone, as x * 0.5 first would be, starts a workload of its own)
    return x * ((pypto.erf(x * (1 / math.sqrt(2))) + 1.0) * 0.5)


CASES = {
    # ResNet-50's stem pooling and its global average pooling (NHWC, float16)
    "max_pool2d 3x3/2 pad 1, 1x112x112x64": (
        lambda x: pypto.max_pool2d(x, 3, 2, 1), [((1, 112, 112, 64), "float16", "NHWC")]),
    "avg_pool2d 7x7, 8x7x7x2048": (
        lambda x: pypto.avg_pool2d(x, 7), [((8, 7, 7, 2048), "float16", "NHWC")]),
    "pad H,W by 1, 1x56x56x64": (
        lambda x: pypto.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))),
        [((1, 56, 56, 64), "float16", "NHWC")]),
    "concatenate 2x 4096x1024 on axis 1": (
        lambda a, b: pypto.concatenate([a, b], axis=1),
        [((4096, 1024), "float16", None)] * 2),
    "stack 4x 1024x1024": (
        lambda a, b, c, d: pypto.stack([a, b, c, d]), [((1024, 1024), "float16", None)] * 4),
    "reversed rows x[::-1] * 2, 4096x1024": (
        lambda x: x[::-1] * 2.0, [((4096, 1024), "float16", None)]),
    "reversed columns x[:, ::-1] * 2, 4096x1024": (
        lambda x: x[:, ::-1] * 2.0, [((4096, 1024), "float16", None)]),
    "erf, 256x4096 fp32": (pypto.erf, [((256, 4096), "float32", None)]),
    "gelu (erf form), 256x4096 fp32": (_gelu_erf, [((256, 4096), "float32", None)]),
    "gelu (tanh instruction), 256x4096 fp32": (pypto.gelu, [((256, 4096), "float32", None)]),
    "x ** 3, 256x4096 fp32": (lambda x: x ** 3, [((256, 4096), "float32", None)]),
    "x ** 2.5, 256x4096 fp32": (lambda x: x ** 2.5, [((256, 4096), "float32", None)]),
    "clip(x, -1, 1), 256x4096 fp32": (lambda x: pypto.clip(x, -1.0, 1.0),
                                       [((256, 4096), "float32", None)]),
    "rms_norm, 512x4096 fp16": (lambda x, g: pypto.rms_norm(x, g),
                                [((512, 4096), "float16", None), ((4096,), "float16", None)]),
    "layernorm, 512x4096 fp16": (lambda x, g: pypto.layernorm(x, g),
                                 [((512, 4096), "float16", None), ((4096,), "float16", None)]),
}


def measure(name: str, target: str, samples: int, seed: int) -> dict:
    fn, specs = CASES[name]
    compiled = pypto.kernel(fn).lower(*[pypto.spec(s, d, layout=lay) for s, d, lay in specs],
                                      target=target)
    results = compiled.simulate_each()
    rng = random.Random(seed)
    best = []
    for i, (wl, result) in enumerate(zip(compiled.workloads, results)):
        space = space_for(wl, compiled.target)
        units = family_of(wl).work_units
        cycles = [result.cycles]
        for _ in range(samples):
            s = space.sample(rng)
            for _ in range(20):  # at most MAX_UNITS tiles: bounded program sizes
                if units(wl, s) <= MAX_UNITS:
                    break
                s = space.sample(rng)
            cycles.append(compiled.with_schedule(i, s).simulate_each()[i].cycles)
        best.append(min(cycles))
    clock = compiled.target.clock_ghz * 1e3
    default = sum(r.cycles for r in results)
    bound = sum(r.bound_cycles for r in results)
    kinds = [f"{wl.family} " + "+".join(n.op for n in wl.nodes if n.op != "load")
             for wl in compiled.workloads]
    return {"case": name, "workloads": kinds,
            "default_cycles": default, "default_us": default / clock,
            "bound_cycles": bound, "efficiency": bound / default,
            "best_sampled_cycles": sum(best), "best_sampled_us": sum(best) / clock}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--target", default="ascend910b")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=pypto.ScheduleFallbackWarning)
    rows = [measure(name, args.target, args.samples, args.seed) for name in CASES]
    print(f"{args.target}; default schedules, and the best of {args.samples} random "
          "schedules per workload")
    print(f"{'case':<42}{'workloads':>10}{'default us':>11}{'efficiency':>11}{'best us':>9}")
    for r in rows:
        print(f"{r['case']:<42}{len(r['workloads']):>10}{r['default_us']:>11.2f}"
              f"{r['efficiency']:>11.3f}{r['best_sampled_us']:>9.2f}")
    out = pathlib.Path(__file__).parent / "results" / "ops.json"
    out.write_text(json.dumps({"model": MODEL_VERSION, "target": args.target,
                               "samples": args.samples, "seed": args.seed,
                               "python": platform.python_version(), "rows": rows}, indent=1)
                   + "\n")


if __name__ == "__main__":
    main()
