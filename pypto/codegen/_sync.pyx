# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Compiled code generation: the synchronization pass (``sync.insert_sync`` calls
``insert_sync`` here), and the stream builder's hot path (``StreamBuilder.emit`` is
``emit`` here, ``StreamBuilder.array`` packs with ``pack``). Each gives exactly what
its Python specification gives; ``tests/test_sync.py`` checks that byte for byte.

The pass is a port of ``sync.insert_sync_reference`` (the specification) that gives byte-identical
output. The reference keeps, per memory and byte region, the last instruction of each
pipe that read and that wrote it, and asks which regions overlap an access. Because
instruction indices only grow, "the latest reader (writer) of pipe q among the regions
that overlap [start, end)" is "the largest index painted over any byte of [start, end)"
when every access paints its bytes with its index. So this pass keeps, per pipe and
kind (read / write), a segment tree over the stream's distinct (memory, address)
boundaries with two operations: paint a range with the current index, and take the
maximum over a range. Both are O(log n), where the reference scans every recorded
region near the access.

The flag placement (round-robin event ids per pipe pair, a set moved later when ids run
out) and the emission of ``SET_FLAG``/``WAIT_FLAG`` rows then follow the reference line
by line, over C arrays instead of dictionaries.

``insert_sync`` returns ``None`` for a stream outside the domain computed exactly here
(pipes beyond ``Pipe``, dtype codes the reference has no size for, regions of no bytes
or with strides so large a 64-bit end could overflow, event ids outside 1..127, and
anything else the reference would raise on); the caller then runs the reference.
"""

cimport numpy as cnp
from cpython.float cimport PyFloat_AsDouble, PyFloat_Check
from cpython.long cimport PyLong_Check
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport (INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t,
                          uint16_t, uint64_t)
from libc.stdlib cimport free, malloc, qsort, realloc
from libc.string cimport memcpy, memset

import numpy as np

cnp.import_array()

cdef extern from "Python.h":
    long long PyLong_AsLongLongAndOverflow(object, int*) except? -1

include "_constants.pxi"   # NUM_PIPES, MEM_GM, OP_MMAD, ITEMSIZE...: pypto's values

cdef enum:
    NPAIRS = NUM_PIPES * NUM_PIPES
    MAX_EVENT_IDS = 127  # the event field is an int8

# Beyond these an end address (start + span * itemsize) could leave int64.
cdef int64_t ADDR_LIMIT = 1LL << 44
cdef int64_t STRIDE_LIMIT = 1LL << 28

from pypto.codegen.instr cimport Instr  # pypto.codegen.isa.INSTR


def _check_layout():
    """Raise ImportError unless ``Instr`` matches ``INSTR`` (a stale build then falls back
    to the reference pass instead of misreading records)."""
    from pypto.codegen.isa import INSTR

    cdef Instr i
    cdef char* b = <char*>&i
    got = {"op": <char*>&i.op - b, "pipe": <char*>&i.pipe - b, "pipe2": <char*>&i.pipe2 - b,
           "event": <char*>&i.event - b, "dtype": <char*>&i.dtype - b,
           "sdtype": <char*>&i.sdtype - b, "flags": <char*>&i.flags - b,
           "gm": <char*>&i.gm - b, "imm": <char*>&i.imm - b,
           "d_mem": <char*>&i.d_mem - b, "d_addr": <char*>&i.d_addr - b,
           "d_rows": <char*>&i.d_rows - b, "d_cols": <char*>&i.d_cols - b,
           "d_rs": <char*>&i.d_rs - b, "d_cs": <char*>&i.d_cs - b,
           "a_mem": <char*>&i.a_mem - b, "a_addr": <char*>&i.a_addr - b,
           "a_rows": <char*>&i.a_rows - b, "a_cols": <char*>&i.a_cols - b,
           "a_rs": <char*>&i.a_rs - b, "a_cs": <char*>&i.a_cs - b,
           "b_mem": <char*>&i.b_mem - b, "b_addr": <char*>&i.b_addr - b,
           "b_rows": <char*>&i.b_rows - b, "b_cols": <char*>&i.b_cols - b,
           "b_rs": <char*>&i.b_rs - b, "b_cs": <char*>&i.b_cs - b}
    want = {name: INSTR.fields[name][1] for name in INSTR.names}
    if (got, sizeof(Instr)) != (want, INSTR.itemsize):
        raise ImportError("pypto.codegen._sync was built for another INSTR layout; "
                          "rebuild it with `pip install -e .`")


_check_layout()


# NumPy advises the kernel to back arrays of 4 MiB and more with huge pages. Where the
# kernel then compacts memory while faulting (THP defrag "madvise", as on the benchmark
# machine), first touching such an array is several times slower: 131 MB took 0.89 s
# instead of 0.13 s there. These arrays are written once, front to back, and read the
# same way, so they are allocated without that advice.
_set_huge_pages = getattr((getattr(np, "_core", None) or np.core).multiarray,
                          "_set_madvise_hugepage", None)


cdef cnp.ndarray new_array(Py_ssize_t n, object dtype):
    """An array of ``n`` records of ``dtype``, uninitialised, on ordinary pages."""
    if _set_huge_pages is None or n * dtype.itemsize < (4 << 20):
        return np.empty(n, dtype=dtype)
    before = _set_huge_pages(False)
    try:
        return np.empty(n, dtype=dtype)
    finally:
        _set_huge_pages(before)


def empty_stream(Py_ssize_t n):
    """An uninitialised ``INSTR`` array of ``n`` records, for compiled emitters."""
    from pypto.codegen.isa import INSTR

    return new_array(n, INSTR)


# -- accesses ---------------------------------------------------------------------------

cdef struct Access:
    int64_t start       # byte address, then (after compression) the first leaf
    int64_t end         # one past the last byte, then one past the last leaf
    uint8_t mem
    uint8_t write


cdef inline int itemsize(uint8_t code) noexcept nogil:
    # sync._ITEMSIZE; 0 for a code the reference has no size for
    return <int>ITEMSIZE[code] if code < NUM_DTYPES else 0


cdef inline int extent(uint8_t mem, int64_t addr, int32_t rows, int32_t cols, int64_t rs,
                       int64_t cs, uint8_t code, Access* out) noexcept nogil:
    """1: ``out`` holds the operand's bytes; 0: no on-chip access; -1: outside the domain."""
    if mem == MEM_NONE or mem == MEM_GM or rows <= 0 or cols <= 0:
        return 0
    cdef int size = itemsize(code)
    if size == 0 or addr >= ADDR_LIMIT or addr <= -ADDR_LIMIT or rs >= STRIDE_LIMIT \
            or rs <= -STRIDE_LIMIT or cs >= STRIDE_LIMIT or cs <= -STRIDE_LIMIT:
        return -1
    cdef int64_t span = (rows - 1) * rs + (cols - 1) * cs + 1
    if span <= 0:
        # the reference's bucket index treats such a region unlike an empty range
        return -1
    out.mem = mem
    out.start = addr
    out.end = addr + span * size
    return 1


