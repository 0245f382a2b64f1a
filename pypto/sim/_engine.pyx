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
whose field offsets are checked against ``INSTR`` at import. A target's constants and
tables are converted once (``Tables``); a run allocates nothing but its result arrays.

Three shortcuts give the reference's results with less work (each argued where it is
implemented): a core keeps its turn through instructions that touch nothing the cores
share ("the engine"); a run whose GM footprint cannot make any L2 set evict keeps
one bit per line instead of the sets ("L2 without evictions"); a larger one keeps a
stamp per line and the lines of each set ("L2 as a line table"), so that a hit costs a
load and a store. Only runs whose lines span more than TABLE_LINES keep the sets
themselves ("L2 and the lines an access touches").
"""

cimport numpy as cnp
from libc.math cimport ceil, fabs, floor
from libc.stdint cimport (INT64_MAX, INT64_MIN, int8_t, int16_t, int32_t, int64_t, uint8_t,
                          uint16_t, uint32_t, uint64_t)
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memset

import numpy as np

cnp.import_array()

include "_constants.pxi"   # NUM_PIPES, MEM_GM, OP_COPY...: pypto.codegen.isa's values

cdef enum:
    L2_WAYS = 16
    NKEYS = NUM_PIPES * NUM_PIPES * 256   # (source pipe, destination pipe, event byte)
    LINE_BATCH = 32                 # L2 accesses queued behind their prefetches
    SEEN_LINES = 1 << 23            # most lines the no-eviction L2 keeps bits for (1 MiB)
    TABLE_LINES = 1 << 24           # most lines the line-table L2 spans (64 MiB of stamps)

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
    K_SCALAR = 10   # raw mode's scalar unit: occupies the issue for scalar_cycles

# What the reference engine must agree with (tests/test_constants.py): its L2_WAYS.
MODEL = {"L2_WAYS": L2_WAYS}
# For tests: lines further apart than TABLE_LINES are kept by sets, not in the line table.
LIMITS = {"TABLE_LINES": TABLE_LINES}

# The kinds by name: fast.py maps opcodes to them (``Tables`` takes that map).
KINDS = {"NOP": K_NOP, "COPY": K_COPY, "MMAD": K_MMAD, "SET": K_SET, "WAIT": K_WAIT,
         "BARRIER": K_BARRIER, "VECTOR": K_VECTOR, "REDUCE": K_REDUCE, "SYNC_ALL": K_SYNC_ALL,
         "SCALAR": K_SCALAR}

# run() status codes.
cdef enum:
    S_OK = 0
    S_USE_REFERENCE = 1
    S_DEADLOCK = 2
    S_CHECK_FAILED = 3

OK = S_OK
USE_REFERENCE = S_USE_REFERENCE
DEADLOCK = S_DEADLOCK
CHECK_FAILED = S_CHECK_FAILED

# Limits of the exact domain: every cost below 2**50 cycles, their sum below 2**60, and
# the byte products of the L2 hit share (eff * hits) below 2**52, exact in a double.
cdef double COST_LIMIT = 1125899906842624.0      # 2**50
cdef double BUDGET_LIMIT = 1152921504606846976.0  # 2**60
cdef double EXACT_LIMIT = 4503599627370496.0      # 2**52
cdef double TAG_LIMIT = 2147483644.0              # 2**31 - 4: L2 tags (and lines) stay small
cdef double TAG_SPAN = 65535.0                    # a run's L2 tags span < 2**16 (uint16)
cdef int64_t DIM_LIMIT = 1 << 24
cdef int64_t STRIDE_LIMIT = 1LL << 32
cdef int64_t ADDR_LIMIT = 1LL << 44
cdef double TABLE_TOUCHES = 2147483648.0          # 2**31: line accesses a line-table run may make
cdef double STAMP_LIMIT = 4294967295.0            # 2**32 - 1: the line table's uint32 stamps


from pypto.codegen.instr cimport Instr  # pypto.codegen.isa.INSTR


cdef packed struct TraceRec:       # pypto.sim.result.TRACE
    int32_t core
    int32_t index
    uint8_t pipe
    uint8_t op
    int64_t start
    int64_t end


cdef struct L2Set:         # one set of the L2 in one 64-byte host cache line
    uint16_t tags[16]       # per way: the tag of its line, less Sim.tag_base
    uint64_t order          # the ways in use by recency, most recent first, a nibble each
    uint32_t used           # how many ways are in use (always the first ones)
    uint32_t gen            # the run that last used the set
    uint64_t pad[2]


cdef struct Sim:
    # target
    int64_t queue_depth
    int64_t cube_overhead
    int64_t vector_overhead
    double vector_bpc
    double l2_read_bpc
    double dram_bpc          # target.dram_bytes_per_cycle: nominal x sustained fraction
    int64_t line_bytes
    int64_t hit_latency
    int64_t miss_latency
    int64_t sync_all_cycles
    int64_t scalar_cycles
    # tables: by opcode (256), by dtype code (256), by path src * NUM_MEMS + dst
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
    L2Set* l2
    uint32_t gen            # this run's generation: a set of another is empty
    int64_t tag_base        # the smallest tag this run can reach (tags are stored less it)
    double tag_lo           # the range of tags prepare() found reachable
    double tag_hi
    int64_t sets
    double inv_sets
    int64_t set_shift       # log2(sets), or -1 if not a power of two
    int64_t line_shift      # log2(line_bytes), or -1 if not a power of two
    int64_t cur_line        # the last line split into (set, tag), for the next one
    int64_t cur_set
    int64_t cur_tag
    int64_t lines           # of the last access: lines touched, hits
    int64_t hits
    # the no-eviction L2 (see "L2 without evictions"): a bit per line, or NULL
    uint64_t* seen
    int64_t seen_base       # the line of bit 0
    int64_t line_lo         # the range of lines prepare() found reachable
    int64_t line_hi
    double touches          # at most this many line accesses (prepare's bound)
    # the line-table L2 (see "L2 as a line table"), or stamps NULL
    uint32_t* stamps        # by line - table_base: its last access, <= stamp_base if absent
    int64_t table_base
    uint32_t now            # the last stamp given
    uint32_t stamp_base     # stamps up to this are of earlier runs: absent
    uint32_t* resident      # per set, its lines (less table_base), used[set] of them
    uint8_t* used
    # shared by all cores
    int64_t server_free
    int64_t l2_hit_bytes
    int64_t gm_read_bytes
    int64_t gm_write_bytes
    int64_t dram_read_bytes
    int64_t dram_write_bytes
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
# how many ways are in use, their tags and their recency order as 16 nibbles of one
# ``uint64`` (way indices, most recent first): the same hits and victims. A line of tag
# -1 hits the first unused way (its tag equals the reference's empty tag).
#
# A set fits one host cache line: tags are ``uint16``, stored less the smallest tag the
# run can reach (``prepare`` bounds them; a run whose tags span more is left to the
# reference). Sets carry the generation of the run that last used them, so a buffer is
# reused by the next run without clearing: a set of an older generation is empty.
# Consecutive lines are split into (set, tag) incrementally; lines are queued in batches
# of LINE_BATCH with their sets prefetched, so the host's cache misses overlap.

cdef extern from *:
    """
    #include <stdint.h>
    #define PYPTO_PREFETCH(p) __builtin_prefetch((const void *)(p), 1, 3)
    #define PYPTO_PREFETCH_READ(p) __builtin_prefetch((const void *)(p), 0, 3)
    #define PYPTO_CTZ(x) __builtin_ctz(x)
    #define PYPTO_CTZLL(x) __builtin_ctzll(x)
    #if defined(__POPCNT__)
    #define PYPTO_POPCOUNTLL(x) __builtin_popcountll(x)
    #else
    static inline int PYPTO_POPCOUNTLL(uint64_t x) {   /* not a libgcc call */
        x = x - ((x >> 1) & 0x5555555555555555ULL);
        x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
        x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
        return (int)((x * 0x0101010101010101ULL) >> 56);
    }
    #endif
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif
    /* Bit w set where tags[w] == tag (16 ways; tags 16-byte aligned). */
    static inline unsigned pypto_match16(const uint16_t *tags, uint16_t tag) {
    #if defined(__SSE2__)
        __m128i t = _mm_set1_epi16((short)tag);
        __m128i a = _mm_cmpeq_epi16(_mm_load_si128((const __m128i *)tags), t);
        __m128i b = _mm_cmpeq_epi16(_mm_load_si128((const __m128i *)(tags + 8)), t);
        return (unsigned)_mm_movemask_epi8(_mm_packs_epi16(a, b));
    #else
        unsigned m = 0;
        for (int w = 0; w < 16; w++) m |= (unsigned)(tags[w] == tag) << w;
        return m;
    #endif
    }
    """
    void PYPTO_PREFETCH(const void* p) noexcept nogil
    void PYPTO_PREFETCH_READ(const void* p) noexcept nogil
    int count_trailing_zeros "PYPTO_CTZ" (uint32_t x) noexcept nogil
    int count_trailing_zeros64 "PYPTO_CTZLL" (uint64_t x) noexcept nogil
    int popcount64 "PYPTO_POPCOUNTLL" (uint64_t x) noexcept nogil
    uint32_t match16 "pypto_match16" (const uint16_t* tags, uint16_t tag) noexcept nogil


cdef uint64_t NIBBLES_ONE = 0x1111111111111111ULL
cdef uint64_t NIBBLES_HIGH = 0x8888888888888888ULL


cdef class _L2Buffer:
    """The sets of one L2, 64-byte aligned; ``next_run`` readies it for a run. Also the
    line table of a run that uses one (``ready_table``)."""

    cdef void* raw
    cdef L2Set* sets
    cdef int64_t nsets
    cdef uint32_t gen
    cdef uint32_t* stamps       # the line table: see "L2 as a line table"
    cdef int64_t capacity       # lines it has stamps for
    cdef uint32_t now           # the last stamp given, by any run
    cdef uint32_t* resident
    cdef uint8_t* used

    def __cinit__(self, int64_t nsets):
        self.raw = calloc(nsets + 1, sizeof(L2Set))     # zero pages cost nothing untouched
        if self.raw == NULL:
            raise MemoryError()
        self.sets = <L2Set*>((<size_t>self.raw + 63) & ~(<size_t>63))
        self.nsets = nsets
        self.gen = 0

    def __dealloc__(self):
        free(self.raw)
        free(self.stamps)
        free(self.resident)
        free(self.used)

    cdef bint ready_table(self, Sim* s, int64_t lines) noexcept nogil:
        """Point ``s`` at a line table of ``lines`` lines from ``s.line_lo`` for a run of
        at most ``s.touches`` line accesses; False if memory is short. Stamps continue
        from the last run's, so the table needs no clearing (see "L2 as a line table")."""
        if lines > self.capacity:
            free(self.stamps)
            self.stamps = <uint32_t*>calloc(lines, sizeof(uint32_t))  # pages fault in as used
            self.capacity = lines if self.stamps != NULL else 0
            self.now = 0
        if self.resident == NULL:
            self.resident = <uint32_t*>malloc(self.nsets * L2_WAYS * sizeof(uint32_t))
        if self.used == NULL:
            self.used = <uint8_t*>malloc(self.nsets)
        if self.stamps == NULL or self.resident == NULL or self.used == NULL:
            return False
        if <double>self.now + s.touches >= STAMP_LIMIT:    # the stamps would wrap: clear
            memset(self.stamps, 0, self.capacity * sizeof(uint32_t))
            self.now = 0
        memset(self.used, 0, self.nsets)
        s.stamps = self.stamps
        s.table_base = s.line_lo
        s.now = s.stamp_base = self.now
        s.resident = self.resident
        s.used = self.used
        return True

    cdef uint32_t next_run(self) noexcept:
        self.gen += 1
        if self.gen == 0:       # after 2**32 runs: clear once, start again
            memset(self.raw, 0, (self.nsets + 1) * sizeof(L2Set))
            self.gen = 1
        return self.gen


