"""GM accesses of a program, and the pairs of them that conflict.

Each GM operand of each instruction is one *access*: its core, instruction index and
pipe, its *epoch* (how many ``SYNC_ALL`` come before it on its core), its tensor, and
its kind: a read, a write, or an atomic add (a ``COPY`` into GM with ``F_ATOMIC``). Two
accesses *conflict* when they touch a common element of one tensor, at least one of
them writes, and they are not both atomic adds (adds commute, so their order does not
change the sum). Pairs on the same pipe of one core are left out: a pipe runs in order.
What orders a conflicting pair is the caller's question: ``races`` asks the flags and
the ``SYNC_ALL`` meetings, ``hazards`` a timed trace.

Element sets are compared exactly. An operand is ``rows`` x ``cols`` elements at
``addr + r * rs + c * cs``. Normalized (negative strides flipped, a zero stride
collapsing its dimension, the unit-stride dimension made the columns, rows that abut
merged into one), it is ``rows`` *runs* of ``cols`` consecutive elements, ``rs``
apart: *regular*, as every operand codegen emits is; otherwise its elements are taken
one by one. Two regular accesses whose runs are equally far apart (or one of which is
a single run) intersect iff some row difference ``d = i - k`` puts run ``i`` of the
one over run ``k`` of the other, a closed form over all pairs at once; any other pair
is intersected as two sorted lists of runs. So tiles side by side in one row of blocks,
whose bounding intervals interleave, are told apart.

Candidate pairs come from a sweep over bounding intervals, sorted per (tensor, epoch)
or per tensor: only writers are swept against the rest, so the reads of an input by
every core cost nothing. Example:

    >>> from pypto.codegen.isa import Mem, Op
    >>> from pypto.codegen.program import Operand, Program, StreamBuilder, Symbol
    >>> from pypto.ir.dtypes import float16
    >>> cores = [StreamBuilder(), StreamBuilder()]
    >>> for core, b in enumerate(cores):  # each core writes 16 rows; both write row 15
    ...     _ = b.emit(Op.COPY, Operand(Mem.GM, core * 15 * 64, 16, 64, 64, gm=0),
    ...                Operand(Mem.VECTOR, 0, 16, 64, 64), dtype=float16)
    >>> program = Program("p", "ascend910b", (Symbol("y", float16, (64, 64), "out"),),
    ...                   tuple(b.array() for b in cores))
    >>> acc = gm_accesses(program)
    >>> pairs = conflicting_pairs(acc)
    >>> [(int(acc["core"][i]), int(acc["core"][j])) for i, j in zip(pairs.first, pairs.second)]
    [(0, 1)]
    >>> describe_overlap(program, acc, pairs, 0)
    'y bytes [0x780, 0x800) (elements y[15, 0] to y[15, 63])'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pypto.codegen.isa import F_ATOMIC, OPERANDS, Mem, Op, Pipe
from pypto.codegen.program import Program

READ, WRITE, ATOMIC = 0, 1, 2
KIND_WORDS = ("a read", "a write", "an atomic add")

ACCESS = np.dtype([
    ("core", "i4"), ("index", "i8"), ("pipe", "u1"), ("epoch", "i8"), ("sym", "i8"),
    ("kind", "u1"),
    # normalized: ``rows`` runs of ``cols`` elements from ``start``, ``rs`` apart, each
    # run's elements ``cs`` apart (``cs == 1``: regular)
    ("start", "i8"), ("rows", "i8"), ("cols", "i8"), ("rs", "i8"), ("cs", "i8"),
    ("lo", "i8"), ("hi", "i8"),  # bounding interval of elements, [lo, hi)
])


@dataclass(frozen=True)
class Pairs:
    """Conflicting access pairs (indices into the access table, ``first`` the one earlier
    by core and index) and for each one overlapping run of elements, ``[lo, hi)``."""

    first: np.ndarray
    second: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    def __len__(self) -> int:
        return len(self.first)

    def select(self, keep: np.ndarray) -> Pairs:
        return Pairs(self.first[keep], self.second[keep], self.lo[keep], self.hi[keep])


_EMPTY = np.zeros(0, dtype=np.int64)
NO_PAIRS = Pairs(_EMPTY, _EMPTY, _EMPTY, _EMPTY)


def gm_accesses(program: Program) -> np.ndarray:
    """The program's GM accesses (``ACCESS`` records), by core, then instruction, then
    operand (d, a, b)."""
    lengths = [len(stream) for stream in program.cores]
    if not sum(lengths):
        return np.zeros(0, dtype=ACCESS)
    streams = np.concatenate(program.cores)
    core = np.repeat(np.arange(len(lengths)), lengths)
    first = np.repeat(np.cumsum(lengths) - lengths, lengths)
    index = np.arange(len(streams)) - first
    meets = np.cumsum(streams["op"] == Op.SYNC_ALL)  # a SYNC_ALL has no operands
    epoch = meets - np.concatenate(([0], meets))[first]
    parts = []
    for prefix in OPERANDS:
        rows = streams[f"{prefix}_rows"].astype(np.int64)
        cols = streams[f"{prefix}_cols"].astype(np.int64)
        sel = np.flatnonzero((streams[f"{prefix}_mem"] == Mem.GM) & (rows > 0) & (cols > 0))
        if not len(sel):
            continue
        s = streams[sel]
        part = np.zeros(len(sel), dtype=ACCESS)
        part["core"], part["index"], part["pipe"] = core[sel], index[sel], s["pipe"]
        part["epoch"], part["sym"] = epoch[sel], s["gm"]
        if prefix == "d":
            atomic = ((s["flags"] & F_ATOMIC) != 0) & (s["op"] == Op.COPY)
            part["kind"] = np.where(atomic, ATOMIC, WRITE)
        else:
            part["kind"] = READ
        _normalize(part, s[f"{prefix}_addr"], rows[sel], cols[sel], s[f"{prefix}_rs"],
                   s[f"{prefix}_cs"])
        parts.append(part)
    if not parts:
        return np.zeros(0, dtype=ACCESS)
    out = np.concatenate(parts)
    return out[np.lexsort((out["index"], out["core"]))]


def _normalize(part: np.ndarray, addr: np.ndarray, rows: np.ndarray, cols: np.ndarray,
               rs: np.ndarray, cs: np.ndarray) -> None:
    """Fill ``start .. hi`` of ``part``: the same element set as the operand, in the
    normal form of the module docstring."""
    start = addr.astype(np.int64)
    rs, cs = rs.astype(np.int64), cs.astype(np.int64)
    start = start + np.minimum(rs, 0) * (rows - 1) + np.minimum(cs, 0) * (cols - 1)
    rs, cs = np.abs(rs), np.abs(cs)
    rows, cols = np.where(rs == 0, 1, rows), np.where(cs == 0, 1, cols)
    cs, rs = np.where(cols == 1, 1, cs), np.where(rows == 1, 0, rs)
    swap = (cs != 1) & ((rs == 1) | (rows == 1))  # the contiguous dimension is the rows'
    rows, cols = np.where(swap, cols, rows), np.where(swap, rows, cols)
    rs, cs = np.where(swap, cs, rs), np.where(swap, rs, cs)
    cs, rs = np.where(cols == 1, 1, cs), np.where(rows == 1, 0, rs)
    abut = (cs == 1) & (rows > 1) & (rs == cols)  # one run
    cols, rows, rs = np.where(abut, rows * cols, cols), np.where(abut, 1, rows), \
        np.where(abut, 0, rs)
    part["start"], part["rows"], part["cols"], part["rs"], part["cs"] = start, rows, cols, rs, cs
    part["lo"] = start
    part["hi"] = start + (rows - 1) * rs + (cols - 1) * cs + 1


def conflicting_pairs(acc: np.ndarray, by_epoch: bool = True) -> Pairs:
    """The pairs of ``acc`` (from ``gm_accesses``) that conflict: a common element, one
    writing, not both atomic, not on one pipe of one core. ``by_epoch`` keeps only pairs
    in the same epoch (a ``SYNC_ALL`` orders the others)."""
    writer = acc["kind"] != READ
    if not writer.any():
        return NO_PAIRS
    group = acc["sym"] * (int(acc["epoch"].max()) + 1) + acc["epoch"] if by_epoch \
        else acc["sym"].copy()
    _, group = np.unique(group, return_inverse=True)
    length = acc["hi"] - acc["lo"]
    offset = acc["lo"] - acc["lo"].min()
    span = int(offset.max() + length.max()) + 2
    key = group * span + offset
    order = np.argsort(key, kind="stable")
    sorted_key = key[order]
    longest = np.zeros(int(group.max()) + 1, dtype=np.int64)
    np.maximum.at(longest, group, length)
    # a writer w meets x iff x.lo < w.hi and x.hi > w.lo, so x.lo > w.lo - longest
    w = np.flatnonzero(writer)
    base = group[w] * span
    left = np.searchsorted(sorted_key, base + np.maximum(offset[w] - longest[group[w]] + 1, 0))
    right = np.searchsorted(sorted_key, base + offset[w] + length[w])
    counts = right - left
    found = [_batch_pairs(acc, writer, order, w[part], left[part], counts[part])
             for part in np.split(np.arange(len(w)),
                                  np.searchsorted(np.cumsum(counts),
                                                  np.arange(_BATCH, counts.sum(), _BATCH)))]
    first, second, lo, hi = (np.concatenate([f[i] for f in found]) for i in range(4))
    by_pair = np.lexsort((second, first))
    return Pairs(first[by_pair], second[by_pair], lo[by_pair], hi[by_pair])


_BATCH = 1 << 20  # candidate pairs looked at in one go (bounds the memory used)


def _batch_pairs(acc: np.ndarray, writer: np.ndarray, order: np.ndarray, w: np.ndarray,
                 left: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, ...]:
    """The conflicting pairs of writers ``w`` with the ``counts[i]`` accesses from
    ``order[left[i]]`` on: (first, second, lo, hi)."""
    total = int(counts.sum())
    wi = np.repeat(w, counts)
    step = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
    xi = order[np.repeat(left, counts) + step]
    kind = acc["kind"]
    keep = (acc["hi"][xi] > acc["lo"][wi]) & (xi != wi)
    keep &= ~((kind[wi] == ATOMIC) & (kind[xi] == ATOMIC))
    keep &= ~(writer[xi] & (xi < wi))  # two writers: the pair once
    keep &= (acc["core"][wi] != acc["core"][xi]) | (acc["pipe"][wi] != acc["pipe"][xi])
    a, b = np.minimum(wi[keep], xi[keep]), np.maximum(wi[keep], xi[keep])
    lo, hi, hit = _intersect(acc, a, b)
    return a[hit], b[hit], lo[hit], hi[hit]


def _intersect(acc: np.ndarray, a: np.ndarray, b: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each pair (a, b) of accesses: do their element sets meet, and one run
    ``[lo, hi)`` where they do."""
    x, y = acc[a], acc[b]
    lo, hi = np.zeros(len(a), dtype=np.int64), np.zeros(len(a), dtype=np.int64)
    hit = np.zeros(len(a), dtype=bool)
    regular = (x["cs"] == 1) & (y["cs"] == 1)
    closed = regular & ((x["rows"] == 1) | (y["rows"] == 1) | (x["rs"] == y["rs"]))
    if closed.any():
        xc, yc = x[closed], y[closed]
        rs = np.where(xc["rows"] > 1, xc["rs"], np.where(yc["rows"] > 1, yc["rs"], 1))
        delta = xc["start"] - yc["start"]
        # run i of x over run k of y: -x.cols < delta + (i - k) * rs < y.cols
        d_lo = np.maximum((-xc["cols"] - delta) // rs + 1, 1 - yc["rows"])
        d_hi = np.minimum(-((delta - yc["cols"]) // rs) - 1, xc["rows"] - 1)
        met = d_lo <= d_hi
        i = np.maximum(d_lo, 0)
        at_x, at_y = xc["start"] + i * rs, yc["start"] + (i - d_lo) * rs
        hit[closed] = met
        lo[closed] = np.maximum(at_x, at_y)
        hi[closed] = np.minimum(at_x + xc["cols"], at_y + yc["cols"])
    for p in np.flatnonzero(~closed):
        found = _intersect_runs(_runs(x[p]), _runs(y[p]))
        if found is not None:
            hit[p] = True
            lo[p], hi[p] = found
    return lo, hi, hit


def _runs(access: np.void) -> tuple[np.ndarray, np.ndarray]:
    """One access's elements as sorted, disjoint runs ``[starts, ends)``: a run per row
    when regular, an element each otherwise."""
    rows, cols, rs, cs = (int(access[f]) for f in ("rows", "cols", "rs", "cs"))
    starts = access["start"] + np.arange(rows, dtype=np.int64) * rs
    if cs == 1:
        ends = starts + cols
    else:
        starts = (starts[:, None] + np.arange(cols, dtype=np.int64) * cs).ravel()
        ends = starts + 1
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    first = np.concatenate(([True], starts[1:] > ends[:-1]))
    last = np.concatenate((first[1:], [True]))
    return starts[first], ends[last]


def _intersect_runs(x: tuple[np.ndarray, np.ndarray], y: tuple[np.ndarray, np.ndarray]
                    ) -> tuple[int, int] | None:
    """One common run of two sorted, disjoint run lists, or ``None``."""
    (xs, xe), (ys, ye) = x, y
    j = np.searchsorted(ys, xe) - 1  # y's last run starting before each x run ends
    met = (j >= 0) & (ye[np.maximum(j, 0)] > xs)
    if not met.any():
        return None
    p = int(np.flatnonzero(met)[0])
    return max(int(xs[p]), int(ys[j[p]])), min(int(xe[p]), int(ye[j[p]]))


# -- reporting ---------------------------------------------------------------------------


def describe_access(program: Program, acc: np.ndarray, i: int) -> str:
    """``core 3 FIX instruction 120 (COPY.F16.F32.ATOMIC GM[out0][...], L0C[...])``."""
    from pypto.codegen.asm import print_instruction

    core, index = int(acc["core"][i]), int(acc["index"][i])
    try:
        text = print_instruction(program.cores[core][index], program.symbols,
                                 program.target).strip()
    except Exception:  # noqa: BLE001 - the report matters more than the listing
        text = "unprintable"
    return f"core {core} {Pipe(int(acc['pipe'][i])).name} " \
           f"{program.instruction_name(core, index)} ({text})"


def describe_overlap(program: Program, acc: np.ndarray, pairs: Pairs, p: int) -> str:
    """``out0 bytes [0x100, 0x200) (elements out0[0, 128] to out0[0, 255])``."""
    sym = program.symbols[int(acc["sym"][pairs.first[p]])]
    lo, hi = int(pairs.lo[p]), int(pairs.hi[p])
    size = sym.dtype.itemsize

    def element(e: int) -> str:
        if not sym.shape or not 0 <= e < sym.size:
            return f"{sym.name}[{e}]"
        return f"{sym.name}[{', '.join(str(int(c)) for c in np.unravel_index(e, sym.shape))}]"

    return f"{sym.name} bytes [{lo * size:#x}, {hi * size:#x}) (elements {element(lo)} " \
           f"to {element(hi - 1)})"


def describe_pair(program: Program, acc: np.ndarray, pairs: Pairs, p: int) -> str:
    """``<first access>, a write, and <second access>, a read, both touch <bytes>``."""
    i, j = int(pairs.first[p]), int(pairs.second[p])
    return (f"{describe_access(program, acc, i)}, {KIND_WORDS[int(acc['kind'][i])]}, and "
            f"{describe_access(program, acc, j)}, {KIND_WORDS[int(acc['kind'][j])]}, both "
            f"touch {describe_overlap(program, acc, pairs, p)}")