cdef int64_t collect(const Instr* code, int64_t n, Access* acc, int64_t* first) noexcept nogil:
    """Each row's accesses in ``sync.accesses`` order (``first[i]`` .. ``first[i + 1]``);
    the number of accesses, or -1 outside the domain."""
    cdef int64_t i, k = 0
    cdef int r
    cdef const Instr* row
    for i in range(n):
        first[i] = k
        row = &code[i]
        if row.pipe >= NUM_PIPES:
            return -1
        r = extent(row.a_mem, row.a_addr, row.a_rows, row.a_cols, row.a_rs, row.a_cs,
                   row.sdtype, &acc[k])
        if r < 0:
            return -1
        if r:
            acc[k].write = 0
            k += 1
        r = extent(row.b_mem, row.b_addr, row.b_rows, row.b_cols, row.b_rs, row.b_cs,
                   row.sdtype, &acc[k])
        if r < 0:
            return -1
        if r:
            acc[k].write = 0
            k += 1
        r = extent(row.d_mem, row.d_addr, row.d_rows, row.d_cols, row.d_rs, row.d_cs,
                   row.dtype, &acc[k])
        if r < 0:
            return -1
        if r:
            if (row.op == OP_MMAD and row.flags & F_ACCUMULATE) or row.op == OP_VSEL:
                acc[k + 1] = acc[k]
                acc[k].write = 0
                k += 1
            acc[k].write = 1
            k += 1
    first[n] = k
    return k


