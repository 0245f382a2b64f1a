# The C view of one record of pypto.codegen.isa.INSTR (packed, field for field), shared
# by the Cython passes that read Program streams in place (_sync.pyx, sim/_engine.pyx).
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t


cdef packed struct Instr:
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
