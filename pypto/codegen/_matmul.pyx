# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""The matmul emitter's K loop, compiled: ``matmul.emit`` hands each core's chunks here
and gets the same instructions ``software_pipeline(sb, chunks, depth, ctx.load,
ctx.compute)`` emits, written as ``INSTR`` records instead of row tuples (a row tuple
costs about 1.4 us to build; a record here costs tens of nanoseconds). ``matmul.py``
stays the specification; ``tests/test_codegen_compiled.py`` checks the streams byte
for byte on random workloads and schedules.

Everything the loop needs is plain integers read once from ``matmul._Ctx``; a fused
epilogue's drain (the vector chain after the matmul) calls back into ``ctx.drain``,
after the records written so far join the stream builder.
"""

cimport numpy as cnp
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset

from pypto.codegen.instr cimport Instr  # pypto.codegen.isa.INSTR

from pypto.codegen import _sync

include "_constants.pxi"   # OP_COPY, MEM_GM, F_ACCUMULATE...: pypto.codegen.isa's values

cnp.import_array()


cdef packed struct Region:   # one operand's fields inside ``Instr`` (d, a or b)
    uint8_t mem
    int64_t addr
    int32_t rows
    int32_t cols
    int64_t rs
    int64_t cs


cdef struct Slots:           # place.Slots: buffer rotation
    uint8_t mem
    int64_t base, size, count


cdef inline int64_t slot(const Slots* s, int64_t i) noexcept nogil:
    return s.base + (i % s.count) * s.size


cdef struct Operand:         # how one input lies in GM (matmul._Ctx.load_tile)
    int16_t sym
    bint nz
    int64_t rs, cs           # ND: element strides of rows and columns
    int64_t rpad, c0         # NZ: padded rows and the column block width


cdef struct Loop:
    int64_t m, n, m1, n1, k1, k0, m0, n0, isz, acc_isz
    bint ta, tb, mn, atomic, relu
    uint8_t in_code, acc_code, out_code
    uint8_t load_pipe, l0a_pipe, l0b_pipe, cube_pipe, drain_pipe
    int16_t out_sym
    Slots a_l1, b_l1, l0a, l0b, l0c
    Operand a, b


cdef struct Records:
    Instr* data
    Py_ssize_t n, cap


cdef Instr* record(Records* out, uint8_t op, uint8_t pipe, uint8_t dcode, uint8_t scode,
                   uint16_t flags, int16_t gm) except NULL nogil:
    """A zeroed record appended to ``out``, its header filled."""
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
    r.op, r.pipe, r.dtype, r.sdtype, r.flags, r.gm = op, pipe, dcode, scode, flags, gm
    return r


cdef inline void region(void* at, uint8_t mem, int64_t addr, int64_t rows, int64_t cols,
                        int64_t rs, int64_t cs) noexcept nogil:
    cdef Region* o = <Region*>at
    o.mem, o.addr, o.rows, o.cols, o.rs, o.cs = mem, addr, rows, cols, rs, cs


cdef int take(Records* out, object sb) except -1:
    """Move what ``sb`` holds into ``out`` (so that the stream ends as one block, not a
    short head and a long tail that ``sb.array()`` would have to concatenate)."""
    if not sb.rows and not sb.packed:
        return 0
    cdef cnp.ndarray head = sb.take()
    cdef Py_ssize_t n = head.shape[0]
    out.data = <Instr*>realloc(out.data, (n + 4096) * sizeof(Instr))
    if out.data == NULL:
        raise MemoryError()
    out.cap = n + 4096
    memcpy(out.data, cnp.PyArray_DATA(head), n * sizeof(Instr))
    out.n = n
    return 0


cdef int flush(Records* out, object sb) except -1:
    """The records written so far join ``sb`` (in order with what it already holds)."""
    if out.n == 0:
        return 0
    cdef cnp.ndarray block = _sync.empty_stream(out.n)
    memcpy(cnp.PyArray_DATA(block), out.data, out.n * sizeof(Instr))
    out.n = 0
    sb.extend(block)
    return 0


cdef int load_tile(Records* out, const Loop* L, const Operand* op, int64_t base,
                   int64_t addr, int64_t l1_rs, int64_t r_at, int64_t rows, int64_t c_at,
                   int64_t cols) except -1 nogil:
    """``_Ctx.load_tile``: one strided copy, or one per NZ column block."""
    cdef Instr* r
    cdef int64_t block
    if not op.nz:
        r = record(out, OP_COPY, L.load_pipe, L.in_code, L.in_code, 0, op.sym)
        region(&r.d_mem, L.a_l1.mem, addr, rows, cols, l1_rs, 1)
        region(&r.a_mem, MEM_GM, base + r_at * op.rs + c_at * op.cs, rows, cols, op.rs, op.cs)
        return 0
    for block in range(c_at // op.c0, (c_at + cols - 1) // op.c0 + 1):
        r = record(out, OP_COPY, L.load_pipe, L.in_code, L.in_code, 0, op.sym)
        region(&r.d_mem, L.a_l1.mem, addr + (block * op.c0 - c_at) * L.isz, rows, op.c0,
               l1_rs, 1)
        region(&r.a_mem, MEM_GM, (block * op.rpad + r_at) * op.c0, rows, op.c0, op.c0, 1)
    return 0


cdef int load(Records* out, const Loop* L, const int64_t[:] c, const int64_t[:] a_base,
              const int64_t[:] b_base) except -1 nogil:
    """``_Ctx.load``: GM -> L1 of A and B for chunk ``c``."""
    cdef int64_t batch = c[1], m_at = c[2], n_at = c[3], k_at = c[4], kcur = c[5]
    cdef int64_t mcur = min(L.m1, L.m - m_at), ncur = min(L.n1, L.n - n_at)
    cdef int64_t a_addr = slot(&L.a_l1, c[6]), b_addr = slot(&L.b_l1, c[6])
    if L.ta:
        load_tile(out, L, &L.a, a_base[batch], a_addr, L.m1, k_at, kcur, m_at, mcur)
    else:
        load_tile(out, L, &L.a, a_base[batch], a_addr, L.k1, m_at, mcur, k_at, kcur)
    if L.tb:
        load_tile(out, L, &L.b, b_base[batch], b_addr, L.k1, n_at, ncur, k_at, kcur)
    else:
        load_tile(out, L, &L.b, b_base[batch], b_addr, L.n1, k_at, kcur, n_at, ncur)
    return 0


cdef inline void l1_to_l0(Instr* r, const Loop* L, int64_t l1_addr, bint k_rows,
                          int64_t width, int64_t at, int64_t length, int64_t kk,
                          int64_t kkc) noexcept nogil:
    """``_Ctx.l1_to_l0``: the source region of an L1 -> L0A/L0B copy."""
    if k_rows:
        region(&r.a_mem, L.a_l1.mem, l1_addr + (kk * width + at) * L.isz, kkc, length,
               width, 1)
    else:
        region(&r.a_mem, L.a_l1.mem, l1_addr + (at * L.k1 + kk) * L.isz, length, kkc,
               L.k1, 1)


cdef int compute(Records* out, const Loop* L, const int64_t[:] c, int64_t* a_ctr,
                 int64_t* b_ctr) except -1 nogil:
    """``_Ctx.compute`` without the drain: L1 -> L0A/L0B and the MMADs of chunk ``c``."""
    cdef int64_t blk = c[0], m_at = c[2], n_at = c[3], kcur = c[5], index = c[6]
    cdef bint first = c[7] != 0
    cdef int64_t mcur = min(L.m1, L.m - m_at), ncur = min(L.n1, L.n - n_at)
    cdef int64_t m_tiles = (mcur + L.m0 - 1) // L.m0, n_tiles = (ncur + L.n0 - 1) // L.n0
    cdef int64_t base = slot(&L.l0c, blk)
    cdef int64_t a_l1 = slot(&L.a_l1, index), b_l1 = slot(&L.b_l1, index)
    cdef int64_t kk, kkc, w, mi, ni, mlen, nlen, on_a, on_b
    cdef Region a0, b0
    cdef Instr* r
    kk = 0
    while kk < kcur:
        kkc = min(L.k0, kcur - kk)
        on_a = on_b = -1
        for w in range(m_tiles * n_tiles):
            if L.mn:
                mi, ni = (w // n_tiles) * L.m0, (w % n_tiles) * L.n0
            else:
                mi, ni = (w % m_tiles) * L.m0, (w // m_tiles) * L.n0
            mlen, nlen = min(L.m0, mcur - mi), min(L.n0, ncur - ni)
            if mi != on_a:
                region(&a0, L.l0a.mem, slot(&L.l0a, a_ctr[0]), mlen, kkc, L.k0, 1)
                r = record(out, OP_COPY, L.l0a_pipe, L.in_code, L.in_code,
                           F_TRANSPOSE if L.ta else 0, -1)
                memcpy(&r.d_mem, &a0, sizeof(Region))
                l1_to_l0(r, L, a_l1, L.ta, L.m1, mi, mlen, kk, kkc)
                a_ctr[0] += 1
                on_a = mi
            if ni != on_b:
                region(&b0, L.l0b.mem, slot(&L.l0b, b_ctr[0]), kkc, nlen, L.n0, 1)
                r = record(out, OP_COPY, L.l0b_pipe, L.in_code, L.in_code,
                           F_TRANSPOSE if L.tb else 0, -1)
                memcpy(&r.d_mem, &b0, sizeof(Region))
                l1_to_l0(r, L, b_l1, not L.tb, L.n1, ni, nlen, kk, kkc)
                b_ctr[0] += 1
                on_b = ni
            r = record(out, OP_MMAD, L.cube_pipe, L.acc_code, L.in_code,
                       0 if (first and kk == 0) else F_ACCUMULATE, -1)
            region(&r.d_mem, L.l0c.mem, base + (mi * L.n1 + ni) * L.acc_isz, mlen, nlen,
                   L.n1, 1)
            memcpy(&r.a_mem, &a0, sizeof(Region))
            memcpy(&r.b_mem, &b0, sizeof(Region))
        kk += L.k0
    return 0


cdef int drain(Records* out, const Loop* L, const int64_t[:] c) except -1 nogil:
    """``_Ctx.drain`` without an epilogue: L0C -> GM (FIX, with ReLU or atomic add)."""
    cdef int64_t blk = c[0], batch = c[1], m_at = c[2], n_at = c[3]
    cdef int64_t mcur = min(L.m1, L.m - m_at), ncur = min(L.n1, L.n - n_at)
    cdef uint16_t flags = (F_RELU if L.relu else 0) | (F_ATOMIC if L.atomic else 0)
    cdef Instr* r = record(out, OP_COPY, L.drain_pipe, L.out_code, L.acc_code, flags,
                           L.out_sym)
    region(&r.d_mem, MEM_GM, (batch * L.m + m_at) * L.n + n_at, mcur, ncur, L.n, 1)
    region(&r.a_mem, L.l0c.mem, slot(&L.l0c, blk), mcur, ncur, L.n1, 1)
    return 0


cdef Slots slots_of(object s):
    cdef Slots out
    out.mem, out.base, out.size, out.count = int(s.mem), s.base, s.size, s.count
    return out


cdef Operand operand_of(tuple plan):
    """``(sym, nz, rs, cs, rpad, c0)`` as made by ``matmul._Ctx.gm_operand``."""
    cdef Operand out
    out.sym, out.nz, out.rs, out.cs, out.rpad, out.c0 = plan
    return out


def pipeline(object sb, object ctx, const int64_t[:, ::1] chunks, int64_t l1_depth,
             const int64_t[:] a_base, const int64_t[:] b_base, tuple a_plan, tuple b_plan):
    """Emit ``software_pipeline(sb, chunks, l1_depth, ctx.load, ctx.compute, (0, 0))``.

    ``chunks`` rows are ``matmul._Chunk`` fields in order; ``a_base``/``b_base`` the
    GM element offset of each batch of A and B; the plans how A and B lie in GM."""
    cdef Loop L
    cdef Records out
    sh = ctx.sh
    L.m, L.n = sh.m, sh.n
    L.m1, L.n1, L.k1, L.k0, L.m0, L.n0 = ctx.m1, ctx.n1, ctx.k1, ctx.k0, ctx.m0, ctx.n0
    L.isz, L.acc_isz = ctx.isz, ctx.acc_dt.itemsize
    L.ta, L.tb, L.mn = sh.transpose_a, sh.transpose_b, ctx.l0_order == "mn"
    L.atomic, L.relu = ctx.atomic, ctx.fix_relu_output is not None
    L.in_code, L.acc_code, L.out_code = ctx.in_dt.code, ctx.acc_dt.code, ctx.out_dt.code
    L.a_l1, L.b_l1 = slots_of(ctx.a_l1), slots_of(ctx.b_l1)
    L.l0a, L.l0b, L.l0c = slots_of(ctx.l0a), slots_of(ctx.l0b), slots_of(ctx.l0c)
    L.load_pipe = sb.copy_pipe(MEM_GM, ctx.a_l1.mem)   # the builder's target's data paths
    L.l0a_pipe = sb.copy_pipe(ctx.a_l1.mem, ctx.l0a.mem)
    L.l0b_pipe = sb.copy_pipe(ctx.a_l1.mem, ctx.l0b.mem)
    L.cube_pipe = PIPE_CUBE
    L.drain_pipe = sb.copy_pipe(ctx.l0c.mem, MEM_GM)
    node = ctx.mm_i if ctx.fix_relu_output is None else ctx.fix_relu_output
    L.out_sym = ctx.gm_out[node] if node in ctx.gm_out else -1
    L.a, L.b = operand_of(a_plan), operand_of(b_plan)
    cdef bint epilogue = ctx.emitter is not None

    cdef int64_t n = chunks.shape[0], ahead = l1_depth - 1, j, ld, first
    cdef int64_t a_ctr = 0, b_ctr = 0
    out.data, out.n, out.cap = NULL, 0, 0
    try:
        take(&out, sb)
        with nogil:  # a tuner proposes the next schedule meanwhile
            for j in range(n):
                first = 0 if j == 0 else j + ahead
                for ld in range(first, min(j + ahead, n - 1) + 1):
                    load(&out, &L, chunks[ld], a_base, b_base)
                compute(&out, &L, chunks[j], &a_ctr, &b_ctr)
                if chunks[j, 8]:
                    if epilogue:
                        with gil:
                            flush(&out, sb)
                            ctx.drain_chunk(sb, tuple(chunks[j]))
                    else:
                        drain(&out, &L, chunks[j])
        flush(&out, sb)
    finally:
        free(out.data)