# -- coordinate compression: (memory, address) -> rank among the stream's boundaries -----

cdef struct Key:
    int64_t addr
    int64_t mem         # wide, so that the struct has no padding to hash


cdef inline uint64_t mix(const Key* k) noexcept nogil:
    cdef uint64_t x = <uint64_t>k.addr * 0x9E3779B97F4A7C15ULL + <uint64_t>k.mem
    x ^= x >> 31
    x *= 0xBF58476D1CE4E5B9ULL
    x ^= x >> 29
    return x


cdef int compare_keys(const void* a, const void* b) noexcept nogil:
    cdef const Key* x = <const Key*>a
    cdef const Key* y = <const Key*>b
    if x.mem != y.mem:
        return -1 if x.mem < y.mem else 1
    if x.addr != y.addr:
        return -1 if x.addr < y.addr else 1
    return 0


cdef struct KeyTable:
    Key* keys           # distinct keys, in insertion order, then sorted
    int64_t count
    int64_t* slots      # open addressing: key index + 1, 0 = empty
    int64_t* rank       # by key index (insertion order): rank after sorting
    uint64_t mask


cdef int64_t table_find(KeyTable* t, const Key* k, bint add) noexcept nogil:
    """The insertion index of ``k`` (added when ``add``; -1 when absent)."""
    cdef uint64_t h = mix(k) & t.mask
    cdef int64_t s
    while True:
        s = t.slots[h]
        if s == 0:
            if not add:
                return -1
            t.keys[t.count] = k[0]
            t.count += 1
            t.slots[h] = t.count
            return t.count - 1
        if t.keys[s - 1].addr == k.addr and t.keys[s - 1].mem == k.mem:
            return s - 1
        h = (h + 1) & t.mask


cdef int table_grow(KeyTable* t) noexcept nogil:
    """Double the slots (kept at most half full), re-hashing the keys."""
    cdef uint64_t cap = (t.mask + 1) * 2, h
    cdef int64_t i
    cdef int64_t* slots = <int64_t*>malloc(sizeof(int64_t) * cap)
    if slots == NULL:
        return -1
    memset(slots, 0, sizeof(int64_t) * cap)
    free(t.slots)
    t.slots = slots
    t.mask = cap - 1
    for i in range(t.count):
        h = mix(&t.keys[i]) & t.mask
        while t.slots[h] != 0:
            h = (h + 1) & t.mask
        t.slots[h] = i + 1
    return 0


cdef int64_t compress(Access* acc, int64_t nacc) noexcept nogil:
    """Replace byte addresses by ranks of the distinct (memory, address) boundaries, so
    that a range of one memory is a leaf range [start, end). Returns how many distinct
    boundaries there are, -1 when out of memory."""
    cdef KeyTable t
    cdef uint64_t cap = 1024   # grown as needed: streams have few distinct boundaries
    cdef int64_t i, j, nkeys = 2 * nacc
    cdef Key k
    cdef Key* order
    t.mask = cap - 1
    t.count = 0
    t.keys = <Key*>malloc(sizeof(Key) * (nkeys + 1))
    t.slots = <int64_t*>malloc(sizeof(int64_t) * cap)
    t.rank = NULL
    order = NULL
    if t.keys == NULL or t.slots == NULL:
        free(t.keys)
        free(t.slots)
        return -1
    memset(t.slots, 0, sizeof(int64_t) * cap)
    for i in range(nacc):
        if <uint64_t>(t.count + 2) * 2 > t.mask and table_grow(&t) < 0:
            free(t.keys)
            free(t.slots)
            return -1
        k.mem = acc[i].mem
        k.addr = acc[i].start
        table_find(&t, &k, True)
        k.addr = acc[i].end
        table_find(&t, &k, True)
    order = <Key*>malloc(sizeof(Key) * (t.count + 1))
    t.rank = <int64_t*>malloc(sizeof(int64_t) * (t.count + 1))
    if order == NULL or t.rank == NULL:
        free(t.keys)
        free(t.slots)
        free(order)
        free(t.rank)
        return -1
    memcpy(order, t.keys, sizeof(Key) * t.count)
    qsort(order, t.count, sizeof(Key), compare_keys)
    for i in range(t.count):
        t.rank[table_find(&t, &order[i], False)] = i
    for i in range(nacc):
        k.mem = acc[i].mem
        k.addr = acc[i].start
        j = t.rank[table_find(&t, &k, False)]
        k.addr = acc[i].end
        acc[i].end = t.rank[table_find(&t, &k, False)]
        acc[i].start = j
    free(t.keys)
    free(t.slots)
    free(t.rank)
    free(order)
    return t.count