# Spare buffers by number of sets (a buffer serves one run at a time; runs on several
# threads take several).
_spare_l2: dict = {}


cdef _L2Buffer _take_l2(int64_t nsets):
    spare = _spare_l2.get(nsets)
    if spare:
        return spare.pop()
    return _L2Buffer(nsets)


cdef void _give_l2(_L2Buffer buffer):
    if buffer.nsets not in _spare_l2 and len(_spare_l2) >= 4:
        _spare_l2.clear()
    spare = _spare_l2.setdefault(buffer.nsets, [])
    if len(spare) < 2:
        spare.append(buffer)


cdef class _Scratch:
    """Working memory of a run: ``words`` int64s, kept for the next run. The first
    NKEYS are the flag keys' owners (see ``prepare``): stamps that only grow, so they
    need no clearing between runs."""

    cdef int64_t* words
    cdef int64_t size
    cdef int64_t stamp      # the next run's first owner stamp

    def __dealloc__(self):
        free(self.words)

    cdef void reserve(self, int64_t size) except *:
        cdef int64_t k
        if size > self.size:
            free(self.words)
            self.words = NULL
            self.size = 0
            self.words = <int64_t*>malloc(sizeof(int64_t) * size)
            if self.words == NULL:
                raise MemoryError()
            self.size = size
            for k in range(NKEYS):
                self.words[k] = -1      # owned by no run


_spare_scratch: list = []


cdef _Scratch _take_scratch(int64_t size):
    cdef _Scratch scratch = _spare_scratch.pop() if _spare_scratch else _Scratch()
    scratch.reserve(size)
    return scratch


cdef void _give_scratch(_Scratch scratch):
    if len(_spare_scratch) < 2:
        _spare_scratch.append(scratch)


cdef inline void split_line(Sim* s, int64_t line, int64_t* set_, int64_t* tag) noexcept nogil:
    """(line mod sets, line // sets) with Python's floor semantics."""
    cdef int64_t q, r
    if s.set_shift >= 0:        # two's complement: the mask and shift floor
        set_[0] = line & (s.sets - 1)
        tag[0] = line >> s.set_shift
        return
    q = <int64_t>(<double>line * s.inv_sets)   # by a reciprocal: off by at most one or two
    r = line - q * s.sets
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


cdef inline bint l2_access(L2Set* st, int64_t tag, uint16_t stored,
                           uint32_t gen) noexcept nogil:
    """``reference.L2.access`` of a line of ``tag`` (``stored`` as the set keeps it) in
    set ``st``; ``gen`` is the run's generation."""
    cdef uint64_t order, x, zero, below
    cdef uint32_t used, match
    cdef int w, p
    if st.gen != gen:               # last used by another run: empty
        st.gen = gen
        st.used = 0
        st.order = 0
    used = st.used
    order = st.order
    match = match16(st.tags, stored) & ((<uint32_t>1 << used) - 1)   # ways in use holding it
    if match:
        w = count_trailing_zeros(match)
        if (order & 15) == <uint64_t>w:         # already the most recent
            return True
        x = order ^ (NIBBLES_ONE * <uint64_t>w)     # its place p in the order: x's first
        zero = (x - NIBBLES_ONE) & ~x & NIBBLES_HIGH   # zero nibble (exact for the first)
        p = count_trailing_zeros64(zero) >> 2
        below = (<uint64_t>1 << (4 * p)) - 1        # more recent ways move down one place
        st.order = (order & ~((below << 4) | 15)) | ((order & below) << 4) | <uint64_t>w
        return True
    if used < L2_WAYS:              # the first unused way (a line of tag -1 hits it)
        w = <int>used
        st.used = used + 1
    else:                           # the least recently used way
        w = <int>(order >> 60)
    st.tags[w] = stored
    st.order = (order << 4) | <uint64_t>w
    return tag == -1 and w == <int>used


