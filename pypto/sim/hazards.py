"""Hazards in a timed trace: two instructions on different pipes of one core touching
overlapping on-chip bytes, at least one writing, where the earlier (in program order)
has not completed when the later starts. Codegen must produce none."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from pypto.codegen.isa import Pipe
from pypto.codegen.program import Program
from pypto.codegen.sync import accesses


def find_hazards(program: Program, trace: np.ndarray, limit: int = 20) -> list[str]:
    """Up to ``limit`` hazards of ``program`` under the timing in ``trace``."""
    out: list[str] = []
    for core, stream in enumerate(program.cores):
        times = trace[trace["core"] == core]
        times = times[np.argsort(times["index"], kind="stable")]
        regions: dict[int, dict[tuple[int, int], dict[int, list]]] = defaultdict(dict)
        for i, row in enumerate(stream.tolist()):
            pipe = row[1]
            start, end = int(times["start"][i]), int(times["end"][i])
            acc = accesses(tuple(row))
            for mem, lo, hi, write in acc:
                for (lo2, hi2), per_pipe in regions[mem].items():
                    if not (lo2 < hi and lo < hi2):
                        continue
                    for q, (last_w, last_r) in per_pipe.items():
                        if q == pipe:
                            continue
                        for other in (last_w, last_r if write else None):
                            if other is not None and other[1] > start:
                                out.append(f"core {core}: {Pipe(pipe).name} instruction {i} "
                                           f"starts at cycle {start} while {Pipe(q).name} "
                                           f"instruction {other[0]} runs until {other[1]} on "
                                           f"overlapping bytes [{max(lo, lo2):#x}, "
                                           f"{min(hi, hi2):#x})")
                                if len(out) >= limit:
                                    return out
            for mem, lo, hi, write in acc:
                entry = regions[mem].setdefault((lo, hi), {}).setdefault(pipe, [None, None])
                entry[0 if write else 1] = (i, end)
    return out
