"""DRAM streaming: a large elementwise add (``c = a + b``, fp16) on every target, the
bandwidth it achieves in the simulator against the modelled achievable bandwidth (the
target's nominal ``gm.chip_bytes_per_cycle`` times ``gm.sustained_fraction``).

Achieved bandwidth = DRAM bytes (``dram_read_bytes + dram_write_bytes``, whole lines
read, bytes written) / kernel time without the launch overhead. A streaming add keeps
the DRAM server busy from the first miss to the last write, so it should run at the
achievable figure within 2% (issue 12); the rest is the first read's latency and the
last write's. Rows are a whole number of L2 lines, so the DRAM bytes are the compulsory
ones (each input read once, the output written once) and the roofline's efficiency is
achieved / nominal.

Prints a table and writes JSON to benchmarks/results/dram_stream.json.
Run: python benchmarks/dram_stream.py
"""

from __future__ import annotations

import json
import pathlib
import platform
import time
import warnings

import pypto
from pypto.schedule_space import default_schedule
from pypto.sim import MODEL_VERSION
from pypto.targets import available_targets, load_target

# Per target: the add's shape (fp16), big enough that the latencies are a small share,
# small enough that the three tensors fit the target's L2 or are streamed once anyway.
SHAPES = {"ascend910b": (8192, 4096), "ascend310": (2048, 1024), "mlu370": (4096, 2048)}
DEFAULT_SHAPE = (4096, 2048)
TOLERANCE = 0.02


def measure(name: str) -> dict:
    target = load_target(name)
    shape = SHAPES.get(name, DEFAULT_SHAPE)
    compiled = pypto.kernel(lambda a, b: a + b).lower(
        pypto.spec(shape, "float16"), pypto.spec(shape, "float16"), target=target)
    schedule = default_schedule(compiled.workloads[0], target)
    compiled = compiled.with_schedule(0, schedule)
    start = time.perf_counter()
    result = compiled.simulate()
    wall = time.perf_counter() - start
    kernel_cycles = result.cycles - target.launch_overhead_cycles
    dram_bytes = result.dram_read_bytes + result.dram_write_bytes
    compulsory = 3 * shape[0] * shape[1] * 2
    hz = target.clock_ghz * 1e9
    achieved = dram_bytes / kernel_cycles
    modelled = target.dram_bytes_per_cycle
    return {"target": name, "shape": list(shape), "schedule": dict(schedule),
            "cycles": result.cycles, "launch_cycles": target.launch_overhead_cycles,
            "bound_cycles": result.bound_cycles, "efficiency": result.efficiency,
            "dram_read_bytes": result.dram_read_bytes,
            "dram_write_bytes": result.dram_write_bytes, "compulsory_bytes": compulsory,
            "nominal_gb_s": target.gm_bytes_per_cycle_chip * hz / 1e9,
            "sustained_fraction": target.gm_sustained_fraction,
            "modelled_gb_s": modelled * hz / 1e9, "achieved_gb_s": achieved * hz / 1e9,
            "achieved_over_modelled": achieved / modelled,
            "achieved_over_nominal": achieved / target.gm_bytes_per_cycle_chip,
            "within_tolerance": abs(achieved / modelled - 1) <= TOLERANCE,
            "simulate_s": wall}


def main() -> None:
    warnings.filterwarnings("ignore", category=pypto.ScheduleFallbackWarning)
    rows = [measure(name) for name in available_targets()]
    print("streaming fp16 add c = a + b, default schedule; achieved = DRAM bytes / kernel "
          "time (launch excluded)")
    print(f"{'target':<12}{'shape':>12}{'cycles':>10}{'nominal GB/s':>14}{'fraction':>10}"
          f"{'modelled GB/s':>15}{'achieved GB/s':>15}{'ach/model':>11}{'efficiency':>12}")
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        print(f"{r['target']:<12}{shape:>12}{r['cycles']:>10,}{r['nominal_gb_s']:>14,.1f}"
              f"{r['sustained_fraction']:>10.2f}{r['modelled_gb_s']:>15,.1f}"
              f"{r['achieved_gb_s']:>15,.1f}{r['achieved_over_modelled']:>11.3f}"
              f"{r['efficiency']:>12.3f}")
    bad = [r["target"] for r in rows if not r["within_tolerance"]]
    print(f"within {TOLERANCE:.0%} of the modelled bandwidth: "
          f"{'all targets' if not bad else 'NOT ' + ', '.join(bad)}")
    out = pathlib.Path(__file__).parent / "results" / "dram_stream.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "dram_stream", "model_version": MODEL_VERSION,
        "what": "fp16 c = a + b with the default schedule; achieved = (dram_read_bytes + "
                "dram_write_bytes) / (cycles - launch overhead)",
        "tolerance": TOLERANCE, "rows": rows,
        "machine": f"{platform.machine()} Python {platform.python_version()}"},
        indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
