"""Long rows: softmax and layernorm over rows that do not fit one core's vector memory
(issue 16 item 5) run as multi-pass kernels over column chunks.

For each row length (float32, 48 rows on ascend910b, so every vector core has one row):
the default schedule's chunk width and pass count, its simulated time, the roofline
bound and efficiency (bound / time: the bound counts each input read once, which a
multi-pass kernel cannot reach), the GM bytes read per input byte, and the best point
of a sweep over chunk widths (down to 1/64 of the row) and buffer depths (the other
knobs as the default's).

Prints a table and writes JSON to benchmarks/results/long_rows.json.
Run: python benchmarks/long_rows.py
"""

from __future__ import annotations

import json
import pathlib
import platform
import warnings

import pypto
from pypto.schedule_space import space_for, validate
from pypto.schedule_space.chain import analyze, stages
from pypto.sim import MODEL_VERSION
from pypto.targets import load_target

TARGET = "ascend910b"
ROWS = 48
COLS = (4096, 16384, 65536, 262144)
MAX_CHUNKS = 64  # the sweep's narrowest chunk (narrower ones only add instructions)
OPS = {"softmax": lambda a: pypto.softmax(a, -1), "layernorm": lambda a: pypto.layernorm(a)}


def measure(op: str, cols: int) -> dict:
    target = load_target(TARGET)
    compiled = pypto.kernel(OPS[op]).lower(pypto.spec((ROWS, cols), "float32"), target=target)
    wl, default = compiled.workloads[0], compiled.schedules[0]
    result = compiled.simulate()
    chain = analyze(wl)
    split = default["tile_cols"] < cols
    passes = max(stages(wl, chain)[v.node] for v in chain.values if v.phase != "row") + 1 \
        if split else 1
    best = (result.cycles, dict(default))
    widths = [c for c in space_for(wl, target).axes["tile_cols"].choices
              if cols // c <= MAX_CHUNKS]
    for tile_cols in widths:
        for depth in (1, 2, 3):
            s = default.replace(tile_cols=tile_cols, depth=depth, tile_rows=1)
            if validate(wl, s, target):
                continue
            cycles = compiled.with_schedule(0, s).simulate().cycles
            best = min(best, (cycles, dict(s)), key=lambda b: b[0])
    input_bytes = ROWS * cols * 4
    return {"op": op, "rows": ROWS, "cols": cols, "row_kib": cols * 4 / 1024,
            "ub_kib": target.role("vector").capacity / 1024, "default": dict(default),
            "passes": passes, "cycles": result.cycles, "time_us": result.time_us,
            "bound_cycles": result.bound_cycles, "efficiency": result.efficiency,
            "gm_read_per_input_byte": result.gm_read_bytes / input_bytes,
            "best_cycles": best[0], "best_schedule": best[1],
            "default_over_best": best[0] / result.cycles}


def main() -> None:
    warnings.filterwarnings("ignore", category=pypto.ScheduleFallbackWarning)
    rows = [measure(op, cols) for op in OPS for cols in COLS]
    print(f"float32 rows of N columns, {ROWS} rows, {TARGET} (UB "
          f"{rows[0]['ub_kib']:.0f} KiB); default schedule, and the best chunk width/depth")
    print(f"{'op':<10}{'cols':>8}{'row KiB':>9}{'chunk':>7}{'passes':>7}{'us':>9}"
          f"{'efficiency':>11}{'GM reads/in':>12}{'best us':>9}{'best chunk':>11}")
    for r in rows:
        best_us = r["time_us"] * r["best_cycles"] / r["cycles"]
        print(f"{r['op']:<10}{r['cols']:>8}{r['row_kib']:>9.0f}{r['default']['tile_cols']:>7}"
              f"{r['passes']:>7}{r['time_us']:>9.2f}{r['efficiency']:>11.3f}"
              f"{r['gm_read_per_input_byte']:>12.2f}{best_us:>9.2f}"
              f"{r['best_schedule']['tile_cols']:>11}")
    out = pathlib.Path(__file__).parent / "results" / "long_rows.json"
    out.write_text(json.dumps({"model": MODEL_VERSION, "target": TARGET,
                               "python": platform.python_version(), "rows": rows}, indent=1)
                   + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
