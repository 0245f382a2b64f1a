"""Hazards in a timed trace: two instructions touching overlapping bytes, at least one
writing, that run at the same time. On chip: two pipes of one core, where the earlier
(in program order) has not completed when the later starts. In GM the same for two
pipes of one core, and two cores whose accesses to a common element (not both atomic
adds) overlap in time. Codegen must produce none.

The timed check sees only the timing it is given: a plain write on one core and an
atomic add on another that happen not to overlap still race, since their order is left
to chance (split-K's clearing of the output before the adds is the case); the
happens-before check (``races.find_races``) reports those, for every timing.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from pypto.codegen.isa import Pipe
from pypto.codegen.program import Program
from pypto.codegen.sync import accesses
from pypto.sim.gm_conflicts import conflicting_pairs, describe_pair, gm_accesses


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
                                out.append(f"core {core}: {Pipe(pipe).name} "
                                           f"{program.instruction_name(core, i)} "
                                           f"starts at cycle {start} while {Pipe(q).name} "
                                           f"{program.instruction_name(core, other[0])} runs "
                                           f"until {other[1]} on "
                                           f"overlapping bytes [{max(lo, lo2):#x}, "
                                           f"{min(hi, hi2):#x})")
                                if len(out) >= limit:
                                    return out
            for mem, lo, hi, write in acc:
                entry = regions[mem].setdefault((lo, hi), {}).setdefault(pipe, [None, None])
                entry[0 if write else 1] = (i, end)
    return out + _gm_hazards(program, trace, limit - len(out))


def _gm_hazards(program: Program, trace: np.ndarray, limit: int) -> list[str]:
    acc = gm_accesses(program)
    pairs = conflicting_pairs(acc, by_epoch=False)
    if not len(pairs) or limit <= 0:
        return []
    # the trace row of each access: rows sorted by (core, index), then offset per core
    order = np.lexsort((trace["index"], trace["core"]))
    rows = trace[order]
    first_row = np.searchsorted(rows["core"], np.arange(len(program.cores)))
    at = first_row[acc["core"]] + acc["index"]
    start, end = rows["start"][at], rows["end"][at]
    i, j = pairs.first, pairs.second
    same_core = acc["core"][i] == acc["core"][j]
    # one core: the earlier (i) still runs when j starts; two cores: they overlap at all
    clash = np.where(same_core, end[i] > start[j], (start[i] < end[j]) & (start[j] < end[i]))
    out = []
    for p in np.flatnonzero(clash)[:limit]:
        a, b = int(i[p]), int(j[p])
        out.append(f"GM hazard: cycles [{int(start[a])}, {int(end[a])}) and "
                   f"[{int(start[b])}, {int(end[b])}) overlap: "
                   f"{describe_pair(program, acc, pairs, int(p))}")
    return out
