"""A static race check: do the flags order every pair of conflicting accesses?

Each pipe runs its instructions in order; ``SET_FLAG``/``WAIT_FLAG`` add happens-before
edges (the k-th wait on a (source, destination, event) key consumes the k-th set).
Tracking a vector clock per pipe, two accesses to overlapping on-chip bytes from
different pipes, at least one a write, must be ordered; otherwise some timing lets
them race. This holds for every timing, so it needs no timing model.
"""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np

from pypto.codegen.isa import Op, Pipe
from pypto.codegen.program import Program
from pypto.codegen.sync import accesses

_PIPES = len(Pipe)


def find_races(program: Program, limit: int = 10) -> list[str]:
    """Descriptions of up to ``limit`` unordered conflicting access pairs (empty: none)."""
    found: list[str] = []
    for core, stream in enumerate(program.cores):
        found += _core_races(stream, core, limit - len(found))
        if len(found) >= limit:
            break
    return found


def _core_races(stream: np.ndarray, core: int, limit: int) -> list[str]:
    clocks = np.zeros((_PIPES, _PIPES), dtype=np.int64)  # clocks[p] = pipe p's vector clock
    flags: dict[tuple[int, int, int], deque[np.ndarray]] = defaultdict(deque)
    # memory -> (start, end) -> pipe -> [(index, own clock) of last write, of last read]
    regions: dict[int, dict[tuple[int, int], dict[int, list]]] = defaultdict(dict)
    out: list[str] = []
    for i, row in enumerate(stream.tolist()):
        op, pipe = row[0], row[1]
        if op == Op.SET_FLAG:
            clocks[pipe, pipe] += 1
            flags[(pipe, row[2], row[3])].append(clocks[pipe].copy())
            continue
        if op == Op.WAIT_FLAG:
            queue = flags[(row[2], pipe, row[3])]
            if not queue:
                out.append(f"core {core}, instruction {i}: WAIT_FLAG with no earlier SET_FLAG")
                continue
            np.maximum(clocks[pipe], queue.popleft(), out=clocks[pipe])
            continue
        clocks[pipe, pipe] += 1
        acc = accesses(tuple(row))
        for mem, start, end, write in acc:
            for (s2, e2), per_pipe in regions[mem].items():
                if not (s2 < end and start < e2):
                    continue
                for q, (last_w, last_r) in per_pipe.items():
                    if q == pipe:
                        continue
                    for other, kind in ((last_w, "write"), (last_r if write else None, "read")):
                        if other is not None and clocks[pipe, q] < other[1]:
                            out.append(f"core {core}: {Pipe(pipe).name} instruction {i} "
                                       f"({'write' if write else 'read'}) races with "
                                       f"{Pipe(q).name} instruction {other[0]} ({kind}) on "
                                       f"bytes [{max(start, s2):#x}, {min(end, e2):#x})")
                            if len(out) >= limit:
                                return out
        for mem, start, end, write in acc:
            entry = regions[mem].setdefault((start, end), {}).setdefault(pipe, [None, None])
            entry[0 if write else 1] = (i, int(clocks[pipe, pipe]))
    return out