# -- paint / range-maximum trees ---------------------------------------------------------
# Painting always uses the largest index so far, so "paint" is "raise to at least": a
# node keeps ``top`` (the largest paint anywhere below it, itself included) and ``tag``
# (the largest paint covering all of it); a range's maximum is the ``top`` of the nodes
# covering it and the ``tag`` of their ancestors, which lie on the two boundary paths.

cdef inline void paint(int64_t* top, int64_t* tag, int64_t leaves, int64_t lo, int64_t hi,
                       int64_t value) noexcept nogil:
    cdef int64_t l = lo + leaves, r = hi + leaves, a = (lo + leaves) >> 1
    cdef int64_t b = (hi - 1 + leaves) >> 1
    while l < r:
        if l & 1:
            tag[l] = value
            top[l] = value
            l += 1
        if r & 1:
            r -= 1
            tag[r] = value
            top[r] = value
        l >>= 1
        r >>= 1
    while a > 0:
        top[a] = value
        a >>= 1
    while b > 0:
        top[b] = value
        b >>= 1


cdef inline int64_t highest(const int64_t* top, const int64_t* tag, int64_t leaves,
                            int64_t lo, int64_t hi) noexcept nogil:
    cdef int64_t best = -1
    cdef int64_t l = lo + leaves, r = hi + leaves, a = (lo + leaves) >> 1
    cdef int64_t b = (hi - 1 + leaves) >> 1
    while l < r:
        if l & 1:
            if top[l] > best:
                best = top[l]
            l += 1
        if r & 1:
            r -= 1
            if top[r] > best:
                best = top[r]
        l >>= 1
        r >>= 1
    while a > 0:
        if tag[a] > best:
            best = tag[a]
        a >>= 1
    while b > 0:
        if tag[b] > best:
            best = tag[b]
        b >>= 1
    return best


# -- the pass ----------------------------------------------------------------------------

cdef struct Flag:
    int64_t at          # SET_FLAG: after this row; WAIT_FLAG: before it
    uint8_t src
    uint8_t dst


cdef struct Growing:
    Flag* items
    int64_t count
    int64_t cap


cdef int push(Growing* g, int64_t at, uint8_t src, uint8_t dst) noexcept nogil:
    cdef Flag* grown
    if g.count == g.cap:
        g.cap = g.cap * 2 + 64
        grown = <Flag*>realloc(g.items, sizeof(Flag) * g.cap)
        if grown == NULL:
            return -1
        g.items = grown
    g.items[g.count].at = at
    g.items[g.count].src = src
    g.items[g.count].dst = dst
    g.count += 1
    return 0


cdef struct Positions:
    int64_t* items
    int64_t count
    int64_t cap


cdef int push_position(Positions* g, int64_t value) noexcept nogil:
    cdef int64_t* grown
    if g.count == g.cap:
        g.cap = g.cap * 2 + 64
        grown = <int64_t*>realloc(g.items, sizeof(int64_t) * g.cap)
        if grown == NULL:
            return -1
        g.items = grown
    g.items[g.count] = value
    g.count += 1
    return 0


