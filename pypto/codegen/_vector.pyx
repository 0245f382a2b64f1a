# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The vector emitter's tile loop, compiled: ``vector.emit`` hands it a ``Plan``
(``vector_plan.py``: what the Python emitter decides once per workload, as integer
arrays) and gets, per core, the instructions ``vector.emit`` over
``vector_chain.ChainEmitter`` emits, written as ``INSTR`` records instead of row tuples.
The Python emitter stays the specification; ``tests/test_vector_compiled.py`` checks
the streams byte for byte on random chains and schedules.

Per tile this does what ``ChainEmitter`` does per tile: the operands of each value
(slot rotation, row pitch), the DMA runs of each load (``place.row_runs``), the ops of
each node (a reduction over column chunks through its fp32/int32 accumulators).
"""

cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

from pypto.codegen.instr cimport Instr  # pypto.codegen.isa.INSTR

import numpy as np

from pypto.codegen import _sync

include "_constants.pxi"   # OP_COPY, MEM_GM...: pypto.codegen.isa's values

cnp.import_array()

# vector_plan's numbers (a test compares them with the module's)
cdef enum:
    NONE, LOAD, UNARY, BINARY, COMPARE, WHERE, SCALAR, REDUCE
cdef enum:
    K_KIND, K_OP, K_OP2, K_DCODE, K_ISZ, K_ARG0, K_ARG1, K_ARG2, K_SCODE, K_ROW, K_ROW_BCAST
    K_COL_BCAST, K_BASE, K_SIZE, K_COUNT, K_ACC0_BASE, K_ACC0_SIZE, K_ACC0_COUNT, K_ACC1_BASE
    K_ACC1_SIZE, K_ACC1_COUNT, K_IN_SYM, K_OUT_SYM, K_OFFSET, K_CS, K_ACC_DCODE, K_FINAL_OP
    NODE_FIELDS
cdef enum:
    S_LOAD, S_COMPUTE, S_STORE
cdef enum:
    CHUNK_J, CHUNK_ZERO
cdef enum:
    LAST_IS_LAST, LAST_FALSE, LAST_TRUE
cdef enum:
    STORE_NONE, STORE_SLOT, STORE_ROW_SLOT
cdef enum:
    STEP_FIELDS = 6

NUMBERS = {
    "NONE": NONE, "LOAD": LOAD, "UNARY": UNARY, "BINARY": BINARY, "COMPARE": COMPARE,
    "WHERE": WHERE, "SCALAR": SCALAR, "REDUCE": REDUCE, "K_KIND": K_KIND, "K_OP": K_OP,
    "K_OP2": K_OP2, "K_DCODE": K_DCODE, "K_ISZ": K_ISZ, "K_ARG0": K_ARG0, "K_ARG1": K_ARG1,
    "K_ARG2": K_ARG2, "K_SCODE": K_SCODE, "K_ROW": K_ROW, "K_ROW_BCAST": K_ROW_BCAST,
    "K_COL_BCAST": K_COL_BCAST, "K_BASE": K_BASE, "K_SIZE": K_SIZE, "K_COUNT": K_COUNT,
    "K_ACC0_BASE": K_ACC0_BASE, "K_ACC0_SIZE": K_ACC0_SIZE, "K_ACC0_COUNT": K_ACC0_COUNT,
    "K_ACC1_BASE": K_ACC1_BASE, "K_ACC1_SIZE": K_ACC1_SIZE, "K_ACC1_COUNT": K_ACC1_COUNT,
    "K_IN_SYM": K_IN_SYM, "K_OUT_SYM": K_OUT_SYM, "K_OFFSET": K_OFFSET, "K_CS": K_CS,
    "K_ACC_DCODE": K_ACC_DCODE, "K_FINAL_OP": K_FINAL_OP, "NODE_FIELDS": NODE_FIELDS,
    "S_LOAD": S_LOAD, "S_COMPUTE": S_COMPUTE, "S_STORE": S_STORE, "CHUNK_J": CHUNK_J,
    "CHUNK_ZERO": CHUNK_ZERO, "LAST_IS_LAST": LAST_IS_LAST, "LAST_FALSE": LAST_FALSE,
    "LAST_TRUE": LAST_TRUE, "STORE_NONE": STORE_NONE, "STORE_SLOT": STORE_SLOT,
    "STORE_ROW_SLOT": STORE_ROW_SLOT, "STEP_FIELDS": STEP_FIELDS,
}


cdef packed struct Region:   # one operand's fields inside ``Instr`` (d, a or b)
    uint8_t mem
    int64_t addr
    int32_t rows
    int32_t cols
    int64_t rs
    int64_t cs


cdef struct Tile:
    int64_t r0, rows, c0, cols


cdef struct Records:
    Instr* data
    Py_ssize_t n, cap


# The records of the stream being written, kept from one call to the next: a tuner lowers
# program after program, and fresh memory costs a page fault per 4 KiB on first touch.
# A call that finds it in use (another thread's lowering) writes into its own.
cdef Records scratch
scratch.data, scratch.n, scratch.cap = NULL, 0, 0
cdef bint scratch_busy = False


cdef struct Ctx:             # the plan's arrays and scalars, read in the loop
    const int64_t* nodes
    const double* imm
    const int64_t* row_strides
    Py_ssize_t nrow_dims
    const int64_t* row_dims
    const uint8_t* pipes
    uint8_t mem, load_pipe, store_pipe
    int64_t align, cols
    bint chunked
    int64_t* offs             # scratch: GM offsets of a tile's rows
    Records* out
    const int64_t* steps      # every pass's body and end steps, one after the other
    const int64_t* bounds     # pass p: body from bounds[2p], end from bounds[2p + 1]
    int64_t npasses


cdef Instr* record(Records* out, uint8_t op, uint8_t pipe, uint8_t dcode, uint8_t scode,
                   int64_t gm) except NULL nogil:
    """A zeroed record appended to ``out``, its header filled (``StreamBuilder.emit``:
    ``pipe2`` SCALAR, ``event`` 0, no flags)."""
    cdef Py_ssize_t cap
    cdef Instr* grown
    if out.n == out.cap:
        cap = out.cap * 2 if out.cap else 4096
        grown = <Instr*>realloc(out.data, cap * sizeof(Instr))
        if grown == NULL:
            with gil:
                raise MemoryError()
        out.data, out.cap = grown, cap
    cdef Instr* r = &out.data[out.n]
    out.n += 1
    memset(r, 0, sizeof(Instr))
    r.op, r.pipe, r.dtype, r.sdtype, r.gm = op, pipe, dcode, scode, <short>gm
    return r


cdef inline const int64_t* node(const Ctx* c, int64_t i) noexcept nogil:
    return c.nodes + i * NODE_FIELDS


cdef inline int64_t slot_addr(const int64_t* s, int64_t i) noexcept nogil:
    """``Slots.addr``: ``s`` is (base, size, count)."""
    return s[0] + (i % s[2]) * s[1]


cdef inline int64_t round_up(int64_t x, int64_t m) noexcept nogil:
    return (x + m - 1) // m * m


cdef inline void operand(Region* o, const Ctx* c, int64_t i, const Tile* t,
                         int64_t slot) noexcept nogil:
    """``ChainEmitter.operand``."""
    cdef const int64_t* n = node(c, i)
    cdef int64_t isz = n[K_ISZ], step
    o.mem = c.mem
    o.addr = slot_addr(n + K_BASE, slot)
    o.rows = 1 if n[K_ROW_BCAST] else t.rows
    o.cs = 1
    if n[K_ROW] or n[K_COL_BCAST]:
        o.cols, o.rs = 1, 1
    else:
        step = c.align // isz
        o.cols, o.rs = t.cols, round_up(t.cols, step if step > 1 else 1)


cdef inline void gm_region(Region* o, int64_t addr, int64_t rows, int64_t cols, int64_t rs,
                           int64_t cs) noexcept nogil:
    o.mem, o.addr, o.rows, o.cols, o.rs, o.cs = MEM_GM, addr, rows, cols, rs, cs


cdef inline int64_t op_slot(const Ctx* c, int64_t i, int64_t slot,
                            int64_t row_slot) noexcept nogil:
    return row_slot if node(c, i)[K_ROW] else slot


cdef int load(Ctx* c, int64_t i, const Tile* t, int64_t slot) except -1 nogil:
    """``ChainEmitter.load``: one COPY per run of rows ``place.row_runs`` finds."""
    cdef const int64_t* n = node(c, i)
    cdef const int64_t* strides = c.row_strides + i * c.nrow_dims
    cdef Region dst
    cdef Instr* r
    cdef int64_t isz = n[K_ISZ], col_off = t.c0 * n[K_CS], count, k, d, row, off
    cdef int64_t start, b, nd
    operand(&dst, c, i, t, slot)
    count = 1 if n[K_ROW_BCAST] else t.rows
    # the GM offset of each row (np.unravel_index over the row dimensions)
    for k in range(count):
        row = t.r0 + k
        off = n[K_OFFSET]
        for d in range(c.nrow_dims - 1, -1, -1):
            off += (row % c.row_dims[d]) * strides[d]
            row //= c.row_dims[d]
        c.offs[k] = off
    if count == 1:
        return emit_run(c, n, &dst, isz, 0, 1, c.offs[0] + col_off, 0)
    # row_runs: a run ends where the step between rows changes; the row after a break
    # starts the next run (alone when it is the last row)
    nd = count - 1
    start = 0
    b = 1
    while True:
        while b < nd and c.offs[b + 1] - c.offs[b] == c.offs[b] - c.offs[b - 1]:
            b += 1
        # b: the next break (diffs[b] != diffs[b - 1]) or nd
        emit_run(c, n, &dst, isz, start, b - start + 1, c.offs[start] + col_off,
                 c.offs[start + 1] - c.offs[start])
        start = b + 1
        if start == count - 1:
            emit_run(c, n, &dst, isz, start, 1, c.offs[start] + col_off, 0)
            break
        if start >= count:
            break
        b = start
    return 0


cdef int emit_run(Ctx* c, const int64_t* n, const Region* dst, int64_t isz, int64_t first,
                  int64_t count, int64_t gm_addr, int64_t delta) except -1 nogil:
    cdef Instr* r = record(c.out, OP_COPY, c.load_pipe, n[K_DCODE], n[K_DCODE], n[K_IN_SYM])
    cdef Region* d = <Region*>&r.d_mem
    d.mem, d.addr, d.rows, d.cols, d.rs, d.cs = (dst.mem, dst.addr + first * dst.rs * isz,
                                                  count, dst.cols, dst.rs, 1)
    gm_region(<Region*>&r.a_mem, gm_addr, count, dst.cols, delta, n[K_CS])
    return 0


cdef int store(Ctx* c, int64_t i, const Tile* t, int64_t slot) except -1 nogil:
    """``ChainEmitter.store``."""
    cdef const int64_t* n = node(c, i)
    cdef Instr* r = record(c.out, OP_COPY, c.store_pipe, n[K_DCODE], n[K_DCODE], n[K_OUT_SYM])
    operand(<Region*>&r.a_mem, c, i, t, slot)
    if n[K_ROW]:
        gm_region(<Region*>&r.d_mem, t.r0, t.rows, 1, 1, 1)
    else:
        gm_region(<Region*>&r.d_mem, t.r0 * c.cols + t.c0, t.rows, t.cols, c.cols, 1)
    return 0


cdef Instr* vop(Ctx* c, int64_t op, int64_t dcode, int64_t scode) except NULL nogil:
    return record(c.out, <uint8_t>op, c.pipes[op], <uint8_t>dcode, <uint8_t>scode, -1)


cdef inline void arg(Region* o, const Ctx* c, const int64_t* n, int k, const Tile* t,
                     int64_t slot, int64_t row_slot) noexcept nogil:
    cdef int64_t a = n[K_ARG0 + k]
    operand(o, c, a, t, op_slot(c, a, slot, row_slot))


cdef inline void acc_operand(Region* o, const Ctx* c, const int64_t* n, int which,
                             const Tile* t, int64_t row_slot) noexcept nogil:
    o.mem, o.rows, o.cols, o.rs, o.cs = c.mem, t.rows, 1, 1, 1
    o.addr = slot_addr(n + (K_ACC0_BASE if which == 0 else K_ACC1_BASE), row_slot)


cdef int compute(Ctx* c, int64_t i, const Tile* t, int64_t slot, int64_t row_slot,
                 int64_t chunk, bint last) except -1 nogil:
    """``ChainEmitter.compute``."""
    cdef const int64_t* n = node(c, i)
    cdef int64_t kind = n[K_KIND], dt = n[K_DCODE], acc_dt
    cdef Region d
    cdef Instr* r
    operand(&d, c, i, t, op_slot(c, i, slot, row_slot))
    if kind == UNARY or kind == COMPARE or kind == BINARY or kind == SCALAR:
        r = vop(c, n[K_OP], dt, dt if kind == BINARY or kind == SCALAR else n[K_SCODE])
        memcpy(&r.d_mem, &d, sizeof(Region))
        arg(<Region*>&r.a_mem, c, n, 0, t, slot, row_slot)
        if kind == BINARY or kind == COMPARE:
            arg(<Region*>&r.b_mem, c, n, 1, t, slot, row_slot)
        if kind == SCALAR:
            r.imm = c.imm[i]
    elif kind == WHERE:
        r = vop(c, n[K_OP], dt, n[K_SCODE])
        memcpy(&r.d_mem, &d, sizeof(Region))
        arg(<Region*>&r.a_mem, c, n, 0, t, slot, row_slot)
        r = vop(c, n[K_OP2], dt, dt)
        memcpy(&r.d_mem, &d, sizeof(Region))
        arg(<Region*>&r.a_mem, c, n, 1, t, slot, row_slot)
        arg(<Region*>&r.b_mem, c, n, 2, t, slot, row_slot)
    elif kind == REDUCE:
        if not c.chunked:
            r = vop(c, n[K_OP], dt, n[K_SCODE])
            memcpy(&r.d_mem, &d, sizeof(Region))
            arg(<Region*>&r.a_mem, c, n, 0, t, slot, row_slot)
            return 0
        acc_dt = n[K_ACC_DCODE]
        r = vop(c, n[K_OP], acc_dt, n[K_SCODE])
        acc_operand(<Region*>&r.d_mem, c, n, 0 if chunk == 0 else 1, t, row_slot)
        arg(<Region*>&r.a_mem, c, n, 0, t, slot, row_slot)
        if chunk != 0:
            r = vop(c, n[K_OP2], acc_dt, acc_dt)
            acc_operand(<Region*>&r.d_mem, c, n, 0, t, row_slot)
            acc_operand(<Region*>&r.a_mem, c, n, 0, t, row_slot)
            acc_operand(<Region*>&r.b_mem, c, n, 1, t, row_slot)
        if last:
            r = vop(c, n[K_FINAL_OP], dt, acc_dt)
            memcpy(&r.d_mem, &d, sizeof(Region))
            acc_operand(<Region*>&r.a_mem, c, n, 0, t, row_slot)
    else:
        with gil:
            raise AssertionError(f"node {i}: no compiled lowering for kind {kind}")
    return 0


cdef int run_steps(Ctx* c, const int64_t* steps, int64_t count, const Tile* t,
                   int64_t slot, int64_t row_slot, int64_t j, bint is_last) except -1 nogil:
    """``count`` steps (rows of ``STEP_FIELDS``) from ``steps``."""
    cdef const int64_t* step
    cdef int64_t s, i, action, store_at, chunk
    cdef bint last
    for s in range(count):
        step = steps + s * STEP_FIELDS
        i, action, store_at = step[0], step[1], step[4]
        if step[5] and j != 0:       # only at the first chunk
            continue
        if action == S_LOAD:
            load(c, i, t, slot)
            continue
        if action == S_COMPUTE:
            chunk = j if step[2] == CHUNK_J else 0
            last = is_last if step[3] == LAST_IS_LAST else step[3] == LAST_TRUE
            compute(c, i, t, slot, row_slot, chunk, last)
        if store_at != STORE_NONE:
            store(c, i, t, row_slot if store_at == STORE_ROW_SLOT else slot)
    return 0


cdef int64_t emit_tile(Ctx* c, int64_t r0, int64_t rows, int64_t lo, int64_t hi,
                       int64_t tile_cols, int64_t slot, int64_t row_slot) except -1 nogil:
    """``ChainEmitter.emit_tile`` (or ``emit_passes``) of one row block over column
    chunks ``lo .. hi``; returns the next slot."""
    cdef Tile t
    cdef int64_t ch, p, body, end
    t.r0, t.rows = r0, rows
    for p in range(c.npasses):
        body, end = c.bounds[2 * p], c.bounds[2 * p + 1]
        for ch in range(lo, hi):
            t.c0 = ch * tile_cols
            t.cols = min(tile_cols, c.cols - t.c0)
            run_steps(c, c.steps + body * STEP_FIELDS, end - body, &t, slot, row_slot,
                      ch - lo, ch == hi - 1)
            if ch == hi - 1:
                run_steps(c, c.steps + end * STEP_FIELDS, c.bounds[2 * p + 2] - end, &t,
                          slot, row_slot, ch - lo, True)
            slot += 1
    return slot


def emit(object plan, int64_t rows, int64_t tile_rows, int64_t tile_cols, bint chunked,
         bint chunk_tiles, int64_t ahead, int64_t cores):
    """Each core's ``INSTR`` array as ``vector.emit`` makes it from ``plan``.

    ``chunk_tiles``: each column chunk of a row block is a tile of its own (a chain
    without reductions split into chunks); ``ahead``: loads issued that many tiles ahead
    (0: with the tile)."""
    global scratch_busy
    cdef Ctx c
    cdef const int64_t[:, ::1] nodes = plan.nodes
    cdef const double[::1] imm = plan.imm
    cdef const int64_t[:, ::1] row_strides = plan.row_strides
    cdef const int64_t[::1] row_dims = plan.row_dims
    cdef const uint8_t[::1] pipes = plan.pipes
    cdef const int64_t[::1] loads = plan.loads
    blocks = [part for p in plan.passes for part in p]
    cdef const int64_t[:, ::1] steps = np.concatenate(
        [np.zeros((0, STEP_FIELDS), dtype=np.int64), *blocks]).reshape(-1, STEP_FIELDS)
    cdef const int64_t[::1] bounds = np.cumsum([0] + [len(b) for b in blocks], dtype=np.int64)
    cdef int64_t nblocks = (rows + tile_rows - 1) // tile_rows
    cdef int64_t nchunks = (plan.cols + tile_cols - 1) // tile_cols
    cdef int64_t ntiles = nblocks * nchunks if chunk_tiles else nblocks
    cdef int64_t core, t, u, ld, first_ld, mine, slot, k, blk, lo, hi
    cdef Tile lt
    c.nodes, c.imm, c.row_strides = &nodes[0, 0], &imm[0], &row_strides[0, 0]
    c.nrow_dims, c.row_dims, c.pipes = row_dims.shape[0], &row_dims[0], &pipes[0]
    c.mem, c.load_pipe, c.store_pipe = plan.mem, plan.load_pipe, plan.store_pipe
    c.align, c.cols, c.chunked = plan.align, plan.cols, chunked
    c.steps = &steps[0, 0] if steps.shape[0] else NULL
    c.bounds, c.npasses = &bounds[0], len(plan.passes)
    cdef Records own
    cdef bint shared = not scratch_busy
    own.data, own.n, own.cap = NULL, 0, 0
    c.out = &scratch if shared else &own
    scratch_busy = scratch_busy or shared
    c.offs = <int64_t*>malloc(sizeof(int64_t) * (tile_rows + 1))
    streams = []
    try:
        if c.offs == NULL:
            raise MemoryError()
        for core in range(cores):
            mine = (ntiles - core + cores - 1) // cores if core < ntiles else 0
            slot = 0
            for t in range(mine):
                if ahead:
                    first_ld = 0 if t == 0 else t + ahead
                    with nogil:
                        for ld in range(first_ld, min(t + ahead, mine - 1) + 1):
                            tile_of(core + ld * cores, tile_rows, tile_cols, rows, c.cols,
                                    nchunks, chunk_tiles, &lt)
                            for k in range(loads.shape[0]):
                                load(&c, loads[k], &lt, ld)
                u = core + t * cores
                blk = u // nchunks if chunk_tiles else u
                lo = u % nchunks if chunk_tiles else 0
                hi = lo + 1 if chunk_tiles else nchunks
                with nogil:
                    slot = emit_tile(&c, blk * tile_rows,
                                     min(tile_rows, rows - blk * tile_rows), lo, hi,
                                     tile_cols, slot, t)
            streams.append(take(c.out))
    finally:
        free(c.offs)
        free(own.data)
        c.out.n = 0
        if shared:
            scratch_busy = False
    return streams


cdef void tile_of(int64_t u, int64_t tile_rows, int64_t tile_cols, int64_t rows,
                  int64_t cols, int64_t nchunks, bint chunk_tiles, Tile* t) noexcept nogil:
    """Tile ``u`` with its first chunk (``Tile(r0, rows, *chunks[0])``)."""
    cdef int64_t blk = u // nchunks if chunk_tiles else u
    cdef int64_t ch = u % nchunks if chunk_tiles else 0
    t.r0, t.rows = blk * tile_rows, min(tile_rows, rows - blk * tile_rows)
    t.c0, t.cols = ch * tile_cols, min(tile_cols, cols - ch * tile_cols)


cdef object take(Records* out):
    """What ``out`` holds as an ``INSTR`` array, leaving it empty."""
    cdef cnp.ndarray block = _sync.empty_stream(out.n)
    if out.n:
        memcpy(cnp.PyArray_DATA(block), out.data, out.n * sizeof(Instr))
    out.n = 0
    return block
