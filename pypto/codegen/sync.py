"""The synchronization pass: from each instruction's on-chip reads and writes, find the
cross-pipe dependencies (read-after-write, write-after-read, write-after-write on
overlapping bytes) and insert ``SET_FLAG``/``WAIT_FLAG`` pairs so that pipes running
concurrently never race. Within one pipe, instructions run in order and need no flags.

Flags are counting semaphores per (source pipe, destination pipe, event id); event ids
are handed out round-robin from the target's ``event_ids`` per pipe pair.

``insert_sync`` runs the compiled pass (``_sync.pyx``), or ``insert_sync_reference``,
the readable specification here, when ``PYPTO_IMPL=python`` asks for it or the
extension is not built (``pypto.native``); the two give byte-identical streams
(``tests/test_sync.py``).

Example:
    >>> import numpy as np
    >>> from pypto.codegen.isa import INSTR, Mem, Op
    >>> from pypto.codegen.program import Operand, StreamBuilder
    >>> from pypto.ir.dtypes import float16
    >>> b = StreamBuilder()
    >>> l1, gm = Operand(Mem.STAGE, 0, 16, 16, 16), Operand(Mem.GM, 0, 16, 16, 16, gm=0)
    >>> _ = b.emit(Op.COPY, l1, gm, dtype=float16)
    >>> _ = b.emit(Op.COPY, Operand(Mem.LEFT, 0, 16, 16, 16), l1, dtype=float16)
    >>> [Op(op).name for op in insert_sync(b.array(), 8)["op"]]
    ['COPY', 'SET_FLAG', 'WAIT_FLAG', 'COPY']
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict, deque
from types import ModuleType
from typing import overload

import numpy as np

from pypto import native
from pypto.codegen.isa import F_ACCUMULATE, INSTR, READS_DESTINATION, Mem, Op, Pipe
from pypto.errors import PyptoError
from pypto.ir.dtypes import BY_CODE

_F = {name: i for i, name in enumerate(INSTR.names)}
_ITEMSIZE = {code: dtype.itemsize for code, dtype in BY_CODE.items()}
BUCKET = 2048  # bytes: the granularity of the region index


def _extent(row: tuple, prefix: str, code: int) -> tuple[int, int, int] | None:
    mem = row[_F[prefix + "_mem"]]
    if mem in (Mem.NONE, Mem.GM):
        return None
    rows, cols = row[_F[prefix + "_rows"]], row[_F[prefix + "_cols"]]
    if rows <= 0 or cols <= 0:
        return None
    rs, cs = row[_F[prefix + "_rs"]], row[_F[prefix + "_cs"]]
    start = row[_F[prefix + "_addr"]]
    span = (rows - 1) * rs + (cols - 1) * cs + 1
    return mem, start, start + span * _ITEMSIZE[code]


def accesses(row: tuple) -> list[tuple[int, int, int, bool]]:
    """(memory, start byte, end byte, is_write) of one instruction's on-chip operands."""
    out = []
    dtype, sdtype = row[_F["dtype"]], row[_F["sdtype"]]
    d = _extent(row, "d", dtype)
    for prefix in ("a", "b"):
        e = _extent(row, prefix, sdtype)
        if e is not None:
            out.append((*e, False))
    if d is not None:
        op = row[_F["op"]]
        if (op == Op.MMAD and row[_F["flags"]] & F_ACCUMULATE) or op in READS_DESTINATION:
            out.append((*d, False))
        out.append((*d, True))
    return out


def _extension() -> ModuleType | None:
    """The compiled pass, or ``None`` for the specification (see ``pypto.native``)."""
    return native.extension("pypto.codegen._sync", stacklevel=3)


@overload
def insert_sync(stream: np.ndarray, event_ids: int) -> np.ndarray: ...
@overload
def insert_sync(stream: list[tuple], event_ids: int) -> list[tuple]: ...


def insert_sync(stream: np.ndarray | list[tuple], event_ids: int) -> np.ndarray | list[tuple]:
    """``stream`` (one core's instructions) with the flags their dependencies need.

    ``stream`` is an ``INSTR`` array (then an array is returned) or a list of row tuples
    in ``INSTR`` field order (then a list). The compiled pass runs when it is built and
    the stream is within the domain it computes exactly; otherwise the reference.
    """
    ext = _extension()
    if isinstance(stream, np.ndarray):
        out = ext.insert_sync(stream, event_ids) if ext is not None and \
            stream.dtype == INSTR else None
        if out is not None:
            return out
        rows = insert_sync_reference(stream.tolist(), event_ids)
        return np.array(rows, dtype=INSTR) if rows else np.zeros(0, dtype=INSTR)
    if ext is not None:
        packed = ext.pack(list(stream))
        out = ext.insert_sync(packed, event_ids) if packed is not None else None
        if out is not None:
            return out.tolist()
    return insert_sync_reference(stream, event_ids)


