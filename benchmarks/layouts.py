"""What the input layout costs: ResNet-50's convs (``/work/shared/workloads/suite.json``,
or ``--suite``) on ascend910b, fp16, in three ways:

* ``NCHW direct``: an NCHW input and KCRS weights, read as they lie (``conv2d_nchw``:
  the GEMM transposed; the default stages each chunk's input rows in UB in long runs
  and copies the taps from there to L1) and the NCHW result written directly; what
  ``pypto.conv2d`` does for NCHW with one group;
* ``NCHW + conversion``: the same tensors converted by copy workloads (input to NHWC,
  weights to ``[R*S*C, K]``, result back to NCHW) around the NHWC conv
  (``pypto.frontend.ops.linalg.conv2d_converted``; what ``pypto.conv2d`` did before);
* ``NHWC``: an NHWC input (``pypto.tensor(..., layout='NHWC')``) and KRSC weights (their
  conversion to ``[R*S*C, K]`` is still a copy workload; the ``conv only`` column is
  the conv workload alone).

Each under its default schedules, and with ``--samples N`` the conv workload's best of
N random schedules of its space too (the copies keep their defaults). Cycles are the
kernel's total (every workload, launches included).

Prints a table; writes JSON to benchmarks/results/layouts.json.
Run: nice -n 10 python benchmarks/layouts.py [--samples N]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import random
import warnings
from typing import Any

import pypto
from pypto.frontend.ops.linalg import conv2d_converted
from pypto.schedule_space import space_for

F16 = "float16"
SUITE = pathlib.Path("/work/shared/workloads/suite.json")


def convs(suite: pathlib.Path) -> list[dict[str, Any]]:
    return [w for w in json.loads(suite.read_text())["workloads"]
            if w["op"] == "conv2d" and w["name"].startswith("resnet50")]


def kernels(w: dict[str, Any]) -> dict[str, tuple[Any, tuple]]:
    n, c, h, wd, k, r, s = (w[x] for x in "NCHWKRS")
    stride, pad, relu = w["stride"], w["pad"], "relu" in w.get("epilogue", [])

    def make(conv: Any) -> Any:
        def fn(x: Any, wt: Any) -> Any:
            y = conv(x, wt, stride=stride, padding=pad)
            return pypto.relu(y) if relu else y
        return pypto.kernel(fn)

    nchw = (pypto.spec((n, c, h, wd), F16), pypto.spec((k, c, r, s), F16))
    nhwc = (pypto.spec((n, h, wd, c), F16, layout="NHWC"),
            pypto.spec((k, r, s, c), F16, layout="NHWC"))
    return {"NCHW direct": (make(pypto.conv2d), nchw),
            "NCHW + conversion": (make(conv2d_converted), nchw),
            "NHWC": (make(pypto.conv2d), nhwc)}


def measure(kernel: Any, specs: tuple, samples: int, seed: int) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        compiled = kernel.lower(*specs, target="ascend910b")
    each = compiled.simulate_each()
    i = next(j for j, wl in enumerate(compiled.workloads) if wl.family == "conv2d")
    row = {"workloads": [wl.ops[0] if wl.family == "conv2d" else "copy"
                         for wl in compiled.workloads],
           "cycles": int(compiled.simulate().cycles), "conv_cycles": int(each[i].cycles),
           "copy_cycles": int(sum(r.cycles for j, r in enumerate(each) if j != i)),
           "conv_schedule": compiled.schedules[i].to_json()}
    if samples:
        space = space_for(compiled.workloads[i], compiled.target)
        rng = random.Random(seed)
        best = min((compiled.with_schedule(i, space.sample(rng)).simulate_each()[i].cycles
                    for _ in range(samples)), default=each[i].cycles)
        best = min(best, each[i].cycles)
        row["best_conv_cycles"] = int(best)
        row["best_cycles"] = int(row["cycles"] - each[i].cycles + best)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=0,
                        help="random schedules of each conv workload (best taken)")
    parser.add_argument("--suite", type=pathlib.Path, default=SUITE)
    args = parser.parse_args()
    rows = []
    for w in convs(args.suite):
        for variant, (kernel, specs) in kernels(w).items():
            rows.append({"layer": w["name"], "variant": variant,
                         **measure(kernel, specs, args.samples, seed=0)})
    head = f"{'layer':26} {'variant':18} {'cycles':>8} {'conv only':>9} {'copies':>8}"
    if args.samples:
        head += f" {'best conv':>9} {'best total':>10}"
    print(head)
    for r in rows:
        line = (f"{r['layer']:26} {r['variant']:18} {r['cycles']:>8} {r['conv_cycles']:>9} "
                f"{r['copy_cycles']:>8}")
        if args.samples:
            line += f" {r['best_conv_cycles']:>9} {r['best_cycles']:>10}"
        print(line)
    summary = ratios(rows, "best_cycles" if args.samples else "cycles")
    for name, value in summary.items():
        print(f"{name}: {value}")
    out = pathlib.Path(__file__).parent / "results" / "layouts.json"
    out.write_text(json.dumps({"target": "ascend910b", "dtype": F16,
                               "samples": args.samples, "python": platform.python_version(),
                               "rows": rows, "summary": summary}, indent=1))
    print(f"wrote {out}")


def ratios(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Per layer, the other variants' cycles over NHWC's (and their geometric means)."""
    import math

    by = {(r["layer"], r["variant"]): r[key] for r in rows}
    layers = sorted({r["layer"] for r in rows})
    out: dict[str, Any] = {}
    for variant in ("NCHW direct", "NCHW + conversion"):
        per = {layer: round(by[(layer, variant)] / by[(layer, "NHWC")], 3) for layer in layers}
        out[f"{variant} / NHWC ({key})"] = per
        out[f"{variant} / NHWC geomean ({key})"] = round(
            math.exp(sum(math.log(v) for v in per.values()) / len(per)), 3)
    return out


if __name__ == "__main__":
    main()