cdef int place_flags(const Instr* code, int64_t n, const Access* acc, const int64_t* first,
                     int64_t leaves, int64_t event_ids, Growing* sets,
                     Growing* waits) noexcept nogil:
    """``sets`` (in the reference's order of appending) and ``waits`` (by row): the
    reference's ``sets_after`` and ``waits_before``. -1 when out of memory."""
    # trees[(pipe * 2 + is_write)]: top then tag, 2 * leaves nodes each
    cdef int64_t* trees[NUM_PIPES * 2]
    cdef uint64_t readers[256]      # memory -> pipes that read it (bit mask)
    cdef uint64_t writers[256]
    cdef int64_t need[NUM_PIPES]
    cdef int64_t synced[NPAIRS]
    cdef Positions wait_at[NPAIRS]
    cdef int64_t i, k, j, dep, got, nodes = 2 * leaves
    cdef int p, q, t, status = 0
    cdef const Access* a
    cdef Positions* w
    memset(trees, 0, sizeof(trees))     # allocated when first painted
    memset(readers, 0, sizeof(readers))
    memset(writers, 0, sizeof(writers))
    memset(wait_at, 0, sizeof(wait_at))
    for t in range(NPAIRS):
        synced[t] = -1
    i = 0
    while status == 0 and i < n:
        p = code[i].pipe
        for q in range(NUM_PIPES):
            need[q] = -1
        for k in range(first[i], first[i + 1]):
            a = &acc[k]
            for q in range(NUM_PIPES):
                if q == p:
                    continue
                if writers[a.mem] >> q & 1:
                    t = q * 2 + 1
                    got = highest(trees[t], trees[t] + nodes, leaves, a.start, a.end)
                    if got > need[q]:
                        need[q] = got
                if a.write and readers[a.mem] >> q & 1:
                    t = q * 2
                    got = highest(trees[t], trees[t] + nodes, leaves, a.start, a.end)
                    if got > need[q]:
                        need[q] = got
        for q in range(NUM_PIPES):
            j = need[q]
            if j < 0 or j <= synced[q * NUM_PIPES + p]:
                continue
            w = &wait_at[q * NUM_PIPES + p]
            # the waits after row j still hold an event id each; with all ids held, the
            # set goes after the wait that frees the id this one will take
            if w.count >= event_ids and w.items[w.count - event_ids] > j:
                j = w.items[w.count - event_ids]
            if push(sets, j, q, p) or push(waits, i, q, p) or push_position(w, i):
                status = -1
                break
            synced[q * NUM_PIPES + p] = j
        for k in range(first[i], first[i + 1]):
            a = &acc[k]
            t = p * 2 + a.write
            if trees[t] == NULL:
                trees[t] = <int64_t*>malloc(sizeof(int64_t) * 2 * nodes)
                if trees[t] == NULL:
                    status = -1
                    break
                memset(trees[t], 0xFF, sizeof(int64_t) * 2 * nodes)   # every node -1
            paint(trees[t], trees[t] + nodes, leaves, a.start, a.end, i)
            if a.write:
                writers[a.mem] |= 1ULL << p
            else:
                readers[a.mem] |= 1ULL << p
        i += 1
    for t in range(NUM_PIPES * 2):
        free(trees[t])
    for t in range(NPAIRS):
        free(wait_at[t].items)
    return status


cdef inline void flag_row(Instr* row, uint8_t op, uint8_t pipe, uint8_t pipe2,
                          int8_t event) noexcept nogil:
    memset(row, 0, sizeof(Instr))
    row.op = op
    row.pipe = pipe
    row.pipe2 = pipe2
    row.event = event
    row.gm = -1


