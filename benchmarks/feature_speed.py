"""Cost-model featurization throughput (issue 13 item 2: >= 20,000 candidates/s).

For a GEMM, a decode GEMM, a conv and a softmax of the suite: 20,000 candidates (2,000
valid samples repeated), timed through ``featurize`` (knob extraction from ``Schedule``
values included). Prints a table; writes benchmarks/results/feature_speed.json.

    python benchmarks/feature_speed.py
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from suite import load_cases  # noqa: E402

from pypto.cost_model.features import featurize  # noqa: E402
from pypto.schedule_space import space_for  # noqa: E402

NAMES = ("square_1024", "llama7b_decode_b16", "resnet50_res2_3x3", "bert_softmax_s512")
RESULTS = Path(__file__).resolve().parent / "results" / "feature_speed.json"


def main() -> None:
    warnings.simplefilter("ignore")
    rows = []
    for case in load_cases(names=set(NAMES)):
        wl, target = case.workload, case.compiled.target
        space = space_for(wl, target)
        rng = random.Random(0)
        candidates = [space.sample(rng) for _ in range(2000)] * 10
        featurize(wl, candidates[:10], target, space)   # warm the per-workload caches
        t0 = time.perf_counter()
        x = featurize(wl, candidates, target, space)
        elapsed = time.perf_counter() - t0
        rows.append({"workload": case.name, "family": wl.family, "candidates": len(candidates),
                     "features": x.shape[1], "seconds": elapsed,
                     "per_s": len(candidates) / elapsed, "finite": bool(np.isfinite(x).all())})
        print(f"{case.name:24s} {wl.family:7s} {x.shape[1]:3d} features  "
              f"{len(candidates) / elapsed:>10,.0f} candidates/s", flush=True)
    out = {"benchmark": "feature_speed", "load_average": os.getloadavg()[0], "rows": rows}
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"load average {out['load_average']:.1f}; wrote {RESULTS}")


if __name__ == "__main__":
    main()