def _l2_hits(int64_t line_bytes, int64_t l2_bytes, lines):
    """For tests: which of ``lines`` (in order, from a cold L2) hit."""
    cdef int64_t sets = max(1, l2_bytes // (line_bytes * L2_WAYS)), i, set_, tag
    cdef _L2Buffer buffer = _L2Buffer(sets)
    cdef Sim s
    s.sets, s.inv_sets, s.set_shift = sets, 1.0 / sets, -1
    for i in range(63):
        if (<int64_t>1 << i) == sets:
            s.set_shift = i
    s.gen = buffer.next_run()
    s.tag_base = -1
    for i in range(len(lines)):
        split_line(&s, lines[i], &set_, &tag)
        s.tag_base = min(s.tag_base, tag)
    out = []
    for i in range(len(lines)):
        split_line(&s, lines[i], &set_, &tag)
        out.append(bool(l2_access(buffer.sets + set_, tag, <uint16_t>(tag - s.tag_base),
                                  s.gen)))
    return out


cdef inline int64_t run_lines(Sim* s, L2Set** sets, const int64_t* tags,
                              int64_t n) noexcept nogil:
    """Access the ``n`` queued lines in order; how many hit."""
    cdef int64_t i, hits = 0, tag_base = s.tag_base
    cdef uint32_t gen = s.gen
    for i in range(n):
        hits += l2_access(sets[i], tags[i], <uint16_t>(tags[i] - tag_base), gen)
    return hits


cdef void touch_lines(Sim* s, int64_t base, int64_t rows, int64_t cols, int64_t rs,
                      int64_t cs, int64_t isz) noexcept nogil:
    """Access every line ``reference.gm_lines`` lists, in its order; counts the lines and
    hits into ``s.lines`` and ``s.hits``.

    Every shape is ``outer`` runs of ``inner`` pieces ``width`` bytes wide, a piece
    touching the lines from its first byte's to its last's: one contiguous piece; a
    piece per row; a byte per row (broadcast: the line of the row's start); a byte per
    element (the line of the element's start). When rows start a whole number of lines
    apart, every row touches the lines of the first one moved by that number: those are
    walked without dividing."""
    cdef int64_t outer = rows, inner = 1, width = cols * isz, step = rs * isz, stride = 0
    cdef int64_t i, j, row, at, line, last, d, set_, tag, n = 0, count = 0, hits = 0
    cdef int64_t nsets = s.sets, cur_line = s.cur_line, cur_set = s.cur_set
    cdef int64_t cur_tag = s.cur_tag, per_row, set_step, tag_step, row_set, row_tag
    cdef L2Set* l2 = s.l2
    cdef L2Set* sets[LINE_BATCH]
    cdef int64_t tags[LINE_BATCH]
    if (cols == 1 or cs == 1) and (rows == 1 or rs == cols):
        outer, width = 1, rows * cols * isz
    elif cs == 0:
        width = 1
    elif cs != 1:
        inner, width, stride = cols, 1, cs * isz
    if inner == 1 and (outer == 1 or pymod(step, s.line_bytes) == 0):   # rows whole lines apart
        line = line_of(s, base)
        per_row = line_of(s, base + width - 1) - line + 1
        count = outer * per_row
        split_line(s, line, &row_set, &row_tag)
        split_line(s, floordiv(step, s.line_bytes), &set_step, &tag_step)
        for i in range(outer):
            set_, tag = row_set, row_tag
            for j in range(per_row):
                PYPTO_PREFETCH(l2 + set_)
                sets[n] = l2 + set_
                tags[n] = tag
                n += 1
                if n == LINE_BATCH:
                    hits += run_lines(s, sets, tags, n)
                    n = 0
                set_ += 1
                if set_ == nsets:
                    set_ = 0
                    tag += 1
            row_set += set_step
            row_tag += tag_step
            if row_set >= nsets:
                row_set -= nsets
                row_tag += 1
        s.hits = hits + run_lines(s, sets, tags, n)
        s.lines = count
        return
    row = base
    for i in range(outer):
        at = row
        for j in range(inner):
            line = line_of(s, at)
            last = line_of(s, at + width - 1)
            count += last - line + 1
            while line <= last:
                d = line - cur_line
                if 0 <= d < nsets:      # near the last line: step from its (set, tag)
                    set_ = cur_set + d
                    tag = cur_tag
                    if set_ >= nsets:
                        set_ -= nsets
                        tag += 1
                else:
                    split_line(s, line, &set_, &tag)
                cur_line, cur_set, cur_tag = line, set_, tag
                PYPTO_PREFETCH(l2 + set_)
                sets[n] = l2 + set_
                tags[n] = tag
                n += 1
                if n == LINE_BATCH:
                    hits += run_lines(s, sets, tags, n)
                    n = 0
                line += 1
            at += stride
        row += step
    s.hits = hits + run_lines(s, sets, tags, n)
    s.lines = count
    s.cur_line, s.cur_set, s.cur_tag = cur_line, cur_set, cur_tag


# -- L2 without evictions ---------------------------------------------------------------
#
# A set holds L2_WAYS lines; it evicts one only when a line of a tag it has not seen
# arrives while it is full. The lines a run can reach lie in [line_lo, line_hi]
# (``prepare`` bounds every GM access exactly); when that range is at most
# L2_WAYS x sets lines long, no set ever sees more than L2_WAYS distinct tags, so
# nothing is ever evicted and a line hits exactly when it was touched before in the
# run. Such runs (every GM footprint up to the L2's size) keep one bit per line instead
# of the sets: the same hits, without the LRU bookkeeping. A line of tag -1 (lines
# -sets..-1) hits even the first time in the reference (it matches an empty way), so
# the bits are used only when line_lo >= 0.

cdef inline int64_t seen_range(uint64_t* seen, int64_t first, int64_t last) noexcept nogil:
    """How many of bits ``first..last`` were set; sets them all."""
    cdef int64_t w = first >> 6, w_last = last >> 6, hits = 0
    cdef uint64_t mask, word
    if w == w_last:
        mask = (~<uint64_t>0 >> (63 - (last - first))) << (first & 63)
        word = seen[w]
        seen[w] = word | mask
        return popcount64(word & mask)
    mask = ~<uint64_t>0 << (first & 63)
    hits = popcount64(seen[w] & mask)
    seen[w] |= mask
    w += 1
    while w < w_last:
        hits += popcount64(seen[w])
        seen[w] = ~<uint64_t>0
        w += 1
    mask = ~<uint64_t>0 >> (63 - (last & 63))
    hits += popcount64(seen[w] & mask)
    seen[w] |= mask
    return hits


cdef int64_t seen_rows(uint64_t* seen, int64_t pos, int64_t n, int64_t step,
                       int64_t width) noexcept nogil:
    """Bits ``pos + i * step + j`` for ``i < n``, ``j < width`` (``1 <= width <= step
    <= 64``, so they are distinct): how many were set; sets them. A word at a time."""
    cdef uint64_t row_bits = ~(<uint64_t>0) >> (64 - width), pattern = 0, mask, carry = 0
    cdef uint64_t word
    cdef int64_t k = 0, o, w = 0, hits = 0, last_end
    while k < 64:                       # the rows starting in one word, from its bit 0
        pattern |= row_bits << k
        k += step
    while n > 0:
        w = pos >> 6
        o = pos & 63
        k = (63 - o) // step + 1        # rows starting in this word
        if k > n:
            k = n
        last_end = o + (k - 1) * step + width   # one past the last row's last bit
        mask = pattern << o
        if last_end < 64:               # fewer rows left than fit: drop the bits after
            mask &= ~(<uint64_t>0) >> (64 - last_end)
        mask |= carry                   # the previous word's last row, continued
        word = seen[w]
        hits += popcount64(word & mask)
        seen[w] = word | mask
        carry = ~(<uint64_t>0) >> (128 - last_end) if last_end > 64 else 0
        pos += k * step
        n -= k
    if carry:
        word = seen[w + 1]
        hits += popcount64(word & carry)
        seen[w + 1] = word | carry
    return hits


cdef void touch_seen(Sim* s, int64_t base, int64_t rows, int64_t cols, int64_t rs,
                     int64_t cs, int64_t isz) noexcept nogil:
    """``touch_lines`` without evictions: the same pieces in the same order, each one's
    lines counted as hits where their bits were already set. (Order matters only where
    pieces share lines; rows whole lines apart that do not overlap are done together.)"""
    cdef int64_t outer = rows, inner = 1, width = cols * isz, step = rs * isz, stride = 0
    cdef int64_t i, j, row, at, line, last, count = 0, hits = 0, origin = s.seen_base
    cdef int64_t line_step, per_row
    cdef uint64_t* seen = s.seen
    cdef uint64_t bit
    if (cols == 1 or cs == 1) and (rows == 1 or rs == cols):
        outer, width = 1, rows * cols * isz
    elif cs == 0:
        width = 1
    elif cs != 1:
        inner, width, stride = cols, 1, cs * isz
    if inner == 1 and outer > 1 and step > 0 and pymod(step, s.line_bytes) == 0:
        line = line_of(s, base) - origin
        per_row = line_of(s, base + width - 1) - origin - line + 1
        line_step = floordiv(step, s.line_bytes)
        if per_row <= line_step <= 64:          # rows on distinct lines
            s.hits = seen_rows(seen, line, outer, line_step, per_row)
            s.lines = outer * per_row
            return
    row = base
    for i in range(outer):
        at = row
        for j in range(inner):
            line = line_of(s, at) - origin
            last = line_of(s, at + width - 1) - origin
            count += last - line + 1
            if line == last:
                bit = <uint64_t>1 << (line & 63)
                hits += (seen[line >> 6] & bit) != 0
                seen[line >> 6] |= bit
            else:
                hits += seen_range(seen, line, last)
            at += stride
        row += step
    s.hits = hits
    s.lines = count


# -- L2 as a line table -----------------------------------------------------------------
#
# When a run's lines can evict (its GM footprint is larger than the L2) but span at most
# TABLE_LINES, from line 0 up, the L2 is kept by line instead of by set: a ``uint32``
# stamp per line in [line_lo, line_hi], the stamp of its last access (a counter that
# grows by one per access), or one no larger than ``stamp_base`` if the line is not in
# the L2; and per set the lines it holds (``resident``, ``used[set]`` of them). A hit is
# one load and one store. A miss puts its line in the set's next unused way or, in a
# full set, in place of the line of smallest stamp, whose stamp is zeroed.
#
# The same hits as the reference: a set there holds the lines of its last L2_WAYS
# distinct tags (empty ways, stamp 0, are taken first, in order; then the smallest
# stamp), and which way a line occupies changes nothing but which way a line of tag -1
# would match, and tags here are >= 0. Stamps go on from run to run on one buffer, so
# a stamp an earlier run left is <= this run's ``stamp_base`` (absent) and the table is
# never cleared, unless the stamps could wrap within the run (``ready_table``).

cdef void table_miss(Sim* s, int64_t line, int64_t at) noexcept nogil:
    """Put ``line`` (its stamp at ``at``) in its set, evicting the least recently used."""
    cdef int64_t set_ = line % s.sets, first = set_ * L2_WAYS, w, victim
    cdef uint32_t* resident = s.resident + first
    cdef uint32_t* stamps = s.stamps
    cdef uint32_t oldest
    if s.used[set_] < L2_WAYS:
        resident[s.used[set_]] = <uint32_t>at
        s.used[set_] += 1
        return
    victim = 0
    oldest = stamps[resident[0]]
    for w in range(1, L2_WAYS):
        if stamps[resident[w]] < oldest:
            oldest = stamps[resident[w]]
            victim = w
    stamps[resident[victim]] = 0
    resident[victim] = <uint32_t>at


cdef inline int64_t table_lines(Sim* s, int64_t line, int64_t n, int64_t* now) noexcept nogil:
    """Access lines ``line .. line + n - 1`` in order; how many hit."""
    cdef uint32_t* stamps = s.stamps
    cdef uint32_t old = s.stamp_base, t = <uint32_t>now[0]
    cdef int64_t j, at = line - s.table_base, hits = 0
    for j in range(n):
        t += 1
        if stamps[at + j] > old:
            hits += 1
        else:
            table_miss(s, line + j, at + j)
        stamps[at + j] = t
    now[0] = t
    return hits


cdef void touch_table(Sim* s, int64_t base, int64_t rows, int64_t cols, int64_t rs,
                      int64_t cs, int64_t isz) noexcept nogil:
    """``touch_lines`` on the line table: the same lines in the same order."""
    cdef int64_t outer = rows, inner = 1, width = cols * isz, step = rs * isz, stride = 0
    cdef int64_t i, j, row, at, line, last, count = 0, hits = 0, now = s.now
    cdef int64_t line_step, per_row
    if (cols == 1 or cs == 1) and (rows == 1 or rs == cols):
        outer, width = 1, rows * cols * isz
    elif cs == 0:
        width = 1
    elif cs != 1:
        inner, width, stride = cols, 1, cs * isz
    if inner == 1 and outer > 1 and pymod(step, s.line_bytes) == 0:   # rows whole lines apart
        line = line_of(s, base)
        per_row = line_of(s, base + width - 1) - line + 1
        line_step = floordiv(step, s.line_bytes)
        for i in range(outer):
            hits += table_lines(s, line, per_row, &now)
            line += line_step
        count = outer * per_row
    else:
        row = base
        for i in range(outer):
            at = row
            for j in range(inner):
                line = line_of(s, at)
                last = line_of(s, at + width - 1)
                count += last - line + 1
                hits += table_lines(s, line, last - line + 1, &now)
                at += stride
            row += step
    s.now = <uint32_t>now
    s.hits = hits
    s.lines = count


def _l2_table_hits(int64_t line_bytes, int64_t l2_bytes, runs, uint32_t now=0):
    """For tests: which lines of each run of ``runs`` (lists of lines >= 0, each run from
    a cold L2) hit on the line table, one buffer for all runs, its stamps from ``now``."""
    cdef int64_t sets = max(1, l2_bytes // (line_bytes * L2_WAYS)), i, stamp
    cdef _L2Buffer buffer = _L2Buffer(sets)
    cdef Sim s
    buffer.now = now
    s.sets = sets
    out = []
    for lines in runs:
        s.line_lo = min(lines, default=0)
        s.touches = len(lines)
        if not buffer.ready_table(&s, max(lines, default=0) - s.line_lo + 1):
            raise MemoryError()
        stamp = s.now
        out.append([bool(table_lines(&s, line, 1, &stamp)) for line in lines])
        s.now = <uint32_t>stamp
        buffer.now = s.now
    return out


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
    """``reference.copy``: (pipe free, completion) of a DMA starting at ``start``. The
    pipe's time counts the bytes read (``sdtype``), GM traffic the GM tensor's bytes
    and ``path_bytes`` the bytes written (``dtype``)."""
    cdef int64_t src = r.a_mem, dst = r.d_mem
    cdef int pi = src * NUM_MEMS + dst
    cdef int64_t read_isz = s.itemsize[r.sdtype], write_isz = s.itemsize[r.dtype]
    cdef int64_t rows, cols, rs, cs, run, runs, read, eff, written, written_eff, min_burst
    cdef int64_t base, gm, hits, n, isz, occupy, dram, dram_bytes, l2_latency, done
    cdef double row_time, rate = s.path_rate[pi], hit_eff, miss_eff
    copy_shape(r, &rows, &cols, &rs, &cs)
    min_burst = s.path_min_burst[pi]
    burst(rows, cols, rs, cs, read_isz, &run, &runs)
    read = run * runs
    eff = imax(run, min_burst) * runs
    if write_isz == read_isz:
        written = read
        written_eff = eff
    else:
        burst(rows, cols, rs, cs, write_isz, &run, &runs)
        written = run * runs
        written_eff = imax(run, min_burst) * runs
    s.path_bytes[pi] += written
    row_time = <double>rows * s.path_row_cycles[pi]
    if src != MEM_GM and dst != MEM_GM:
        done = start + <int64_t>ceil(<double>eff / rate + row_time)
        free_at[0] = done
        complete[0] = done + s.path_latency[pi]
        return
    isz = read_isz if src == MEM_GM else write_isz     # the GM tensor's element size
    gm = r.gm if r.gm >= 0 else r.gm + s.nsym
    base = s.bases[gm] + (r.a_addr if src == MEM_GM else r.d_addr) * isz
    if s.seen != NULL:
        touch_seen(s, base, rows, cols, rs, cs, isz)
    elif s.stamps != NULL:
        touch_table(s, base, rows, cols, rs, cs, isz)
    else:
        touch_lines(s, base, rows, cols, rs, cs, isz)
    hits, n = s.hits, s.lines
    if src == MEM_GM:
        hit_eff = <double>(eff * hits) / <double>n
        miss_eff = <double>eff - hit_eff
        s.gm_read_bytes += read
        s.l2_hit_bytes += read * hits / n
        occupy = <int64_t>ceil(hit_eff / s.l2_read_bpc + miss_eff / rate + row_time)
        dram_bytes = (n - hits) * s.line_bytes      # a miss fetches its whole line
        s.dram_read_bytes += dram_bytes
        l2_latency = s.miss_latency if hits < n else s.hit_latency
    else:
        s.gm_write_bytes += written
        occupy = <int64_t>ceil(<double>eff / rate + row_time)
        dram_bytes = written_eff                    # the L2 merges partial lines
        s.dram_write_bytes += dram_bytes
        l2_latency = 0
    dram = <int64_t>ceil(<double>dram_bytes / s.dram_bpc)
    done = start + occupy
    if dram > 0:  # only DRAM traffic queues on the DRAM server
        s.server_free = imax(start, s.server_free) + dram
        done = imax(done, s.server_free)
    free_at[0] = done
    complete[0] = done + s.path_latency[pi] + l2_latency


# -- the static checks of pypto.sim.check ----------------------------------------------------
#
# ``check_program`` asks ``check`` first: a program it passes is fine; one it fails is
# checked again by NumPy, which names the first problem. The conditions are NumPy's, on
# int64 that wraps as NumPy's does (the products and sums below are taken modulo 2**64).

cdef struct Limits:             # what check_program checks operands against
    const int64_t* capacity     # by memory code (NUM_MEMS): bytes, 0 if the target lacks it
    const int64_t* alignment
    const int64_t* sizes        # elements of each GM tensor
    int64_t nsym
    const int64_t* itemsize     # by dtype code (256), 0 if unknown
    const uint8_t* strict       # by opcode (256): cube and vector ops, which align strictly


cdef inline int64_t wrap_mul(int64_t a, int64_t b) noexcept nogil:
    return <int64_t>(<uint64_t>a * <uint64_t>b)


cdef inline int64_t wrap_add(int64_t a, int64_t b) noexcept nogil:
    return <int64_t>(<uint64_t>a + <uint64_t>b)


cdef inline bint operand_ok(const Limits* t, uint8_t op, uint8_t mem, int64_t addr,
                            int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t gm,
                            int64_t isz) noexcept nogil:
    cdef int64_t span_r, span_c, lo, hi, end, m, align
    if mem == 0:
        return True
    if rows <= 0 or cols <= 0:
        return False
    span_r = wrap_mul(rows - 1, rs)
    span_c = wrap_mul(cols - 1, cs)
    if mem == MEM_GM:
        if gm < 0 or gm >= t.nsym:
            return False
        lo = wrap_add(wrap_add(addr, span_r if span_r < 0 else 0), span_c if span_c < 0 else 0)
        hi = wrap_add(wrap_add(addr, span_r if span_r > 0 else 0), span_c if span_c > 0 else 0)
        return lo >= 0 and hi < t.sizes[gm]
    if mem >= NUM_MEMS:             # a code beyond Mem: no memory at all
        return False
    m = mem
    if t.capacity[m] == 0 or rs < 0 or cs < 0 or addr < 0:
        return False
    end = wrap_add(addr, wrap_mul(wrap_add(wrap_add(span_r, span_c), 1), isz))
    if end > t.capacity[m]:
        return False
    if not t.strict[op]:
        return True
    align = t.alignment[m]
    if align & (align - 1) == 0:    # a power of two, as targets validate: no division
        return addr & (align - 1) == 0
    return addr % align == 0


cdef inline bint record_ok(const Limits* t, const Instr* r) noexcept nogil:
    """Whether ``r`` passes check_program's per-instruction checks."""
    if r.flags & F_ATOMIC and (r.op != OP_COPY or r.d_mem != MEM_GM):
        return False
    return (operand_ok(t, r.op, r.d_mem, r.d_addr, r.d_rows, r.d_cols, r.d_rs, r.d_cs, r.gm,
                       t.itemsize[r.dtype])
            and operand_ok(t, r.op, r.a_mem, r.a_addr, r.a_rows, r.a_cols, r.a_rs, r.a_cs,
                           r.gm, t.itemsize[r.sdtype])
            and operand_ok(t, r.op, r.b_mem, r.b_addr, r.b_rows, r.b_cols, r.b_rs, r.b_cs,
                           r.gm, t.itemsize[r.sdtype]))


def check(list cores, const int64_t[::1] capacity, const int64_t[::1] alignment,
          const int64_t[::1] sizes, int64_t nsym, const int64_t[::1] itemsize,
          const uint8_t[::1] strict):
    """Whether the per-core ``INSTR`` arrays ``cores`` (C-contiguous) pass
    ``pypto.sim.check.check_program``: every operand within its tensor (``sizes``: the
    element counts of the ``nsym`` GM tensors, at least one entry) or memory, atomic
    flags only on copies into GM, as many SYNC_ALLs on every core."""
    cdef Limits t
    cdef const Instr* code
    cdef int64_t c, i, n, sync_alls, first_sync_alls = 0
    cdef bint ok = True
    cdef cnp.ndarray arr
    t.capacity, t.alignment = &capacity[0], &alignment[0]
    t.sizes, t.nsym = &sizes[0], nsym
    t.itemsize, t.strict = &itemsize[0], &strict[0]
    for c in range(len(cores)):
        arr = cores[c]
        code = <const Instr*>cnp.PyArray_DATA(arr)
        n = arr.shape[0]
        sync_alls = 0
        with nogil:
            for i in range(n):
                if not record_ok(&t, code + i):
                    ok = False
                    break
                sync_alls += code[i].op == OP_SYNC_ALL
        if c == 0:
            first_sync_alls = sync_alls
        if not ok or sync_alls != first_sync_alls:
            return False
    return True


# -- the check and flag-matching pass -------------------------------------------------------

cdef double cost_bound(Sim* s, const Instr* r, int kind) noexcept nogil:
    """An upper bound of what one instruction adds to any time, or -1 when a value could
    leave the exact int64/double domain (then the reference engine runs instead)."""
    cdef int64_t rows, cols, rs, cs, isz, run, runs, src, dst, gm, addr
    cdef int64_t span_r, span_c, low, high
    cdef const int64_t* f
    cdef double x, eff, lines, slowest, far, first, extent, per_tag, dram_max = 0.0
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
    if kind == K_SCALAR:
        return <double>s.scalar_cycles + 2
    if kind != K_COPY:
        return 2
    src, dst = r.a_mem, r.d_mem
    if src >= NUM_MEMS or dst >= NUM_MEMS or not s.path_ok[src * NUM_MEMS + dst]:
        return -1
    pi = src * NUM_MEMS + dst
    if s.itemsize[r.sdtype] <= 0 or s.itemsize[r.dtype] <= 0:
        return -1
    copy_shape(r, &rows, &cols, &rs, &cs)
    if not (0 <= rows <= DIM_LIMIT and 0 <= cols <= DIM_LIMIT):
        return -1
    if not (-STRIDE_LIMIT <= rs <= STRIDE_LIMIT and -STRIDE_LIMIT <= cs <= STRIDE_LIMIT):
        return -1
    # bytes as charged, read or written (whichever is more)
    burst(rows, cols, rs, cs, imax(s.itemsize[r.sdtype], s.itemsize[r.dtype]), &run, &runs)
    eff = <double>imax(run, s.path_min_burst[pi]) * <double>runs
    if src == MEM_GM or dst == MEM_GM:
        if rows < 1 or cols < 1:
            return -1   # no lines: the reference divides by zero
        isz = s.itemsize[r.sdtype] if src == MEM_GM else s.itemsize[r.dtype]   # GM tensor's
        gm = r.gm if r.gm >= 0 else r.gm + s.nsym
        addr = r.a_addr if src == MEM_GM else r.d_addr
        if not (0 <= gm < s.nsym and -ADDR_LIMIT <= addr <= ADDR_LIMIT):
            return -1
        lines = <double>rows * <double>cols * isz + 2.0 * rows + 2.0
        if eff * lines >= EXACT_LIMIT:
            return -1
        s.touches += <double>runs * (<double>run / s.line_bytes + 2.0)   # line accesses
        dram_max = lines * s.line_bytes     # whole lines, each missed at most once per touch
        if dram_max >= EXACT_LIMIT:
            return -1
        extent = (rows * fabs(<double>rs) + cols * fabs(<double>cs) + <double>rows * cols) * isz
        far = fabs(<double>s.bases[gm]) + fabs(<double>addr) * isz + extent
        if far / s.line_bytes / s.sets + 2 >= TAG_LIMIT:
            return -1   # an L2 tag beyond 2**31
        # the tags of the lines it touches: first byte +- extent, floored, with a margin
        first = <double>s.bases[gm] + <double>addr * isz
        per_tag = <double>s.line_bytes * <double>s.sets
        s.tag_lo = min(s.tag_lo, floor((first - extent) / per_tag) - 1)
        s.tag_hi = max(s.tag_hi, floor((first + extent) / per_tag) + 1)
        # the lines it touches, exactly: its lowest and highest byte (below 2**62 in
        # magnitude: bases < 2**50, |addr| <= 2**44, rows <= 2**24, |strides| <= 2**32)
        span_r = (rows - 1) * rs * isz
        span_c = (cols - 1) * cs * isz
        low = s.bases[gm] + addr * isz
        high = low + (span_r if span_r > 0 else 0) + (span_c if span_c > 0 else 0) + isz - 1
        low += (span_r if span_r < 0 else 0) + (span_c if span_c < 0 else 0)
        s.line_lo = min(s.line_lo, floordiv(low, s.line_bytes))
        s.line_hi = max(s.line_hi, floordiv(high, s.line_bytes))
    slowest = s.path_rate[pi]
    if s.l2_read_bpc < slowest:
        slowest = s.l2_read_bpc
    if s.dram_bpc < slowest:
        slowest = s.dram_bpc
    x = (2.0 * eff / slowest + dram_max / slowest + rows * s.path_row_cycles[pi] + s.path_latency[pi]
         + s.hit_latency + s.miss_latency + 4)
    return x if x < COST_LIMIT else -1


cdef int64_t prepare(Sim* s, const Instr** code, const int64_t* length, const int64_t* offset,
                     int64_t ncores, int64_t* set_base, int64_t* wait_base, int64_t* next_set,
                     int64_t* wait_takes, int64_t* head, int64_t* tail, int64_t* owner,
                     int64_t stamp, const Limits* limits, bint* failed) noexcept nogil:
    """Check every instruction and match flags.

    With ``limits``, also run check_program's checks: a problem sets ``failed`` and
    returns the instruction's index.

    SET_FLAGs and WAIT_FLAGs are numbered in program order, core after core (core c's
    first at ``set_base[c]``, ``wait_base[c]``). The k-th wait on a (source,
    destination, event) key takes the k-th set on it if that comes earlier in program
    order: ``wait_takes`` gets that set's number, or -1 (a deadlock when reached).
    Returns the index of the first instruction outside the exact domain, or -1; cores
    with unequal numbers of SYNC_ALLs are left to the reference too (it raises).
    ``owner[key]`` is ``stamp + c`` once core c of this run has used the key (older
    runs left smaller stamps)."""
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
            if limits != NULL and not record_ok(limits, r):
                failed[0] = True
                return offset[c] + i
            kind = s.kind[r.op]
            if kind == K_INVALID or r.pipe >= NUM_PIPES:
                return offset[c] + i
            if kind == K_SYNC_ALL:
                sync_alls += 1
            if kind == K_SET or kind == K_WAIT:
                if r.pipe2 >= NUM_PIPES:
                    return offset[c] + i
                if kind == K_SET:
                    key = (r.pipe * NUM_PIPES + r.pipe2) * 256 + <uint8_t>r.event
                else:
                    key = (r.pipe2 * NUM_PIPES + r.pipe) * 256 + <uint8_t>r.event
                if owner[key] != stamp + c:     # first use of this key on this core
                    owner[key] = stamp + c
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
            failed[0] = limits != NULL
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
#
# Cores take turns in the order of their next instruction's issue time (ties: lower core
# first), which orders their use of what they share: the L2 and the DRAM server, which
# GM copies use, and SYNC_ALL. Everything else a core does touches only its own state,
# so once it has its turn it keeps going through such instructions (the heap is not
# consulted) and hands the turn back only before a GM copy, a SYNC_ALL or a deadlocking
# WAIT_FLAG (so that the deadlock reported is the first one reached, as in the
# reference): the same order of every shared event, with far fewer heap operations.

cdef inline bint waits_its_turn(const Sim* s, const Instr* r,
                                const int64_t* taken) noexcept nogil:
    """Whether ``r`` must wait for its core's turn: it touches what cores share, or is a
    WAIT_FLAG that deadlocks (``taken[0]``, if it is a wait: the set it takes, or -1)."""
    cdef int kind = s.kind[r.op]
    if kind == K_COPY:
        return r.a_mem == MEM_GM or r.d_mem == MEM_GM
    if kind == K_WAIT:
        return taken[0] < 0
    return kind == K_SYNC_ALL


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


cdef class Tables:
    """A target as the engine reads it, built once per target by ``fast.py``: the
    target's fields of ``Sim`` and of the check's ``Limits``, pointing into lookup
    tables this object keeps alive.

    ``tables`` are the arrays of ``fast._tables`` (by opcode, dtype code, path),
    ``scalars`` its numbers, ``limits`` the target's arrays of check_program's checks
    (capacity, alignment, itemsize, strict)."""

    cdef Sim sim
    cdef Limits limits
    cdef tuple arrays

    def __init__(self, tuple tables, tuple scalars, tuple limits):
        cdef const uint8_t[::1] kind_table = tables[0]
        cdef const double[::1] vector_cost = tables[1]
        cdef const int64_t[::1] itemsize = tables[2]
        cdef const int64_t[::1] fractal = tables[3]
        cdef const uint8_t[::1] path_ok = tables[4]
        cdef const double[::1] path_rate = tables[5]
        cdef const int64_t[::1] path_latency = tables[6]
        cdef const int64_t[::1] path_min_burst = tables[7]
        cdef const double[::1] path_row_cycles = tables[8]
        cdef const int64_t[::1] capacity = limits[0]
        cdef const int64_t[::1] alignment = limits[1]
        cdef const int64_t[::1] check_itemsize = limits[2]
        cdef const uint8_t[::1] strict = limits[3]
        cdef Sim* s = &self.sim
        cdef int k
        self.arrays = (tables, limits)      # the pointers below stay valid
        memset(s, 0, sizeof(Sim))
        s.queue_depth = scalars[0]
        s.cube_overhead = scalars[1]
        s.vector_overhead = scalars[2]
        s.vector_bpc = scalars[3]
        s.l2_read_bpc = scalars[4]
        s.dram_bpc = scalars[5]
        s.line_bytes = scalars[6]
        s.hit_latency = scalars[7]
        s.miss_latency = scalars[8]
        s.sets = scalars[9]
        s.sync_all_cycles = scalars[10]
        s.scalar_cycles = scalars[11]
        s.inv_sets = 1.0 / s.sets
        s.line_shift = s.set_shift = -1
        for k in range(63):
            if (<int64_t>1 << k) == s.line_bytes:
                s.line_shift = k
            if (<int64_t>1 << k) == s.sets:
                s.set_shift = k
        s.kind = &kind_table[0]
        s.vector_cost = &vector_cost[0]
        s.itemsize = &itemsize[0]
        s.fractal = &fractal[0]
        s.path_ok = &path_ok[0]
        s.path_rate = &path_rate[0]
        s.path_latency = &path_latency[0]
        s.path_min_burst = &path_min_burst[0]
        s.path_row_cycles = &path_row_cycles[0]
        self.limits.capacity, self.limits.alignment = &capacity[0], &alignment[0]
        self.limits.itemsize, self.limits.strict = &check_itemsize[0], &strict[0]


cdef inline cnp.ndarray int64_zeros(int nd, int64_t d0, int64_t d1, int64_t d2):
    cdef cnp.npy_intp dims[3]
    dims[0], dims[1], dims[2] = d0, d1, d2
    return cnp.PyArray_ZEROS(nd, dims, cnp.NPY_INT64, 0)


def run(list cores, cnp.ndarray bases, Tables target, trace, cnp.ndarray sizes=None):
    """Simulate the per-core ``INSTR`` arrays ``cores`` (C-contiguous) on ``target``;
    ``bases`` (int64) are the symbols' GM base addresses. Fills ``trace`` (a ``TRACE``
    array with one record per instruction) unless it is None. ``sizes`` (int64, the
    symbols' element counts, at least one entry) asks for check_program's checks on the
    way.

    Returns ``(status, core, index, l2_hit_bytes, gm_read_bytes, gm_write_bytes,
    dram_read_bytes, dram_write_bytes, longest, core_cycles, pipe_busy, flag_wait, starved, queue_stall, path_bytes)``
    (``longest``: the slowest core's cycles, 0 without cores): status
    ``OK``; ``DEADLOCK`` at instruction ``index`` of ``core``; ``USE_REFERENCE`` when an
    instruction lies outside what this engine computes exactly (``index`` is its global
    position); ``CHECK_FAILED`` when check_program would raise. The arrays are
    SimResult's (filled when the status is ``OK``).
    """
    cdef Sim s = target.sim
    cdef int64_t ncores = len(cores), total = 0, c, k, g, pc, p, q, status = S_OK, err = -1
    cdef int64_t issue, start, slot_free, t, end, raised, free_at, complete, qd, src, taken
    cdef int64_t heap_n = 0, parked = 0, latest = 0, cc, at, stamp, longest = 0
    cdef int kind
    cdef const Instr* r
    cdef TraceRec* trace_ptr = NULL
    cdef int64_t* next_set
    cdef int64_t* wait_takes
    cdef cnp.ndarray arr
    cdef _L2Buffer l2_buffer = None
    cdef Limits limits_struct
    cdef const Limits* limits_ptr = NULL
    cdef bint failed = False
    if not (cnp.PyArray_TYPE(bases) == cnp.NPY_INT64 and cnp.PyArray_IS_C_CONTIGUOUS(bases)):
        raise TypeError("bases must be a contiguous int64 array")
    if sizes is not None:
        if not (cnp.PyArray_TYPE(sizes) == cnp.NPY_INT64 and cnp.PyArray_IS_C_CONTIGUOUS(sizes)
                and cnp.PyArray_SIZE(sizes) >= 1):
            raise TypeError("sizes must be a contiguous int64 array of at least one entry")
        limits_struct = target.limits
        limits_struct.sizes = <const int64_t*>cnp.PyArray_DATA(sizes)
        limits_struct.nsym = cnp.PyArray_SIZE(bases)
        limits_ptr = &limits_struct
    cdef cnp.ndarray core_cycles_arr = int64_zeros(1, ncores, 0, 0)
    cdef cnp.ndarray pipe_busy_arr = int64_zeros(2, ncores, NUM_PIPES, 0)
    cdef cnp.ndarray flag_wait_arr = int64_zeros(3, ncores, NUM_PIPES, NUM_PIPES)
    cdef cnp.ndarray starved_arr = int64_zeros(2, ncores, NUM_PIPES, 0)
    cdef cnp.ndarray queue_stall_arr = int64_zeros(2, ncores, NUM_PIPES, 0)
    cdef cnp.ndarray path_bytes_arr = int64_zeros(2, NUM_MEMS, NUM_MEMS, 0)
    cdef int64_t* core_cycles = <int64_t*>cnp.PyArray_DATA(core_cycles_arr)
    cdef int64_t* pipe_busy = <int64_t*>cnp.PyArray_DATA(pipe_busy_arr)
    cdef int64_t* flag_wait = <int64_t*>cnp.PyArray_DATA(flag_wait_arr)
    cdef int64_t* starved = <int64_t*>cnp.PyArray_DATA(starved_arr)
    cdef int64_t* queue_stall = <int64_t*>cnp.PyArray_DATA(queue_stall_arr)

    s.cur_line = s.cur_set = s.cur_tag = 0      # line 0 is (set 0, tag 0)
    s.tag_lo, s.tag_hi = 1e300, -1e300
    s.line_lo, s.line_hi = INT64_MAX, INT64_MIN
    s.seen = NULL
    s.stamps = NULL
    s.touches = 0
    s.bases = <const int64_t*>cnp.PyArray_DATA(bases) if cnp.PyArray_SIZE(bases) else NULL
    s.nsym = cnp.PyArray_SIZE(bases)
    s.server_free = s.l2_hit_bytes = s.gm_read_bytes = s.gm_write_bytes = 0
    s.dram_read_bytes = s.dram_write_bytes = 0
    s.path_bytes = <int64_t*>cnp.PyArray_DATA(path_bytes_arr)
    qd = s.queue_depth

    # working memory: the flag keys' tables, per-core arrays and the flag numbering, one
    # block of int64 reused by later runs (so its pages are not faulted in again)
    for c in range(ncores):
        arr = cores[c]
        if not cnp.PyArray_IS_C_CONTIGUOUS(arr):
            raise ValueError("the engine reads C-contiguous INSTR arrays")
        total += cnp.PyArray_DIM(arr, 0)
    # the no-eviction L2's bits: as many as the L2 has lines, up to SEEN_LINES
    cdef int64_t seen_words = min(L2_WAYS * s.sets, SEEN_LINES) // 64 + 2
    cdef _Scratch scratch = _take_scratch(
        ncores * (14 + 5 * NUM_PIPES + NUM_PIPES * qd) + 3 * NKEYS + 2 * total + 2 + seen_words)
    stamp = scratch.stamp
    scratch.stamp += ncores
    cdef int64_t* owner = scratch.words
    cdef int64_t* head = owner + NKEYS
    cdef int64_t* tail = head + NKEYS
    cdef const Instr** code = <const Instr**>(tail + NKEYS)
    cdef int64_t* length = tail + NKEYS + ncores + 1
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
    cdef int64_t* pipe_done = pipe_free + ncores * NUM_PIPES
    cdef int64_t* queued = pipe_done + ncores * NUM_PIPES      # starts so far, per pipe
    cdef int64_t* ring_pos = queued + ncores * NUM_PIPES       # where the next start goes
    cdef int64_t* busy = ring_pos + ncores * NUM_PIPES
    cdef int64_t* ring = busy + ncores * NUM_PIPES              # the last qd starts, per pipe
    next_set = ring + ncores * NUM_PIPES * qd  # filled as far as there are flags; then: when
    wait_takes = next_set + total           # set k raised its flag
    cdef uint64_t* seen = <uint64_t*>(wait_takes + total)

    try:
        total = 0
        for c in range(ncores):
            arr = cores[c]
            length[c] = arr.shape[0]
            offset[c] = total
            total += length[c]
            code[c] = <const Instr*>cnp.PyArray_DATA(arr)
        if trace is not None:
            trace_ptr = <TraceRec*>cnp.PyArray_DATA(trace)
        l2_buffer = _take_l2(s.sets)
        s.l2 = l2_buffer.sets
        s.gen = l2_buffer.next_run()
        with nogil:
            err = prepare(&s, code, length, offset, ncores, set_base, wait_base, next_set,
                          wait_takes, head, tail, owner, stamp, limits_ptr, &failed)
            if (0 <= s.line_lo <= s.line_hi and s.line_hi - s.line_lo < L2_WAYS * s.sets
                    and s.line_hi - s.line_lo < 64 * (seen_words - 1)):
                s.seen = seen           # no set can evict: see "L2 without evictions"
                s.seen_base = s.line_lo
                memset(seen, 0, (((s.line_hi - s.line_lo) >> 6) + 1) * sizeof(uint64_t))
            elif (err < 0 and 0 <= s.line_lo <= s.line_hi
                    and s.line_hi - s.line_lo < TABLE_LINES and s.touches < TABLE_TOUCHES
                    and l2_buffer.ready_table(&s, s.line_hi - s.line_lo + 1)):
                pass                    # see "L2 as a line table"
            elif err < 0 and s.tag_hi - s.tag_lo >= TAG_SPAN:
                err = 0                 # its L2 tags span more than a uint16 holds
            s.tag_base = <int64_t>s.tag_lo if s.tag_lo <= s.tag_hi else 0
            if failed:
                status = S_CHECK_FAILED
            elif err >= 0:
                status = S_USE_REFERENCE
            else:
                for k in range(ncores * NUM_PIPES):
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
                    k = c * NUM_PIPES + p
                    kind = s.kind[r.op]
                    # a record ahead: a core often keeps its turn (see the engine)
                    PYPTO_PREFETCH_READ(<const char*>(r + 8))
                    PYPTO_PREFETCH_READ(<const char*>(r + 8) + 64)
                    PYPTO_PREFETCH_READ(<const char*>(r + 9) - 1)
                    # issue, waiting for a queue slot
                    issue = last_issue[c] + 1
                    if p != 0 and queued[k] >= qd:
                        slot_free = ring[k * qd + ring_pos[k]]
                        if slot_free > issue:
                            queue_stall[k] += slot_free - issue
                            issue = slot_free
                    last_issue[c] = issue
                    if kind == K_SYNC_ALL:
                        # drain, then park (out of the heap) until every core has arrived
                        t = issue
                        for q in range(NUM_PIPES):
                            t = imax(t, pipe_done[c * NUM_PIPES + q])
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
                                for q in range(NUM_PIPES):
                                    k = cc * NUM_PIPES + q
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
                        for q in range(NUM_PIPES):
                            t = imax(t, pipe_done[c * NUM_PIPES + q])
                        end = t + 1
                        for q in range(NUM_PIPES):
                            pipe_free[c * NUM_PIPES + q] = imax(pipe_free[c * NUM_PIPES + q], end)
                            pipe_done[c * NUM_PIPES + q] = imax(pipe_done[c * NUM_PIPES + q], end)
                        last_issue[c] = end
                        record(trace_ptr, g, c, pc, r, t, end, &core_end[c])
                    elif kind == K_NOP:
                        record(trace_ptr, g, c, pc, r, issue, issue + 1, &core_end[c])
                    elif kind == K_SCALAR:
                        end = issue + s.scalar_cycles
                        last_issue[c] = end - 1     # the next issues when this is done
                        record(trace_ptr, g, c, pc, r, issue, end, &core_end[c])
                    else:
                        start = imax(issue, pipe_free[k])
                        if issue > pipe_free[k]:
                            starved[k] += issue - pipe_free[k]
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
                            flag_wait[k * NUM_PIPES + src] += t - start
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
                        if not waits_its_turn(&s, code[c] + pc + 1,
                                              wait_takes + wait_base[c] + waits_done[c]):
                            continue            # c stays on top: see waits_its_turn
                        ht[0] = last_issue[c] + 1
                    else:
                        heap_n -= 1
                        ht[0] = ht[heap_n]
                        hc[0] = hc[heap_n]
                    sift_down(ht, hc, heap_n, 0)
                if status == S_OK:
                    for c in range(ncores):
                        t = core_end[c]
                        for q in range(NUM_PIPES):
                            t = imax(t, pipe_done[c * NUM_PIPES + q])
                            pipe_busy[c * NUM_PIPES + q] = busy[c * NUM_PIPES + q]
                        core_cycles[c] = t
                        longest = imax(longest, t)
        if status == S_DEADLOCK:
            return status, c, err, 0, 0, 0, 0, 0, 0, None, None, None, None, None, None
        if status == S_USE_REFERENCE or status == S_CHECK_FAILED:
            return status, -1, err, 0, 0, 0, 0, 0, 0, None, None, None, None, None, None
        return (S_OK, -1, -1, s.l2_hit_bytes, s.gm_read_bytes, s.gm_write_bytes,
                s.dram_read_bytes, s.dram_write_bytes, longest,
                core_cycles_arr, pipe_busy_arr, flag_wait_arr, starved_arr, queue_stall_arr,
                path_bytes_arr)
    finally:
        _give_scratch(scratch)
        if l2_buffer is not None:
            if s.stamps != NULL:
                l2_buffer.now = s.now   # the next run's stamps start above this run's
            _give_l2(l2_buffer)