cdef int64_t emit_flags(const Instr* code, int64_t n, Instr* out, const Growing* sets,
                  const Growing* waits, int64_t event_ids, int64_t* sets_by_row,
                  int64_t* order) noexcept nogil:
    """The reference's ``_emit``: rows with their waits before and sets after, event ids
    taken from and returned to a FIFO per pipe pair. Returns -1 on success, else the
    pipe pair (src * NUM_PIPES + dst) that ran out of event ids; -2 for a wait with no set
    pending (which the reference would raise on too)."""
    cdef int8_t free_ids[NPAIRS][MAX_EVENT_IDS]
    cdef int64_t free_head[NPAIRS]
    cdef int64_t free_count[NPAIRS]
    cdef int8_t pending[NPAIRS][MAX_EVENT_IDS]
    cdef int64_t pend_head[NPAIRS]
    cdef int64_t pend_count[NPAIRS]
    cdef int64_t i, k, o = 0, wk = 0, ev
    cdef int pair, t
    cdef const Flag* f
    for t in range(NPAIRS):
        for k in range(event_ids):
            free_ids[t][k] = k
        free_head[t] = 0
        free_count[t] = event_ids
        pend_head[t] = 0
        pend_count[t] = 0
    # sets in appending order, grouped by row (a stable counting sort)
    memset(sets_by_row, 0, sizeof(int64_t) * (n + 1))
    for k in range(sets.count):
        sets_by_row[sets.items[k].at + 1] += 1
    for i in range(n):
        sets_by_row[i + 1] += sets_by_row[i]
    for k in range(sets.count):
        i = sets.items[k].at
        order[sets_by_row[i]] = k
        sets_by_row[i] += 1
    # sets_by_row[i] is now the end of row i's sets; row i's start is sets_by_row[i - 1]
    for i in range(n):
        while wk < waits.count and waits.items[wk].at == i:
            f = &waits.items[wk]
            pair = f.src * NUM_PIPES + f.dst
            if pend_count[pair] == 0:
                return -2
            ev = pending[pair][pend_head[pair]]
            pend_head[pair] = (pend_head[pair] + 1) % event_ids
            pend_count[pair] -= 1
            flag_row(&out[o], OP_WAIT_FLAG, f.dst, f.src, <int8_t>ev)
            o += 1
            free_ids[pair][(free_head[pair] + free_count[pair]) % event_ids] = ev
            free_count[pair] += 1
            wk += 1
        memcpy(&out[o], &code[i], sizeof(Instr))
        o += 1
        for k in range(sets_by_row[i - 1] if i > 0 else 0, sets_by_row[i]):
            f = &sets.items[order[k]]
            pair = f.src * NUM_PIPES + f.dst
            if free_count[pair] == 0:
                return pair
            ev = free_ids[pair][free_head[pair]]
            free_head[pair] = (free_head[pair] + 1) % event_ids
            free_count[pair] -= 1
            pending[pair][(pend_head[pair] + pend_count[pair]) % event_ids] = ev
            pend_count[pair] += 1
            flag_row(&out[o], OP_SET_FLAG, f.src, f.dst, <int8_t>ev)
            o += 1
    return -1


def insert_sync(cnp.ndarray stream, int64_t event_ids):
    """``stream`` (one core's C-contiguous ``INSTR`` array) with the flags its
    dependencies need, as a new array; ``None`` when the reference must run instead."""
    if event_ids < 1 or event_ids > MAX_EVENT_IDS:
        return None
    if not stream.flags.c_contiguous:
        stream = np.ascontiguousarray(stream)
    cdef int64_t n = stream.shape[0]
    cdef const Instr* code = <const Instr*>cnp.PyArray_DATA(stream)
    cdef Access* acc = <Access*>malloc(sizeof(Access) * (4 * n + 1))
    cdef int64_t* first = <int64_t*>malloc(sizeof(int64_t) * (n + 1))
    cdef int64_t* sets_by_row = NULL
    cdef int64_t* order = NULL
    cdef Growing sets, waits
    cdef int64_t nacc, nkeys, leaves = 1, status
    cdef cnp.ndarray out
    sets.items = NULL
    sets.count = sets.cap = 0
    waits.items = NULL
    waits.count = waits.cap = 0
    try:
        if acc == NULL or first == NULL:
            raise MemoryError()
        with nogil:
            nacc = collect(code, n, acc, first)
        if nacc < 0:
            return None
        with nogil:
            nkeys = compress(acc, nacc)
        if nkeys < 0:
            raise MemoryError()
        while leaves < nkeys:
            leaves <<= 1
        with nogil:
            status = place_flags(code, n, acc, first, leaves, event_ids, &sets, &waits)
        if status < 0:
            raise MemoryError()
        free(acc)
        acc = NULL
        out = new_array(n + sets.count + waits.count, stream.dtype)
        sets_by_row = <int64_t*>malloc(sizeof(int64_t) * (n + 1))
        order = <int64_t*>malloc(sizeof(int64_t) * (sets.count + 1))
        if sets_by_row == NULL or order == NULL:
            raise MemoryError()
        with nogil:
            status = emit_flags(code, n, <Instr*>cnp.PyArray_DATA(out), &sets, &waits, event_ids,
                          sets_by_row, order)
        if status == -2:
            return None
        if status >= 0:
            from pypto.codegen.isa import Pipe
            from pypto.errors import PyptoError

            raise PyptoError(f"internal codegen error: more than {event_ids} flags "
                             f"outstanding from {Pipe(status // NUM_PIPES).name} to "
                             f"{Pipe(status % NUM_PIPES).name}")
        return out
    finally:
        free(acc)
        free(first)
        free(sets_by_row)
        free(order)
        free(sets.items)
        free(waits.items)