def insert_sync_reference(rows: list[tuple], event_ids: int) -> list[tuple]:
    """``rows`` (one core's instructions, tuples in ``INSTR`` field order) with the flags
    their dependencies need: the specification of the compiled pass."""
    pipe_col = _F["pipe"]
    regions: dict[int, dict[tuple[int, int], dict[int, list[int]]]] = defaultdict(dict)
    # memory -> address bucket -> regions touching it, so a lookup scans only neighbours
    buckets: dict[int, dict[int, set[tuple[int, int]]]] = defaultdict(dict)
    synced: dict[tuple[int, int], int] = {}
    sets_after: dict[int, list[tuple[int, int]]] = defaultdict(list)
    waits_before: dict[int, list[tuple[int, int]]] = defaultdict(list)
    wait_positions: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i, row in enumerate(rows):
        p = row[pipe_col]
        acc = accesses(row)
        need: dict[int, int] = {}
        for mem, start, end, write in acc:
            near: set[tuple[int, int]] = set()
            mem_buckets = buckets[mem]
            for b in range(start // BUCKET, (end - 1) // BUCKET + 1):
                found = mem_buckets.get(b)
                if found:
                    near |= found
            mem_regions = regions[mem]
            for s2, e2 in near:
                if s2 < end and start < e2:
                    for q, (w, r) in mem_regions[(s2, e2)].items():
                        if q != p:
                            dep = max(w, r) if write else w
                            if dep > need.get(q, -1):
                                need[q] = dep
        for q, j in sorted(need.items()):
            if j > synced.get((q, p), -1):
                waits = wait_positions[(q, p)]
                open_waits = waits[bisect_right(waits, j):]
                if len(open_waits) >= event_ids:
                    # Out of event ids: signal later, once an earlier flag is consumed. Waiting
                    # for more than needed is safe; running out of ids is not.
                    j = open_waits[len(open_waits) - event_ids]
                sets_after[j].append((q, p))
                waits_before[i].append((q, p))
                waits.append(i)
                synced[(q, p)] = j
        for mem, start, end, write in acc:
            per_region = regions[mem].get((start, end))
            if per_region is None:
                per_region = regions[mem][(start, end)] = {}
                for b in range(start // BUCKET, (end - 1) // BUCKET + 1):
                    buckets[mem].setdefault(b, set()).add((start, end))
            entry = per_region.setdefault(p, [-1, -1])
            entry[0 if write else 1] = i
    return _emit(rows, sets_after, waits_before, event_ids)


def _flag_row(op: Op, pipe: int, pipe2: int, event: int) -> tuple:
    row = [0] * len(INSTR.names)
    row[_F["op"]], row[_F["pipe"]], row[_F["pipe2"]], row[_F["event"]] = int(op), pipe, pipe2, event
    row[_F["gm"]], row[_F["imm"]] = -1, 0.0
    return tuple(row)


def _emit(rows: list[tuple], sets_after: dict[int, list[tuple[int, int]]],
          waits_before: dict[int, list[tuple[int, int]]], event_ids: int) -> list[tuple]:
    out: list[tuple] = []
    free: dict[tuple[int, int], deque[int]] = defaultdict(lambda: deque(range(event_ids)))
    pending: dict[tuple[int, int], deque[int]] = defaultdict(deque)
    for i, row in enumerate(rows):
        for q, p in waits_before.get(i, ()):
            ev = pending[(q, p)].popleft()
            out.append(_flag_row(Op.WAIT_FLAG, p, q, ev))
            free[(q, p)].append(ev)
        out.append(row)
        for q, p in sets_after.get(i, ()):
            if not free[(q, p)]:
                raise PyptoError(f"internal codegen error: more than {event_ids} flags "
                                 f"outstanding from {Pipe(q).name} to {Pipe(p).name}")
            ev = free[(q, p)].popleft()
            pending[(q, p)].append(ev)
            out.append(_flag_row(Op.SET_FLAG, q, p, ev))
    return out
