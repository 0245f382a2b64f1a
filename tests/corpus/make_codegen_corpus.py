"""Writes ``tests/corpus/codegen_corpus.json``: random workloads of every family on every
target, each with schedules from its space (the default and random points), the
sha256 of the program's PTO assembly and its simulated cycles.

``tests/test_codegen_corpus.py`` lowers and times every entry again and requires the
same assembly and cycles: a restructuring must not change what the compiler emits or
what the simulator says. Regenerate only when a change is *meant* to change programs
or cycles (and say so in the commit):

    python tests/corpus/make_codegen_corpus.py

A timing-model change that must not change programs re-times the recorded entries
instead, and fails if any entry's program is no longer the recorded one:

    python tests/corpus/make_codegen_corpus.py --retime
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np

import pypto

OUT = Path(__file__).with_name("codegen_corpus.json")
SEED = 20261203
SCHEDULES_PER_WORKLOAD = 3
MAX_INSTRUCTIONS = 20_000  # keeps the check fast


def _kernels(rng: random.Random) -> list[tuple[str, Any, list[Any]]]:
    """(name, fn, argument specs) of random small kernels of every family."""
    out: list[tuple[str, Any, list[Any]]] = []
    f16, f32 = "float16", "float32"
    for _ in range(10):
        m, n, k = (rng.randint(1, 300) for _ in range(3))
        dt = rng.choice([f16, f16, f32, "int8"])
        ta, tb = rng.random() < 0.3, rng.random() < 0.3
        batch = rng.choice([(), (), (2,)])
        a = pypto.spec((*batch, *((k, m) if ta else (m, k))), dt)
        b = pypto.spec((*batch, *((n, k) if tb else (k, n))), dt)
        out.append(("matmul", lambda x, y, ta=ta, tb=tb: pypto.matmul(
            x, y, transpose_a=ta, transpose_b=tb), [a, b]))
    for _ in range(5):
        m, n, k = (rng.randint(8, 256) for _ in range(3))
        out.append(("matmul+bias+relu", lambda x, y, z: pypto.relu(pypto.matmul(x, y) + z),
                    [pypto.spec((m, k), f16), pypto.spec((k, n), f16), pypto.spec((n,), f16)]))
        out.append(("relu(matmul)", lambda x, y: pypto.relu(pypto.matmul(x, y)),
                    [pypto.spec((m, k), f16), pypto.spec((k, n), f16)]))
    for _ in range(3):
        m, n, k = (16 * rng.randint(1, 8) for _ in range(3))
        out.append(("matmul NZ", lambda x, y: pypto.matmul(x, y),
                    [pypto.spec((m, k), f16, layout="NZ"), pypto.spec((k, n), f16, layout="NZ")]))
        weight = pypto.tensor(np.ones((k, n)), dtype=f16)
        out.append(("matmul weight", lambda x, w=weight: pypto.matmul(x, w),
                    [pypto.spec((m, k), f16)]))
    for _ in range(6):
        shape = tuple(rng.randint(1, 300) for _ in range(rng.randint(1, 3)))
        dt = rng.choice([f16, f32])
        out.append(("add+relu", lambda x, y: pypto.relu(x + y),
                    [pypto.spec(shape, dt), pypto.spec(shape[-1:], dt)]))
        out.append(("softmax", lambda x: pypto.softmax(x), [pypto.spec(shape, dt)]))
        out.append(("layernorm", lambda x: pypto.layernorm(x), [pypto.spec(shape, dt)]))
        out.append(("exp-sum", lambda x: pypto.sum(pypto.exp(x), axis=-1),
                    [pypto.spec(shape, dt)]))
    for _ in range(6):
        nb, c, h, w = rng.randint(1, 2), rng.choice([3, 8, 16, 32]), rng.randint(4, 14), \
            rng.randint(4, 14)
        kk, r = rng.choice([8, 16, 32]), rng.choice([1, 3])
        stride, pad = rng.choice([1, 2]), rng.choice([0, 1])
        layout = rng.choice(["NHWC", "NCHW"])
        x = pypto.spec((nb, h, w, c) if layout == "NHWC" else (nb, c, h, w), f16,
                       layout=layout)
        wt = pypto.spec((kk, c, r, r), f16)
        out.append((f"conv2d {layout}", lambda a, b, s=stride, p=pad: pypto.relu(
            pypto.conv2d(a, b, stride=s, padding=p)), [x, wt]))
    return out


def _cycles(program: Any, wl: Any, target: Any) -> int:
    from pypto.sim.roofline import workload_bound
    from pypto.sim.timing import simulate

    return simulate(program, target, bound_cycles=workload_bound(wl, target)).cycles


def build() -> list[dict[str, Any]]:
    from pypto.codegen.lower import lower
    from pypto.schedule_space import space_for, validate
    from pypto.targets import available_targets, load_target

    rng = random.Random(SEED)
    entries = []
    targets = [load_target(t) for t in available_targets()]
    for name, fn, specs in _kernels(rng):
        target = rng.choice(targets)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled = pypto.kernel(fn).lower(*specs, target=target)
        for wl, default in zip(compiled.workloads, compiled.schedules):
            space = space_for(wl, target)
            schedules = [default] + [space.sample(rng) for _ in range(SCHEDULES_PER_WORKLOAD)]
            for schedule in schedules:
                if validate(wl, schedule, target):
                    continue  # only valid points (the corpus was recorded when a second
                    # check, since merged into the space's, had to accept them too)
                program = lower(wl, schedule, target)
                if program.num_instructions > MAX_INSTRUCTIONS:
                    continue
                entries.append({
                    "kernel": name,
                    "target": target.name,
                    "workload": wl.to_json(),
                    "schedule": json.loads(schedule.to_json()),
                    "asm_sha256": hashlib.sha256(program.asm().encode()).hexdigest(),
                    "instructions": program.num_instructions,
                    "cycles": _cycles(program, wl, target),
                })
    return entries


def retime(entries: list[dict[str, Any]]) -> int:
    """Re-simulate the recorded entries in place; how many changed cycles. Raises
    SystemExit if an entry no longer lowers to its recorded assembly."""
    from pypto.codegen.lower import lower
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Schedule
    from pypto.targets import load_target

    changed = 0
    for entry in entries:
        wl = Workload.from_json(entry["workload"])
        target = load_target(entry["target"])
        program = lower(wl, Schedule(entry["schedule"]), target)
        if hashlib.sha256(program.asm().encode()).hexdigest() != entry["asm_sha256"]:
            raise SystemExit(f"{entry['kernel']} {entry['schedule']}: the program changed; "
                             "regenerate the corpus without --retime")
        cycles = _cycles(program, wl, target)
        changed += cycles != entry["cycles"]
        entry["cycles"] = cycles
    return changed


def main() -> int:
    if sys.argv[1:] == ["--retime"]:
        entries = json.loads(OUT.read_text())["entries"]
        changed = retime(entries)
        OUT.write_text(json.dumps({"seed": SEED, "entries": entries}, indent=0,
                                  sort_keys=True) + "\n")
        print(f"re-timed {len(entries)} entries (same programs), {changed} changed cycles")
        return 0
    entries = build()
    OUT.write_text(json.dumps({"seed": SEED, "entries": entries}, indent=0, sort_keys=True)
                   + "\n")
    families = sorted({e["workload"]["family"] for e in entries})
    print(f"wrote {len(entries)} entries ({', '.join(families)}) to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
