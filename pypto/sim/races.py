"""A static race check: is every pair of conflicting accesses ordered, on chip and in GM?

Each pipe runs its instructions in order; ``SET_FLAG``/``WAIT_FLAG`` add happens-before
edges (the k-th wait on a (source, destination, event) key consumes the k-th set), and
``BARRIER`` or ``SYNC_ALL`` drains every pipe, so all that came before on the core
happens before all that comes after. Tracking a vector clock per pipe, two accesses to
overlapping bytes from different pipes of one core, at least one a write, must be
ordered. Across cores only ``SYNC_ALL`` orders: every core's instructions before the
k-th meeting happen before every core's instructions after it, so two accesses of
different cores to a common GM element, at least one a write and not both atomic adds,
race exactly when no ``SYNC_ALL`` separates them (``gm_conflicts`` finds the pairs).
This holds for every timing, so it needs no timing model.
"""

from __future__ import annotations

from collections import defaultdict, deque

import numpy as np

from pypto.codegen.isa import Mem, Op, Pipe
from pypto.codegen.program import Program
from pypto.codegen.sync import accesses
from pypto.sim.gm_conflicts import conflicting_pairs, describe_pair, gm_accesses

_PIPES = len(Pipe)


def find_races(program: Program, limit: int = 10) -> list[str]:
    """Descriptions of up to ``limit`` unordered conflicting access pairs (empty: none):
    on-chip ones core by core, then those in GM."""
    found: list[str] = []
    gm_clocks: list[dict[int, np.ndarray]] = []
    for core in range(len(program.cores)):
        races, clocks = _core_races(program, core, limit - len(found))
        found += races
        gm_clocks.append(clocks)
    if len(found) < limit:
        found += _gm_races(program, gm_clocks, limit - len(found))
    return found


def _gm_races(program: Program, gm_clocks: list[dict[int, np.ndarray]], limit: int) -> list[str]:
    """Unordered conflicting GM pairs: of two cores in one epoch, or of two pipes of one
    core that the flags leave unordered."""
    acc = gm_accesses(program)
    pairs = conflicting_pairs(acc, by_epoch=True)
    if not len(pairs):
        return []
    first, second = pairs.first, pairs.second  # first: earlier on its core when they share it
    same_core = acc["core"][first] == acc["core"][second]
    ordered = np.zeros(len(pairs), dtype=bool)
    for p in np.flatnonzero(same_core):
        i, j = first[p], second[p]
        clocks = gm_clocks[int(acc["core"][i])]
        pipe = int(acc["pipe"][i])
        # i happens before j iff j's pipe knew of i's event when j ran
        ordered[p] = clocks[int(acc["index"][j])][pipe] >= clocks[int(acc["index"][i])][pipe]
    out = []
    for p in np.flatnonzero(~ordered)[:limit]:
        where = "a pipe of the same core with no flag ordering them" if same_core[p] \
            else "another core with no SYNC_ALL between them"
        out.append(f"GM race with {where}: {describe_pair(program, acc, pairs, int(p))}")
    return out


def _core_races(program: Program, core: int, limit: int
                ) -> tuple[list[str], dict[int, np.ndarray]]:
    """Up to ``limit`` on-chip races of one core, and the vector clock (of its own pipe)
    at each instruction that touches GM."""
    stream, name = program.cores[core], program.instruction_name
    clocks = np.zeros((_PIPES, _PIPES), dtype=np.int64)  # clocks[p] = pipe p's vector clock
    flags: dict[tuple[int, int, int], deque[np.ndarray]] = defaultdict(deque)
    # memory -> (start, end) -> pipe -> [(index, own clock) of last write, of last read]
    regions: dict[int, dict[tuple[int, int], dict[int, list]]] = defaultdict(dict)
    touches_gm = ((stream["d_mem"] == Mem.GM) | (stream["a_mem"] == Mem.GM)
                  | (stream["b_mem"] == Mem.GM)).tolist()
    gm_clocks: dict[int, np.ndarray] = {}
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
                if len(out) < limit:
                    out.append(f"core {core}, {name(core, i)}: WAIT_FLAG with no earlier "
                               "SET_FLAG")
                continue
            np.maximum(clocks[pipe], queue.popleft(), out=clocks[pipe])
            continue
        if op in (Op.BARRIER, Op.SYNC_ALL):  # every pipe drains: all knows all before
            clocks[:] = clocks.max(axis=0)
            continue
        clocks[pipe, pipe] += 1
        if touches_gm[i]:
            gm_clocks[i] = clocks[pipe].copy()
        if len(out) >= limit:
            continue  # only the GM clocks are still wanted
        acc = accesses(tuple(row))
        for mem, start, end, write in acc:
            for (s2, e2), per_pipe in regions[mem].items():
                if not (s2 < end and start < e2):
                    continue
                for q, (last_w, last_r) in per_pipe.items():
                    if q == pipe:
                        continue
                    for other, kind in ((last_w, "write"), (last_r if write else None, "read")):
                        if other is not None and clocks[pipe, q] < other[1] and len(out) < limit:
                            out.append(f"core {core}: {Pipe(pipe).name} {name(core, i)} "
                                       f"({'write' if write else 'read'}) races with "
                                       f"{Pipe(q).name} {name(core, other[0])} ({kind}) on "
                                       f"{_memory(program, mem)} bytes "
                                       f"[{max(start, s2):#x}, {min(end, e2):#x})")
        for mem, start, end, write in acc:
            entry = regions[mem].setdefault((start, end), {}).setdefault(pipe, [None, None])
            entry[0 if write else 1] = (i, int(clocks[pipe, pipe]))
    return out, gm_clocks


def _memory(program: Program, code: int) -> str:
    """The name ``program``'s target gives memory ``code`` (by role for other targets)."""
    from pypto.codegen.memories import for_target

    return for_target(program.target).name(code)
