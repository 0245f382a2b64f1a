"""Timing-engine throughput: the Cython engine (``pypto.sim.fast``) against the reference
engine (``pypto.sim.reference``) on programs of 10^3 to 10^6 instructions: fp16 GEMMs
and fp32 softmax with their default schedules on ascend910b (the default heuristic, not
whatever a tuning database holds). Both engines get the same bound (the workload's
roofline) and no trace, as ``Compiled.simulate`` runs them. For the GEMMs the script
also times ``compiled.simulate()`` itself: the static check, the bound and the engine.

Prints a table and writes JSON to benchmarks/results/sim_throughput.json.
Run: python benchmarks/sim_throughput.py [--reference-limit N] [--repeats R]

The reference engine is timed only on programs of at most ``--reference-limit``
instructions (default 100,000; it runs about 30,000 instructions/s); above that its
column says "skipped". Every time is the median of several runs; where both engines
ran, the script also checks that they agree.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import statistics
import time
import warnings
from collections.abc import Callable

import pypto
from pypto.codegen.program import Program
from pypto.compile.compiled import Compiled
from pypto.schedule_space import default_schedule
from pypto.sim import MODEL_VERSION, fast, reference
from pypto.sim.roofline import workload_bound
from pypto.targets import Target, load_target

TARGET = "ascend910b"
GEMMS = (512, 1024, 2048, 4096, 6144, 8192)
# issue 12 item 9: cost per instruction at these sizes, within 2x of the smallest's
SCALING = (2048, 4096, 8192)
SOFTMAXES = ((1024, 1024), (4096, 4096), (16384, 4096))


def _default(compiled: Compiled) -> Compiled:
    for i, wl in enumerate(compiled.workloads):
        compiled = compiled.with_schedule(i, default_schedule(wl, compiled.target))
    return compiled


def _gemm(n: int, target: Target) -> tuple[str, Compiled]:
    compiled = pypto.kernel(lambda a, b: pypto.matmul(a, b)).lower(
        pypto.spec((n, n), "float16"), pypto.spec((n, n), "float16"), target=target)
    return f"gemm {n}^3 fp16", _default(compiled)


def _softmax(shape: tuple[int, int], target: Target) -> tuple[str, Compiled]:
    compiled = pypto.kernel(lambda x: pypto.softmax(x)).lower(pypto.spec(shape, "float32"),
                                                              target=target)
    return f"softmax {shape[0]}x{shape[1]} fp32", _default(compiled)


def _median_seconds(run: Callable[[], object], repeats: int,
                    clock: Callable[[], float] = time.perf_counter) -> float:
    times = []
    for _ in range(repeats):
        start = clock()
        run()
        times.append(clock() - start)
    return statistics.median(times)


def measure(name: str, compiled: Compiled, target: Target, repeats: int,
            reference_limit: int) -> dict:
    program: Program = compiled.programs[0]
    bound = workload_bound(compiled.workloads[0], target)
    n = program.num_instructions
    fast.simulate(program, target, bound)  # warm up: loads the extension, builds tables
    cython_s = _median_seconds(lambda: fast.simulate(program, target, bound), repeats)
    # CPU time of this process: on a shared machine, wall time also counts other jobs
    cython_cpu_s = _median_seconds(lambda: fast.simulate(program, target, bound), repeats,
                                   time.process_time)
    row = {"program": name, "instructions": n, "cores": len(program.cores),
           "cython_s": cython_s, "cython_instr_per_s": n / cython_s,
           "cython_cpu_s": cython_cpu_s, "cython_cpu_ns_per_instr": cython_cpu_s / n * 1e9,
           "simulate_s": _median_seconds(compiled.simulate, repeats),
           "reference_s": None, "reference_instr_per_s": None, "speedup": None}
    if n <= reference_limit:
        ref_repeats = 3 if n <= 20_000 else 1
        ref_s = _median_seconds(lambda: reference.simulate(program, target, bound), ref_repeats)
        same = fast.simulate(program, target, bound).same_timing(
            reference.simulate(program, target, bound))
        if not same:
            raise SystemExit(f"{name}: the engines disagree")
        row.update(reference_s=ref_s, reference_instr_per_s=n / ref_s,
                   speedup=ref_s / cython_s, reference_runs=ref_repeats)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference-limit", type=int, default=100_000,
                        help="time the reference only on programs this small")
    parser.add_argument("--repeats", type=int, default=7, help="runs per Cython median")
    args = parser.parse_args()
    target = load_target(TARGET)
    # the programs use the default heuristic on purpose: no "tune it" advice wanted
    warnings.filterwarnings("ignore", category=pypto.ScheduleFallbackWarning)

    rows = []
    for build in [*(lambda t, n=n: _gemm(n, t) for n in GEMMS),
                  *(lambda t, s=s: _softmax(s, t) for s in SOFTMAXES)]:
        name, compiled = build(target)
        rows.append(measure(name, compiled, target, args.repeats, args.reference_limit))
        del compiled
    rows.sort(key=lambda r: r["instructions"])

    header = (f"{'program':<26}{'instructions':>13}{'reference s':>13}{'cython ms':>11}"
              f"{'ref instr/s':>13}{'cy instr/s':>13}{'speedup':>9}{'simulate() ms':>15}")
    print(f"timing engines on {TARGET} (medians; reference skipped above "
          f"{args.reference_limit:,} instructions)")
    print(header)
    for r in rows:
        ref_s = f"{r['reference_s']:.3f}" if r["reference_s"] is not None else "skipped"
        ref_rate = (f"{r['reference_instr_per_s']:,.0f}" if r["reference_s"] is not None
                    else "-")
        speedup = f"{r['speedup']:.0f}x" if r["speedup"] is not None else "-"
        print(f"{r['program']:<26}{r['instructions']:>13,}{ref_s:>13}"
              f"{r['cython_s'] * 1e3:>11.3f}{ref_rate:>13}{r['cython_instr_per_s']:>13,.0f}"
              f"{speedup:>9}{r['simulate_s'] * 1e3:>15.3f}")
    gemm_times = {r["program"]: r["simulate_s"] for r in rows if r["program"].startswith("gemm")}
    print("compiled.simulate() of the GEMMs: " + ", ".join(
        f"{n}^3 {gemm_times[f'gemm {n}^3 fp16'] * 1e3:.2f} ms" for n in (512, 1024, 4096, 6144)))
    per_instr = {n: next(r["cython_cpu_ns_per_instr"] for r in rows
                         if r["program"] == f"gemm {n}^3 fp16") for n in SCALING}
    ratio = per_instr[SCALING[-1]] / per_instr[SCALING[0]]
    print("Cython CPU ns per instruction: "
          + ", ".join(f"{n}^3 {per_instr[n]:.1f}" for n in SCALING)
          + f"; {SCALING[-1]}^3 / {SCALING[0]}^3 = {ratio:.2f} (aim: <= 2)")
    slowest = min(rows, key=lambda r: r["cython_instr_per_s"])
    least = min((r for r in rows if r["speedup"] is not None), key=lambda r: r["speedup"])
    print(f"targets: >= 5 M instr/s (slowest: {slowest['program']}, "
          f"{slowest['cython_instr_per_s'] / 1e6:.1f} M/s); >= 50x the reference (least: "
          f"{least['program']}, {least['speedup']:.0f}x); 4096^3 simulate() < 50 ms "
          f"({gemm_times['gemm 4096^3 fp16'] * 1e3:.1f} ms)")

    result = {
        "benchmark": "sim_throughput",
        "target": TARGET,
        "model_version": MODEL_VERSION,
        "what": "fast.simulate vs reference.simulate, default schedules, no trace; "
                "program construction not timed; simulate_s: compiled.simulate() (check, "
                "bound and Cython engine)",
        "cython_repeats": args.repeats,
        "reference_limit": args.reference_limit,
        "rows": rows,
        "gemm_simulate_s": {str(n): gemm_times[f"gemm {n}^3 fp16"]
                            for n in (512, 1024, 4096, 6144)},
        "cpu_ns_per_instr": {str(n): per_instr[n] for n in SCALING},
        "scaling_ratio": ratio,
        "machine": f"{platform.machine()} {platform.processor() or ''} "
                   f"Python {platform.python_version()}".replace("  ", " "),
    }
    out = pathlib.Path(__file__).parent / "results" / "sim_throughput.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