# -- packing row tuples (StreamBuilder.array) --------------------------------------------

cdef inline bint integer(object value, int64_t low, int64_t high, int64_t* out) except -1:
    """Whether ``value`` is an int within [low, high] (then stored in ``out``)."""
    cdef int overflow = 0
    cdef long long x
    if not PyLong_Check(value):
        return False
    x = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow or x < low or x > high:
        return False
    out[0] = x
    return True


cdef struct Region:          # one operand's fields, aligned
    int64_t mem
    int64_t addr
    int64_t rows
    int64_t cols
    int64_t rs
    int64_t cs


cdef bint operand(tuple row, int at, Region* o) except -1:
    return (integer(row[at], 0, 255, &o.mem)
            and integer(row[at + 1], INT64_MIN, INT64_MAX, &o.addr)
            and integer(row[at + 2], -2147483648, 2147483647, &o.rows)
            and integer(row[at + 3], -2147483648, 2147483647, &o.cols)
            and integer(row[at + 4], INT64_MIN, INT64_MAX, &o.rs)
            and integer(row[at + 5], INT64_MIN, INT64_MAX, &o.cs))


def pack(list rows):
    """``rows`` (tuples in ``INSTR`` field order) as an ``INSTR`` array, the array
    ``np.array(rows, dtype=INSTR)`` gives; ``None`` for a row that is not a tuple of
    27 Python numbers each within its field's range (NumPy then packs, or raises)."""
    from pypto.codegen.isa import INSTR

    cdef Py_ssize_t n = len(rows), i
    cdef cnp.ndarray out = new_array(n, INSTR)
    cdef Instr* code = <Instr*>cnp.PyArray_DATA(out)
    cdef Instr* r
    cdef tuple row
    cdef object value
    cdef int64_t v
    cdef Region d, a, b
    for i in range(n):
        value = rows[i]
        if type(value) is not tuple:
            return None
        row = <tuple>value
        if len(row) != 27:
            return None
        r = &code[i]
        if not integer(row[0], 0, 255, &v):
            return None
        r.op = <uint8_t>v
        if not integer(row[1], 0, 255, &v):
            return None
        r.pipe = <uint8_t>v
        if not integer(row[2], 0, 255, &v):
            return None
        r.pipe2 = <uint8_t>v
        if not integer(row[3], -128, 127, &v):
            return None
        r.event = <int8_t>v
        if not integer(row[4], 0, 255, &v):
            return None
        r.dtype = <uint8_t>v
        if not integer(row[5], 0, 255, &v):
            return None
        r.sdtype = <uint8_t>v
        if not integer(row[6], 0, 65535, &v):
            return None
        r.flags = <uint16_t>v
        if not integer(row[7], -32768, 32767, &v):
            return None
        r.gm = <int16_t>v
        value = row[8]
        if not (PyFloat_Check(value) or PyLong_Check(value)):
            return None
        try:
            r.imm = PyFloat_AsDouble(value)
        except OverflowError:
            return None
        if not (operand(row, 9, &d) and operand(row, 15, &a) and operand(row, 21, &b)):
            return None
        r.d_mem, r.d_addr, r.d_rows, r.d_cols, r.d_rs, r.d_cs = \
            <uint8_t>d.mem, d.addr, <int32_t>d.rows, <int32_t>d.cols, d.rs, d.cs
        r.a_mem, r.a_addr, r.a_rows, r.a_cols, r.a_rs, r.a_cs = \
            <uint8_t>a.mem, a.addr, <int32_t>a.rows, <int32_t>a.cols, a.rs, a.cs
        r.b_mem, r.b_addr, r.b_rows, r.b_cols, r.b_rs, r.b_cs = \
            <uint8_t>b.mem, b.addr, <int32_t>b.rows, <int32_t>b.cols, b.rs, b.cs
    return out


