# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The compiled timing engine; ``pypto.sim.fast.simulate`` is its public entry point.

A port of ``pypto.sim.reference`` (the specification): the same rules,
the same core order, the same L2 and DRAM server, and the same floating-point
expressions evaluated in the same order (a C ``double`` is a Python ``float``), so the
results are identical. Integers are ``int64``; ``run`` first checks that no value can
leave the range where that is exact, and asks the caller to use the reference engine
when one could (absurd sizes, invalid codes, missing target entries: the reference then
raises the same error it always would).

Instructions are read in place from each core's ``INSTR`` array through a packed struct
whose field offsets are checked against ``INSTR`` at import.
"""

cimport numpy as cnp
from libc.math cimport ceil, fabs
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc

import numpy as np

cnp.import_array()

cdef enum:
    NPIPES = 7      # pypto.codegen.isa.Pipe
    NMEMS = 10      # pypto.codegen.isa.Mem
    MEM_GM = 1
    L2_WAYS = 16
    NKEYS = NPIPES * NPIPES * 256   # (source pipe, destination pipe, event byte)
    PREFETCH_AHEAD = 24             # L2 accesses queued behind their prefetch
    AHEAD_RING = 32                 # a power of two > PREFETCH_AHEAD
    F_TRANSPOSE = 1

# Instruction kinds (fast.py maps opcodes to these).
cdef enum:
    K_INVALID = 0
    K_NOP = 1
    K_COPY = 2
    K_MMAD = 3
    K_SET = 4
    K_WAIT = 5
    K_BARRIER = 6
    K_VECTOR = 7    # cost from d_rows x d_cols
    K_REDUCE = 8    # cost from d_rows x a_cols
    K_SYNC_ALL = 9

# run() status codes.
cdef enum:
    S_OK = 0
    S_USE_REFERENCE = 1
    S_DEADLOCK = 2

OK = S_OK
USE_REFERENCE = S_USE_REFERENCE
DEADLOCK = S_DEADLOCK

# Limits of the exact domain: every cost below 2**50 cycles, their sum below 2**60, and
# the byte products of the L2 hit share (eff * hits) below 2**52, exact in a double.
cdef double COST_LIMIT = 1125899906842624.0      # 2**50
cdef double BUDGET_LIMIT = 1152921504606846976.0  # 2**60
cdef double EXACT_LIMIT = 4503599627370496.0      # 2**52
cdef double TAG_LIMIT = 2147483644.0              # 2**31 - 4: L2 tags are int32
cdef int64_t DIM_LIMIT = 1 << 24
cdef int64_t STRIDE_LIMIT = 1LL << 32
cdef int64_t ADDR_LIMIT = 1LL << 44


cdef packed struct Instr:          # pypto.codegen.isa.INSTR
    uint8_t op
    uint8_t pipe
    uint8_t pipe2
    int8_t event
    uint8_t dtype
    uint8_t sdtype
    uint16_t flags
    int16_t gm
    double imm
    uint8_t d_mem
    int64_t d_addr
    int32_t d_rows
    int32_t d_cols
    int64_t d_rs
    int64_t d_cs
    uint8_t a_mem
    int64_t a_addr
    int32_t a_rows
    int32_t a_cols
    int64_t a_rs
    int64_t a_cs
    uint8_t b_mem
    int64_t b_addr
    int32_t b_rows
    int32_t b_cols
    int64_t b_rs
    int64_t b_cs


cdef packed struct TraceRec:       # pypto.sim.result.TRACE
    int32_t core
    int32_t index
    uint8_t pipe
    uint8_t op
    int64_t start
    int64_t end


cdef struct Sim:
    # target
    int64_t queue_depth
    int64_t cube_overhead
    int64_t vector_overhead
    double vector_bpc
    double l2_read_bpc
    double chip_bpc
    int64_t line_bytes
    int64_t hit_latency
    int64_t miss_latency
    int64_t sync_all_cycles
    # tables: by opcode (256), by dtype code (256), by path src * NMEMS + dst
    const uint8_t* kind
    const double* vector_cost
    const int64_t* itemsize
    const int64_t* fractal          # [code * 4 + (m, k, n, passes)]
    const uint8_t* path_ok
    const double* path_rate
    const int64_t* path_latency
    const int64_t* path_min_burst
    const double* path_row_cycles
    const int64_t* bases
    int64_t nsym
    # L2 (see "L2 and the lines an access touches")
    int32_t* l2             # 16 tags per set
    uint64_t* lru           # per set: recency order, ways in use
    int64_t sets
    double inv_sets
    int64_t line_shift      # log2(line_bytes), or -1 if not a power of two
    int64_t ahead_set[AHEAD_RING]    # queued accesses: set, tag + 1
    int32_t ahead_tag[AHEAD_RING]
    int ahead_first
    int ahead
    int64_t lines           # of the last access: lines touched, hits
    int64_t hits
    # shared by all cores
    int64_t server_free
    int64_t l2_hit_bytes
    int64_t gm_read_bytes
    int64_t gm_write_bytes
    int64_t* path_bytes


def _check_layout():
    """Raise ImportError unless the packed structs match ``INSTR`` and ``TRACE`` (so a
    stale build falls back to the reference engine instead of misreading records)."""
    from pypto.codegen.isa import INSTR
    from pypto.sim.result import TRACE

    cdef Instr i
    cdef TraceRec t
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
    b = <char*>&t
    got_trace = {"core": <char*>&t.core - b, "index": <char*>&t.index - b,
                 "pipe": <char*>&t.pipe - b, "op": <char*>&t.op - b,
                 "start": <char*>&t.start - b, "end": <char*>&t.end - b}
    want = {name: INSTR.fields[name][1] for name in INSTR.names}
    want_trace = {name: TRACE.fields[name][1] for name in TRACE.names}
    if (got, sizeof(Instr), got_trace, sizeof(TraceRec)) != (
            want, INSTR.itemsize, want_trace, TRACE.itemsize):
        raise ImportError("pypto.sim._engine was built for another INSTR or TRACE layout; "
                          "rebuild it with `pip install -e .`")


_check_layout()


# -- Python's integer division and modulo ---------------------------------------------------

cdef inline int64_t floordiv(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t q = a / b
    if (a % b != 0) and ((a < 0) != (b < 0)):
        q -= 1
    return q


cdef inline int64_t pymod(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t r = a % b
    if r != 0 and ((r < 0) != (b < 0)):
        r += b
    return r


cdef inline int64_t ceildiv(int64_t a, int64_t b) noexcept nogil:
    return -floordiv(-a, b)


cdef inline int64_t imax(int64_t a, int64_t b) noexcept nogil:
    return a if a > b else b


# -- L2 and the lines an access touches -----------------------------------------------------
#
# The reference keeps per way a tag (-1: empty) and the access clock of its last use,
# and on a miss replaces the first way with the smallest stamp. Empty ways have stamp 0,
# so they are used in order (the unused ways are always a suffix) and, once a set is
# full, its stamps differ: the victim is the least recently used way. So a set here is
# 16 tags (``int32``, tag + 1: 0 is the reference's empty tag -1, which a line of tag -1
# still matches), how many ways are in use, and their recency order as 16 nibbles of
# one ``uint64`` (way indices, most recent first): the same hits and victims, with half
# the memory per access. Lines are queued PREFETCH_AHEAD deep with their sets
# prefetched, so the host's cache misses overlap.

cdef extern from *:
    """
    #define PYPTO_PREFETCH(p) __builtin_prefetch((const void *)(p), 1, 3)
    #define PYPTO_PREFETCH_ONCE(p) __builtin_prefetch((const void *)(p), 0, 0)
    #define PYPTO_CTZ(x) __builtin_ctz(x)
    #define PYPTO_CTZLL(x) __builtin_ctzll(x)
    #include <stdint.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* Bit w set where tags[w] == tag (16 ways). */
    static inline unsigned pypto_match16(const int32_t *tags, int32_t tag) {
    #if defined(__SSE2__)
        __m128i t = _mm_set1_epi32(tag);
        __m128i a = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)tags), t);
        __m128i b = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(tags + 4)), t);
        __m128i c = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(tags + 8)), t);
        __m128i d = _mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(tags + 12)), t);
        return (unsigned)_mm_movemask_epi8(_mm_packs_epi16(_mm_packs_epi32(a, b),
                                                            _mm_packs_epi32(c, d)));
    #else
        unsigned m = 0;
        for (int w = 0; w < 16; w++) m |= (unsigned)(tags[w] == tag) << w;
        return m;
    #endif
    }
    """
    void PYPTO_PREFETCH(const void* p) noexcept nogil
    void PYPTO_PREFETCH_ONCE(const void* p) noexcept nogil
    int count_trailing_zeros "PYPTO_CTZ" (uint32_t x) noexcept nogil
    int count_trailing_zeros64 "PYPTO_CTZLL" (uint64_t x) noexcept nogil
    uint32_t match16 "pypto_match16" (const int32_t* tags, int32_t tag) noexcept nogil


cdef uint64_t NIBBLES_ONE = 0x1111111111111111ULL
cdef uint64_t NIBBLES_HIGH = 0x8888888888888888ULL


cdef inline void split_line(Sim* s, int64_t line, int64_t* set_, int64_t* tag) noexcept nogil:
    """(line mod sets, line // sets) with Python's floor semantics, by a reciprocal."""
    cdef int64_t q = <int64_t>(<double>line * s.inv_sets)   # off by at most one or two
    cdef int64_t r = line - q * s.sets
    while r < 0:
        q -= 1
        r += s.sets
    while r >= s.sets:
        q += 1
        r -= s.sets
    set_[0] = r
    tag[0] = q


cdef inline int64_t line_of(Sim* s, int64_t byte) noexcept nogil:
    if s.line_shift >= 0:
        return byte >> s.line_shift    # arithmetic shift: floor division
    return floordiv(byte, s.line_bytes)


cdef inline bint l2_access(int32_t* tags, uint64_t* lru, int32_t tag1) noexcept nogil:
    """``reference.L2.access`` on one set (``lru``: recency order, ways in use)."""
    cdef uint32_t match = match16(tags, tag1)     # the ways holding the tag
    cdef uint64_t order = lru[0], x, zero, below
    cdef int w, p
    if match:
        w = count_trailing_zeros(match)     # the first way holding it
        if w >= <int>lru[1]:                # an unused way (tag -1 matches them): now used
            lru[1] += 1
            lru[0] = (order << 4) | <uint64_t>w
            return True
        x = order ^ (NIBBLES_ONE * <uint64_t>w)     # its place p in the order: x's first
        zero = (x - NIBBLES_ONE) & ~x & NIBBLES_HIGH   # zero nibble (exact for the first)
        p = count_trailing_zeros64(zero) >> 2
        below = (<uint64_t>1 << (4 * p)) - 1        # more recent ways move down one place
        lru[0] = (order & ~((below << 4) | 15)) | ((order & below) << 4) | <uint64_t>w
        return True
    if lru[1] < L2_WAYS:            # the first unused way
        w = <int>lru[1]
        lru[1] += 1
    else:                           # the least recently used way
        w = <int>(order >> 60)
    tags[w] = tag1
    lru[0] = (order << 4) | <uint64_t>w
    return False


cdef inline void l2_run(Sim* s, int64_t set_, int32_t tag1) noexcept nogil:
    s.hits += l2_access(s.l2 + set_ * L2_WAYS, s.lru + 2 * set_, tag1)


def _l2_hits(int64_t line_bytes, int64_t l2_bytes, lines):
    """For tests: which of ``lines`` (in order, from a cold L2) hit."""
    cdef int64_t sets = max(1, l2_bytes // (line_bytes * L2_WAYS)), i, set_, tag
    tags_arr = np.zeros(sets * L2_WAYS, dtype=np.int32)
    lru_arr = np.zeros(2 * sets, dtype=np.uint64)
    cdef int32_t[::1] tags = tags_arr
    cdef uint64_t[::1] lru = lru_arr
    cdef Sim s
    s.sets, s.inv_sets = sets, 1.0 / sets
    out = []
    for i in range(len(lines)):
        split_line(&s, lines[i], &set_, &tag)
        out.append(bool(l2_access(&tags[set_ * L2_WAYS], &lru[2 * set_], <int32_t>(tag + 1))))
    return out


cdef inline void l2_touch(Sim* s, int64_t line) noexcept nogil:
    """Queue an access to ``line``, prefetching its set; run the oldest queued one."""
    cdef int64_t set_, tag
    cdef int slot
    split_line(s, line, &set_, &tag)
    PYPTO_PREFETCH(s.l2 + set_ * L2_WAYS)
    PYPTO_PREFETCH(s.lru + 2 * set_)
    slot = (s.ahead_first + s.ahead) & (AHEAD_RING - 1)
    s.ahead_set[slot] = set_
    s.ahead_tag[slot] = <int32_t>(tag + 1)
    s.ahead += 1
    s.lines += 1
    if s.ahead > PREFETCH_AHEAD:
        l2_run(s, s.ahead_set[s.ahead_first], s.ahead_tag[s.ahead_first])
        s.ahead_first = (s.ahead_first + 1) & (AHEAD_RING - 1)
        s.ahead -= 1


cdef inline void l2_drain(Sim* s) noexcept nogil:
    while s.ahead > 0:
        l2_run(s, s.ahead_set[s.ahead_first], s.ahead_tag[s.ahead_first])
        s.ahead_first = (s.ahead_first + 1) & (AHEAD_RING - 1)
        s.ahead -= 1


cdef inline void touch_lines(Sim* s, int64_t base, int64_t rows, int64_t cols, int64_t rs,
                             int64_t cs, int64_t isz) noexcept nogil:
    """Access every line ``reference.gm_lines`` lists, in its order; counts the lines and
    hits into ``s.lines`` and ``s.hits``."""
    cdef int64_t line, last, r, c, row
    s.lines = s.hits = 0
    if (cols == 1 or cs == 1) and (rows == 1 or rs == cols):
        line = line_of(s, base)
        last = line_of(s, base + rows * cols * isz - 1)
        while line <= last:
            l2_touch(s, line)
            line += 1
    else:
        for r in range(rows):
            row = base + r * rs * isz
            if cs == 1:
                line = line_of(s, row)
                last = line_of(s, row + cols * isz - 1)
                while line <= last:
                    l2_touch(s, line)
                    line += 1
            elif cs == 0:
                l2_touch(s, line_of(s, row))
            else:
                for c in range(cols):
                    l2_touch(s, line_of(s, row + c * cs * isz))
    l2_drain(s)


# -- costs ----------------------------------------------------------------------------------

cdef inline void copy_shape(const Instr* r, int64_t* rows, int64_t* cols, int64_t* rs,
                            int64_t* cs) noexcept nogil:
    """The (rows, cols, row stride, col stride) ``reference.copy`` costs a COPY by."""
    rows[0] = r.d_rows
    cols[0] = r.d_cols
    if r.a_mem == MEM_GM:
        rs[0] = r.a_rs
        cs[0] = r.a_cs
    else:
        rs[0] = r.d_rs
        cs[0] = r.d_cs
    if r.d_mem != MEM_GM and r.a_mem != MEM_GM:
        rs[0] = r.a_rs
        cs[0] = r.a_cs
        if r.flags & F_TRANSPOSE:
            rows[0] = r.d_cols
            cols[0] = r.d_rows


cdef inline void burst(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t isz,
                       int64_t* run, int64_t* runs) noexcept nogil:
    """``reference.burst_bytes``: the length of one contiguous run and how many."""
    if (cols == 1 or cs == 1) and (rows == 1 or rs == cols):
        run[0] = rows * cols * isz
        runs[0] = 1
    elif cs == 1:
        run[0] = cols * isz
        runs[0] = rows
    elif cs == 0:
        run[0] = isz
        runs[0] = rows
    else:
        run[0] = isz
        runs[0] = rows * cols


cdef inline int64_t mmad_cycles(Sim* s, const Instr* r) noexcept nogil:
    cdef const int64_t* f = s.fractal + 4 * r.sdtype
    cdef int64_t fractals = (ceildiv(r.a_rows, f[0]) * ceildiv(r.b_cols, f[2])
                             * ceildiv(r.a_cols, f[1]))
    return s.cube_overhead + fractals * f[3]


cdef inline int64_t vector_cycles(Sim* s, const Instr* r, int kind) noexcept nogil:
    cdef int64_t rows = r.d_rows
    cdef int64_t cols = r.a_cols if kind == K_REDUCE else r.d_cols
    cdef int64_t isz = imax(s.itemsize[r.dtype], s.itemsize[r.sdtype])
    cdef double work = <double>(rows * cols * isz) * s.vector_cost[r.op] / s.vector_bpc
    return s.vector_overhead + <int64_t>ceil(work)


cdef inline void copy_cycles(Sim* s, const Instr* r, int64_t start, int64_t* free_at,
                             int64_t* complete) noexcept nogil:
    """``reference.copy``: (pipe free, completion) of a DMA starting at ``start``."""
    cdef int64_t src = r.a_mem, dst = r.d_mem
    cdef int pi = src * NMEMS + dst
    cdef int64_t isz = s.itemsize[r.sdtype]
    cdef int64_t rows, cols, rs, cs, run, runs, real, eff, base, gm, hits, n
    cdef int64_t occupy, dram, l2_latency, done
    cdef double row_time, rate = s.path_rate[pi], hit_eff, miss_eff
    copy_shape(r, &rows, &cols, &rs, &cs)
    burst(rows, cols, rs, cs, isz, &run, &runs)
    real = run * runs
    eff = imax(run, s.path_min_burst[pi]) * runs
    s.path_bytes[pi] += real
    row_time = <double>rows * s.path_row_cycles[pi]
    if src != MEM_GM and dst != MEM_GM:
        done = start + <int64_t>ceil(<double>eff / rate + row_time)
        free_at[0] = done
        complete[0] = done + s.path_latency[pi]
        return
    gm = r.gm if r.gm >= 0 else r.gm + s.nsym
    base = s.bases[gm] + (r.a_addr if src == MEM_GM else r.d_addr) * isz
    touch_lines(s, base, rows, cols, rs, cs, isz)
    hits, n = s.hits, s.lines
    if src == MEM_GM:
        hit_eff = <double>(eff * hits) / <double>n
        miss_eff = <double>eff - hit_eff
        s.gm_read_bytes += real
        s.l2_hit_bytes += real * hits / n
        occupy = <int64_t>ceil(hit_eff / s.l2_read_bpc + miss_eff / rate + row_time)
        dram = <int64_t>ceil(miss_eff / s.chip_bpc)
        l2_latency = s.miss_latency if hits < n else s.hit_latency
    else:
        s.gm_write_bytes += real
        occupy = <int64_t>ceil(<double>eff / rate + row_time)
        dram = <int64_t>ceil(<double>eff / s.chip_bpc)
        l2_latency = 0
    done = start + occupy
    if dram > 0:  # only DRAM traffic queues on the DRAM server
        s.server_free = imax(start, s.server_free) + dram
        done = imax(done, s.server_free)
    free_at[0] = done
    complete[0] = done + s.path_latency[pi] + l2_latency


# -- the check and flag-matching pass -------------------------------------------------------

cdef double cost_bound(Sim* s, const Instr* r, int kind) noexcept nogil:
    """An upper bound of what one instruction adds to any time, or -1 when a value could
    leave the exact int64/double domain (then the reference engine runs instead)."""
    cdef int64_t rows, cols, rs, cs, isz, run, runs, src, dst, gm, addr
    cdef const int64_t* f
    cdef double x, eff, lines, slowest, far
    cdef int pi
    if kind == K_MMAD:
        f = s.fractal + 4 * r.sdtype
        if f[0] <= 0:
            return -1
        x = (fabs(<double>ceildiv(r.a_rows, f[0])) * fabs(<double>ceildiv(r.b_cols, f[2]))
             * fabs(<double>ceildiv(r.a_cols, f[1])) * f[3] + s.cube_overhead)
        return x if x < COST_LIMIT else -1
    if kind == K_VECTOR or kind == K_REDUCE:
        if s.itemsize[r.dtype] <= 0 or s.itemsize[r.sdtype] <= 0 or s.vector_cost[r.op] <= 0:
            return -1
        cols = r.a_cols if kind == K_REDUCE else r.d_cols
        isz = imax(s.itemsize[r.dtype], s.itemsize[r.sdtype])
        x = fabs(<double>r.d_rows) * fabs(<double>cols) * isz
        if x >= COST_LIMIT:
            return -1
        x = x * s.vector_cost[r.op] / s.vector_bpc + s.vector_overhead + 1
        return x if x < COST_LIMIT else -1
    if kind == K_SYNC_ALL:
        return <double>s.sync_all_cycles + 2
    if kind != K_COPY:
        return 2
    src, dst = r.a_mem, r.d_mem
    if src >= NMEMS or dst >= NMEMS or not s.path_ok[src * NMEMS + dst]:
        return -1
    pi = src * NMEMS + dst
    isz = s.itemsize[r.sdtype]
    if isz <= 0:
        return -1
    copy_shape(r, &rows, &cols, &rs, &cs)
    if not (0 <= rows <= DIM_LIMIT and 0 <= cols <= DIM_LIMIT):
        return -1
    if not (-STRIDE_LIMIT <= rs <= STRIDE_LIMIT and -STRIDE_LIMIT <= cs <= STRIDE_LIMIT):
        return -1
    burst(rows, cols, rs, cs, isz, &run, &runs)
    eff = <double>imax(run, s.path_min_burst[pi]) * <double>runs
    if src == MEM_GM or dst == MEM_GM:
        if rows < 1 or cols < 1:
            return -1   # no lines: the reference divides by zero
        gm = r.gm if r.gm >= 0 else r.gm + s.nsym
        addr = r.a_addr if src == MEM_GM else r.d_addr
        if not (0 <= gm < s.nsym and -ADDR_LIMIT <= addr <= ADDR_LIMIT):
            return -1
        lines = <double>rows * <double>cols * isz + 2.0 * rows + 2.0
        if eff * lines >= EXACT_LIMIT:
            return -1
        far = (fabs(<double>s.bases[gm]) + fabs(<double>addr) * isz
               + (rows * fabs(<double>rs) + cols * fabs(<double>cs) + <double>rows * cols) * isz)
        if far / s.line_bytes / s.sets + 2 >= TAG_LIMIT:
            return -1   # an L2 tag beyond int32
    slowest = s.path_rate[pi]
    if s.l2_read_bpc < slowest:
        slowest = s.l2_read_bpc
    if s.chip_bpc < slowest:
        slowest = s.chip_bpc
    x = (2.0 * eff / slowest + rows * s.path_row_cycles[pi] + s.path_latency[pi]
         + s.hit_latency + s.miss_latency + 4)
    return x if x < COST_LIMIT else -1


cdef int64_t prepare(Sim* s, const Instr** code, const int64_t* length, const int64_t* offset,
                     int64_t ncores, int64_t* set_base, int64_t* wait_base, int64_t* next_set,
                     int64_t* wait_takes, int64_t* head, int64_t* tail,
                     int64_t* owner) noexcept nogil:
    """Check every instruction and match flags.

    SET_FLAGs and WAIT_FLAGs are numbered in program order, core after core (core c's
    first at ``set_base[c]``, ``wait_base[c]``). The k-th wait on a (source,
    destination, event) key takes the k-th set on it if that comes earlier in program
    order: ``wait_takes`` gets that set's number, or -1 (a deadlock when reached).
    Returns the index of the first instruction outside the exact domain, or -1; cores
    with unequal numbers of SYNC_ALLs are left to the reference too (it raises)."""
    cdef int64_t c, i, key, sets = 0, waits = 0, sync_alls, first_sync_alls = 0
    cdef const Instr* r
    cdef int kind
    cdef double bound, budget = 0
    for c in range(ncores):
        set_base[c] = sets
        wait_base[c] = waits
        sync_alls = 0
        for i in range(length[c]):
            r = code[c] + i
            kind = s.kind[r.op]
            if kind == K_INVALID or r.pipe >= NPIPES:
                return offset[c] + i
            if kind == K_SYNC_ALL:
                sync_alls += 1
            if kind == K_SET or kind == K_WAIT:
                if r.pipe2 >= NPIPES:
                    return offset[c] + i
                if kind == K_SET:
                    key = (r.pipe * NPIPES + r.pipe2) * 256 + <uint8_t>r.event
                else:
                    key = (r.pipe2 * NPIPES + r.pipe) * 256 + <uint8_t>r.event
                if owner[key] != c:         # first use of this key on this core
                    owner[key] = c
                    head[key] = -1
                    tail[key] = -1
                if kind == K_SET:           # queue it: next_set chains a key's pending sets
                    next_set[sets] = -1
                    if tail[key] >= 0:
                        next_set[tail[key]] = sets
                    else:
                        head[key] = sets
                    tail[key] = sets
                    sets += 1
                else:                       # take the oldest pending set, if any
                    wait_takes[waits] = head[key]
                    waits += 1
                    if head[key] >= 0:
                        head[key] = next_set[head[key]]
                        if head[key] < 0:
                            tail[key] = -1
                bound = 2
            else:
                bound = cost_bound(s, r, kind)
            if bound < 0:
                return offset[c] + i
            budget += bound
        if c == 0:
            first_sync_alls = sync_alls
        elif sync_alls != first_sync_alls:
            return offset[c]
    if budget >= BUDGET_LIMIT:
        return 0
    return -1


# -- the core-order heap: (next issue time, core), smallest first ---------------------------

cdef inline bint before(int64_t t1, int64_t c1, int64_t t2, int64_t c2) noexcept nogil:
    return t1 < t2 or (t1 == t2 and c1 < c2)


cdef inline void sift_down(int64_t* ht, int64_t* hc, int64_t n, int64_t k) noexcept nogil:
    cdef int64_t t = ht[k], c = hc[k], child
    while True:
        child = 2 * k + 1
        if child >= n:
            break
        if child + 1 < n and before(ht[child + 1], hc[child + 1], ht[child], hc[child]):
            child += 1
        if not before(ht[child], hc[child], t, c):
            break
        ht[k] = ht[child]
        hc[k] = hc[child]
        k = child
    ht[k] = t
    hc[k] = c


# -- the engine -----------------------------------------------------------------------------

cdef inline void record(TraceRec* trace, int64_t g, int64_t c, int64_t pc, const Instr* r,
                        int64_t start, int64_t end, int64_t* core_end) noexcept nogil:
    if end > core_end[0]:
        core_end[0] = end
    if trace != NULL:
        trace[g].core = <int32_t>c
        trace[g].index = <int32_t>pc
        trace[g].pipe = r.pipe
        trace[g].op = r.op
        trace[g].start = start
        trace[g].end = end


def run(list cores, const int64_t[::1] bases, tables, tuple scalars, trace,
        int64_t[::1] core_cycles, int64_t[:, ::1] pipe_busy, int64_t[:, :, ::1] flag_wait,
        int64_t[:, ::1] starved, int64_t[:, ::1] queue_stall, int64_t[:, ::1] path_bytes):
    """Simulate the per-core ``INSTR`` arrays ``cores`` (C-contiguous); ``fast.py``
    builds the arguments. Fills the output arrays and ``trace`` (a ``TRACE`` array with
    one record per instruction, or None).

    Returns ``(status, core, index, l2_hit_bytes, gm_read_bytes, gm_write_bytes)``:
    status ``OK``; ``DEADLOCK`` at instruction ``index`` of ``core``; or ``USE_REFERENCE``
    when an instruction lies outside what this engine computes exactly (``index`` is
    its global position).
    """
    cdef const uint8_t[::1] kind_table = tables[0]
    cdef const double[::1] vector_cost = tables[1]
    cdef const int64_t[::1] itemsize = tables[2]
    cdef const int64_t[::1] fractal = tables[3]
    cdef const uint8_t[::1] path_ok = tables[4]
    cdef const double[::1] path_rate = tables[5]
    cdef const int64_t[::1] path_latency = tables[6]
    cdef const int64_t[::1] path_min_burst = tables[7]
    cdef const double[::1] path_row_cycles = tables[8]
    cdef Sim s
    cdef int64_t ncores = len(cores), total = 0, c, k, g, pc, p, q, status = S_OK, err = -1
    cdef int64_t issue, start, slot_free, t, end, raised, free_at, complete, qd, src, taken
    cdef int64_t heap_n = 0, parked = 0, latest = 0, cc, at
    cdef int kind
    cdef const Instr* r
    cdef TraceRec* trace_ptr = NULL
    cdef int64_t* next_set
    cdef int64_t* wait_takes
    cdef cnp.ndarray arr, next_set_arr, wait_takes_arr, l2_arr, lru_arr

    s.queue_depth = scalars[0]
    s.cube_overhead = scalars[1]
    s.vector_overhead = scalars[2]
    s.vector_bpc = scalars[3]
    s.l2_read_bpc = scalars[4]
    s.chip_bpc = scalars[5]
    s.line_bytes = scalars[6]
    s.hit_latency = scalars[7]
    s.miss_latency = scalars[8]
    s.sets = scalars[9]
    s.sync_all_cycles = scalars[10]
    s.inv_sets = 1.0 / s.sets
    s.line_shift = -1
    for k in range(63):
        if (<int64_t>1 << k) == s.line_bytes:
            s.line_shift = k
    s.ahead_first = s.ahead = 0
    s.kind = &kind_table[0]
    s.vector_cost = &vector_cost[0]
    s.itemsize = &itemsize[0]
    s.fractal = &fractal[0]
    s.path_ok = &path_ok[0]
    s.path_rate = &path_rate[0]
    s.path_latency = &path_latency[0]
    s.path_min_burst = &path_min_burst[0]
    s.path_row_cycles = &path_row_cycles[0]
    s.bases = &bases[0] if bases.shape[0] else NULL
    s.nsym = bases.shape[0]
    s.server_free = s.l2_hit_bytes = s.gm_read_bytes = s.gm_write_bytes = 0
    s.path_bytes = &path_bytes[0, 0]
    qd = s.queue_depth

    # per-core arrays, one block of int64 (freed at the end)
    cdef int64_t* mem = <int64_t*>malloc(
        sizeof(int64_t) * (ncores * (13 + 5 * NPIPES + NPIPES * qd) + 3 * NKEYS + 1))
    if mem == NULL:
        raise MemoryError()
    cdef const Instr** code = <const Instr**>malloc(sizeof(Instr*) * (ncores + 1))
    if code == NULL:
        free(mem)
        raise MemoryError()
    cdef int64_t* length = mem
    cdef int64_t* offset = length + ncores
    cdef int64_t* pcs = offset + ncores
    cdef int64_t* last_issue = pcs + ncores
    cdef int64_t* core_end = last_issue + ncores
    cdef int64_t* ht = core_end + ncores
    cdef int64_t* hc = ht + ncores
    cdef int64_t* set_base = hc + ncores          # flag numbering, see prepare()
    cdef int64_t* wait_base = set_base + ncores
    cdef int64_t* sets_done = wait_base + ncores
    cdef int64_t* waits_done = sets_done + ncores
    cdef int64_t* arrival = waits_done + ncores          # at a SYNC_ALL: when, where
    cdef int64_t* parked_pc = arrival + ncores
    cdef int64_t* pipe_free = parked_pc + ncores
    cdef int64_t* pipe_done = pipe_free + ncores * NPIPES
    cdef int64_t* queued = pipe_done + ncores * NPIPES      # starts so far, per pipe
    cdef int64_t* ring_pos = queued + ncores * NPIPES       # where the next start goes
    cdef int64_t* busy = ring_pos + ncores * NPIPES
    cdef int64_t* ring = busy + ncores * NPIPES              # the last qd starts, per pipe
    cdef int64_t* head = ring + ncores * NPIPES * qd
    cdef int64_t* tail = head + NKEYS
    cdef int64_t* owner = tail + NKEYS

    try:
        for c in range(ncores):
            arr = cores[c]
            length[c] = arr.shape[0]
            offset[c] = total
            total += length[c]
            code[c] = <const Instr*>cnp.PyArray_DATA(arr)
        if trace is not None:
            trace_ptr = <TraceRec*>cnp.PyArray_DATA(trace)
        # filled from the start, as far as there are flags (untouched pages cost nothing)
        next_set_arr = np.empty(total, dtype=np.int64)     # then: when set k raised it
        wait_takes_arr = np.empty(total, dtype=np.int64)
        l2_arr = np.zeros(L2_WAYS * (s.sets + 1), dtype=np.int32)
        s.l2 = <int32_t*>cnp.PyArray_DATA(l2_arr)
        s.l2 += ((64 - (<size_t>s.l2 & 63)) & 63) // 4   # a set's tags in one cache line
        lru_arr = np.zeros(2 * s.sets, dtype=np.uint64)
        s.lru = <uint64_t*>cnp.PyArray_DATA(lru_arr)
        next_set = <int64_t*>cnp.PyArray_DATA(next_set_arr)
        wait_takes = <int64_t*>cnp.PyArray_DATA(wait_takes_arr)
        with nogil:
            for k in range(NKEYS):
                owner[k] = -1
            err = prepare(&s, code, length, offset, ncores, set_base, wait_base, next_set,
                          wait_takes, head, tail, owner)
            if err >= 0:
                status = S_USE_REFERENCE
            else:
                for k in range(ncores * NPIPES):
                    pipe_free[k] = pipe_done[k] = queued[k] = ring_pos[k] = busy[k] = 0
                for c in range(ncores):
                    pcs[c] = sets_done[c] = waits_done[c] = 0
                    last_issue[c] = -1
                    core_end[c] = 0
                    if length[c] > 0:
                        ht[heap_n] = 0
                        hc[heap_n] = c
                        heap_n += 1
                while heap_n > 0:
                    c = hc[0]
                    pc = pcs[c]
                    g = offset[c] + pc
                    r = code[c] + pc
                    p = r.pipe
                    k = c * NPIPES + p
                    kind = s.kind[r.op]
                    # this core's next record is read when it comes round again
                    PYPTO_PREFETCH_ONCE(<const char*>(r + 1))
                    PYPTO_PREFETCH_ONCE(<const char*>(r + 1) + 64)
                    PYPTO_PREFETCH_ONCE(<const char*>(r + 2) - 1)
                    # issue, waiting for a queue slot
                    issue = last_issue[c] + 1
                    if p != 0 and queued[k] >= qd:
                        slot_free = ring[k * qd + ring_pos[k]]
                        if slot_free > issue:
                            queue_stall[c, p] += slot_free - issue
                            issue = slot_free
                    last_issue[c] = issue
                    if kind == K_SYNC_ALL:
                        # drain, then park (out of the heap) until every core has arrived
                        t = issue
                        for q in range(NPIPES):
                            t = imax(t, pipe_done[c * NPIPES + q])
                        arrival[c] = t
                        parked_pc[c] = pc
                        latest = imax(latest, t)
                        parked += 1
                        pcs[c] = pc + 1
                        heap_n -= 1
                        ht[0] = ht[heap_n]
                        hc[0] = hc[heap_n]
                        sift_down(ht, hc, heap_n, 0)
                        if parked == ncores:    # the heap is empty: release everyone
                            t = latest + s.sync_all_cycles
                            for cc in range(ncores):
                                for q in range(NPIPES):
                                    k = cc * NPIPES + q
                                    pipe_free[k] = imax(pipe_free[k], t)
                                    pipe_done[k] = imax(pipe_done[k], t)
                                last_issue[cc] = t - 1      # the next issues at the release
                                at = parked_pc[cc]
                                record(trace_ptr, offset[cc] + at, cc, at, code[cc] + at,
                                       arrival[cc], t, &core_end[cc])
                                if pcs[cc] < length[cc]:    # equal keys in core order: a heap
                                    ht[heap_n] = t
                                    hc[heap_n] = cc
                                    heap_n += 1
                            parked = 0
                            latest = 0
                        continue
                    if kind == K_BARRIER:
                        t = issue
                        for q in range(NPIPES):
                            t = imax(t, pipe_done[c * NPIPES + q])
                        end = t + 1
                        for q in range(NPIPES):
                            pipe_free[c * NPIPES + q] = imax(pipe_free[c * NPIPES + q], end)
                            pipe_done[c * NPIPES + q] = imax(pipe_done[c * NPIPES + q], end)
                        last_issue[c] = end
                        record(trace_ptr, g, c, pc, r, t, end, &core_end[c])
                    elif kind == K_NOP:
                        record(trace_ptr, g, c, pc, r, issue, issue + 1, &core_end[c])
                    else:
                        start = imax(issue, pipe_free[k])
                        if issue > pipe_free[k]:
                            starved[c, p] += issue - pipe_free[k]
                        ring[k * qd + ring_pos[k]] = start
                        queued[k] += 1
                        ring_pos[k] += 1
                        if ring_pos[k] == qd:
                            ring_pos[k] = 0
                        if kind == K_SET:
                            raised = imax(start, pipe_done[k]) + 1
                            next_set[set_base[c] + sets_done[c]] = raised   # now: raise times
                            sets_done[c] += 1
                            record(trace_ptr, g, c, pc, r, start, raised, &core_end[c])
                        elif kind == K_WAIT:
                            taken = wait_takes[wait_base[c] + waits_done[c]]
                            waits_done[c] += 1
                            if taken < 0:
                                status = S_DEADLOCK
                                err = pc
                                break
                            t = imax(start, next_set[taken])
                            src = r.pipe2
                            flag_wait[c, p, src] += t - start
                            pipe_free[k] = t + 1
                            pipe_done[k] = imax(pipe_done[k], t + 1)
                            record(trace_ptr, g, c, pc, r, start, t + 1, &core_end[c])
                        else:
                            if kind == K_COPY:
                                copy_cycles(&s, r, start, &free_at, &complete)
                            elif kind == K_MMAD:
                                free_at = start + mmad_cycles(&s, r)
                                complete = free_at
                            else:
                                free_at = start + vector_cycles(&s, r, kind)
                                complete = free_at
                            busy[k] += free_at - start
                            pipe_free[k] = free_at
                            pipe_done[k] = imax(pipe_done[k], complete)
                            record(trace_ptr, g, c, pc, r, start, complete, &core_end[c])
                    # next instruction of this core, or the core is done
                    pcs[c] = pc + 1
                    if pc + 1 < length[c]:
                        ht[0] = last_issue[c] + 1
                    else:
                        heap_n -= 1
                        ht[0] = ht[heap_n]
                        hc[0] = hc[heap_n]
                    sift_down(ht, hc, heap_n, 0)
                if status == S_OK:
                    for c in range(ncores):
                        t = core_end[c]
                        for q in range(NPIPES):
                            t = imax(t, pipe_done[c * NPIPES + q])
                            pipe_busy[c, q] = busy[c * NPIPES + q]
                        core_cycles[c] = t
        if status == S_DEADLOCK:
            return status, c, err, 0, 0, 0
        if status == S_USE_REFERENCE:
            return status, -1, err, 0, 0, 0
        return S_OK, -1, -1, s.l2_hit_bytes, s.gm_read_bytes, s.gm_write_bytes
    finally:
        free(code)
        free(mem)
