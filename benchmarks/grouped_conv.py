"""Grouped and depthwise conv2d on the simulated NPU (ascend910b, fp16, NHWC, batch 1).

MobileNetV2's 3x3 depthwise layers (Sandler et al. 2018, Table 2: the expanded
channels of each bottleneck) run under the cube's default (one GEMM per channel) and
the vector engine's default (``engine="vector"``, what an untuned compile now gets);
ResNeXt-50 32x4d's grouped 3x3 layers (Xie et al. 2017, Table 1: groups=32) run on
the cube. Each row: simulated cycles, the roofline bound and efficiency = bound /
cycles.

Prints a table; writes JSON to benchmarks/results/grouped_conv.json.
Run: nice -n 10 python benchmarks/grouped_conv.py
"""

from __future__ import annotations

import json
import pathlib
import platform
import warnings
from typing import Any

import pypto
from pypto.schedule_space.conv2d import cube_default

F16 = "float16"
# (name, H=W, channels, stride) of MobileNetV2's depthwise 3x3 layers
MOBILENET = [("mbv2_dw_112x32", 112, 32, 1), ("mbv2_dw_112x96_s2", 112, 96, 2),
             ("mbv2_dw_56x144", 56, 144, 1), ("mbv2_dw_56x144_s2", 56, 144, 2),
             ("mbv2_dw_28x192", 28, 192, 1), ("mbv2_dw_14x384", 14, 384, 1),
             ("mbv2_dw_14x576", 14, 576, 1), ("mbv2_dw_7x960", 7, 960, 1)]
# (name, H=W, channels) of ResNeXt-50 32x4d's grouped 3x3 layers (stride 1)
RESNEXT = [("resnext50_56x128_g32", 56, 128), ("resnext50_28x256_g32", 28, 256),
           ("resnext50_14x512_g32", 14, 512), ("resnext50_7x1024_g32", 7, 1024)]


def _lower(size: int, channels: int, groups: int, stride: int) -> tuple[Any, int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
        compiled = pypto.kernel(lambda a, b: pypto.conv2d(
            a, b, stride=stride, padding=1, groups=groups)).lower(
            pypto.spec((1, size, size, channels), F16, layout="NHWC"),
            pypto.spec((channels, channels // groups, 3, 3), F16), target="ascend910b")
    i = next(j for j, wl in enumerate(compiled.workloads) if wl.family == "conv2d")
    return compiled, i


def _figures(compiled: Any, i: int) -> dict[str, Any]:
    r = compiled.simulate_each()[i]
    return {"cycles": int(r.cycles), "bound_cycles": int(r.bound_cycles),
            "efficiency": round(r.bound_cycles / r.cycles, 3)}


def main() -> None:
    rows = []
    for name, size, channels, stride in MOBILENET:
        compiled, i = _lower(size, channels, channels, stride)
        cube = compiled.with_schedule(i, cube_default(compiled.workloads[i], compiled.target))
        vector = _figures(compiled, i)
        rows.append({"layer": name, "groups": channels, "engine": "vector",
                     "cube_default": _figures(cube, i), "default": vector})
    for name, size, channels in RESNEXT:
        compiled, i = _lower(size, channels, 32, 1)
        rows.append({"layer": name, "groups": 32, "engine": compiled.schedules[i].get(
            "engine", "cube"), "default": _figures(compiled, i)})
    print(f"{'layer':24} {'engine':7} {'cycles':>9} {'bound':>7} {'eff':>6} "
          f"{'cube default':>13} {'speedup':>8}")
    for r in rows:
        d, c = r["default"], r.get("cube_default")
        extra = f"{c['cycles']:>13} {c['cycles'] / d['cycles']:>7.1f}x" if c else ""
        print(f"{r['layer']:24} {r['engine']:7} {d['cycles']:>9} {d['bound_cycles']:>7} "
              f"{d['efficiency']:>6.3f} {extra}")
    out = pathlib.Path(__file__).parent / "results" / "grouped_conv.json"
    out.write_text(json.dumps({"target": "ascend910b", "dtype": F16,
                               "python": platform.python_version(), "rows": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