# -- building rows (StreamBuilder.emit) --------------------------------------------------

cdef object ZERO = 0
cdef object MINUS_ONE = -1
cdef object FLOAT_ZERO = 0.0
# pipe by opcode (other than COPY, VLD and VST, whose pipe is their data path's); -1 not
# known yet
cdef int8_t OP_PIPES[256]
memset(OP_PIPES, 0xFF, sizeof(OP_PIPES))


cdef inline void put(tuple row, Py_ssize_t at, object value):
    Py_INCREF(value)            # PyTuple_SET_ITEM steals a reference
    PyTuple_SET_ITEM(row, at, value)


cdef inline long put_operand(tuple row, Py_ssize_t at, object o) except? -1:
    """Fill ``row[at:at + 6]`` from operand ``o``; returns its memory code."""
    cdef long mem = o.mem
    put(row, at, mem)
    put(row, at + 1, o.addr)
    put(row, at + 2, o.rows)
    put(row, at + 3, o.cols)
    put(row, at + 4, o.rs)
    put(row, at + 5, o.cs)
    return mem


cdef long pipe_for(object builder, long code, long src, long dst) except -1:
    """``program.pipe_of(code, src, dst, builder.memories)``."""
    cdef bytes table
    cdef unsigned char known
    if code == OP_COPY or code == OP_VLD or code == OP_VST:
        if 0 <= src < NUM_MEMS and 0 <= dst < NUM_MEMS:
            table = builder._copy_table
            known = (<unsigned char*><char*>table)[src * NUM_MEMS + dst]
            if known != 255:
                return known
        return int(builder.copy_pipe(src, dst))   # raises: no data path
    if 0 <= code < 256:
        if OP_PIPES[code] < 0:
            OP_PIPES[code] = <int8_t>_pipe_of(code)
        return OP_PIPES[code]
    return _pipe_of(code)


def _pipe_of(code):
    from pypto.codegen.program import pipe_of

    return int(pipe_of(code))


def emit(self, op, *operands, dtype=None, sdtype=None, flags=0, imm=0.0, pipe=None,
         pipe2=0, event=0):
    """``StreamBuilder.emit``, compiled: for int (or IntEnum) codes the same row tuple
    as ``program.emit_reference``, its specification, appended to ``self.rows``."""
    cdef Py_ssize_t count = len(operands), k
    cdef tuple row = PyTuple_New(27)
    cdef object gm = MINUS_ONE
    cdef long code = op, d_mem = 0, a_mem = 0, pipe_code
    cdef list rows
    for k in range(9 + 6 * min(count, 3), 27):
        put(row, k, ZERO)
    if count > 0:
        d_mem = put_operand(row, 9, operands[0])
        if d_mem == MEM_GM:
            gm = operands[0].gm
        if count > 1:
            a_mem = put_operand(row, 15, operands[1])
            if a_mem == MEM_GM:
                gm = operands[1].gm
            if count > 2:
                if put_operand(row, 21, operands[2]) == MEM_GM:
                    gm = operands[2].gm
    pipe_code = pipe_for(self, code, a_mem, d_mem) if pipe is None else pipe
    dcode = dtype.code if dtype is not None else ZERO
    put(row, 0, code)
    put(row, 1, pipe_code)
    put(row, 2, <long>pipe2)
    put(row, 3, event)
    put(row, 4, dcode)
    put(row, 5, sdtype.code if sdtype is not None else dcode)
    put(row, 6, flags)
    put(row, 7, gm)
    put(row, 8, imm if type(imm) is float else float(imm))
    rows = self.rows
    rows.append(row)
    return self.packed_count + len(rows) - 1
