"""How long the README example takes: trace + lower, and functional execution, of a
1024^3 fp16 GEMM on the simulated ascend910b. Prints a table; writes JSON to
benchmarks/results/example_gemm.json. Run: python benchmarks/example_gemm.py"""

from __future__ import annotations

import json
import pathlib
import platform
import statistics
import time

import numpy as np

import pypto

REPEATS = 7


def main() -> None:
    rng = np.random.default_rng(0)
    a = pypto.tensor(rng.random((1024, 1024)), dtype="float16")
    b = pypto.ones((1024, 1024), dtype="float16")
    lower_s, run_s, first_call_s = [], [], []
    for _ in range(REPEATS):
        kernel = pypto.kernel(lambda x, y: pypto.matmul(x, y))
        t0 = time.perf_counter()
        compiled = kernel.lower(a, b)
        t1 = time.perf_counter()
        compiled(a, b)
        t2 = time.perf_counter()
        lower_s.append(t1 - t0)
        run_s.append(t2 - t1)
        first_call_s.append(t2 - t0)
    result = {
        "benchmark": "example_gemm",
        "workload": "matmul 1024x1024x1024 float16, default schedule, ascend910b",
        "instructions": compiled.programs[0].num_instructions,
        "repeats": REPEATS,
        "median_trace_lower_s": statistics.median(lower_s),
        "median_execute_s": statistics.median(run_s),
        "median_first_call_s": statistics.median(first_call_s),
        "machine": f"{platform.machine()} {platform.python_version()}",
    }
    print(f"{'stage':<24}{'median s':>10}")
    print(f"{'trace + lower':<24}{result['median_trace_lower_s']:>10.3f}")
    print(f"{'execute (functional)':<24}{result['median_execute_s']:>10.3f}")
    print(f"{'first call (both)':<24}{result['median_first_call_s']:>10.3f}")
    print(f"instructions: {result['instructions']}")
    out = pathlib.Path(__file__).parent / "results" / "example_gemm.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
