# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled instruction statistics; ``pypto.sim.stats`` is the public entry point.

The plain-NumPy ``pypto.sim.stats.python_program_stats`` is the definition this must
match exactly (a Hypothesis test compares them).
"""

from libc.stdint cimport int32_t, int64_t, uint8_t

import numpy as np

include "_constants.pxi"   # NUM_PIPES, NUM_MEMS, OP_COPY, ITEMSIZE...: pypto's values


def program_stats(instr):
    """Per-pipe instruction counts and per-path COPY bytes of one core's stream.

    Args:
        instr: a 1-D array of ``pypto.codegen.isa.INSTR`` records.

    Returns:
        ``(per_pipe_counts, per_path_bytes)``: int64 arrays of shape ``(7,)`` and
        ``(10, 10)``, the latter indexed ``[source memory, destination memory]``.

    Raises:
        ValueError: an instruction has a pipe, or a COPY a memory or dtype code, out of
            range (checked here so that a bad array cannot write outside the tables).
    """
    # Fields of a structured array are strided (and here unaligned) views: copy each
    # one used into its own contiguous array so the loop reads plain C arrays.
    cdef const uint8_t[::1] op = np.ascontiguousarray(instr["op"])
    cdef const uint8_t[::1] pipe = np.ascontiguousarray(instr["pipe"])
    cdef const uint8_t[::1] dtype = np.ascontiguousarray(instr["dtype"])
    cdef const uint8_t[::1] d_mem = np.ascontiguousarray(instr["d_mem"])
    cdef const uint8_t[::1] a_mem = np.ascontiguousarray(instr["a_mem"])
    cdef const int32_t[::1] d_rows = np.ascontiguousarray(instr["d_rows"])
    cdef const int32_t[::1] d_cols = np.ascontiguousarray(instr["d_cols"])

    counts_arr = np.zeros(NUM_PIPES, dtype=np.int64)
    paths_arr = np.zeros((NUM_MEMS, NUM_MEMS), dtype=np.int64)
    cdef int64_t[::1] counts = counts_arr
    cdef int64_t[:, ::1] paths = paths_arr

    cdef Py_ssize_t n = op.shape[0]
    cdef Py_ssize_t i
    cdef Py_ssize_t bad = -1
    with nogil:
        for i in range(n):
            if pipe[i] >= NUM_PIPES:
                bad = i
                break
            counts[pipe[i]] += 1
            if op[i] == OP_COPY:
                if a_mem[i] >= NUM_MEMS or d_mem[i] >= NUM_MEMS or dtype[i] >= NUM_DTYPES:
                    bad = i
                    break
                paths[a_mem[i], d_mem[i]] += (
                    <int64_t>d_rows[i] * <int64_t>d_cols[i] * ITEMSIZE[dtype[i]]
                )
    if bad >= 0:
        raise ValueError(
            f"instruction {bad} is out of range (pipe={pipe[bad]}, a_mem={a_mem[bad]}, "
            f"d_mem={d_mem[bad]}, dtype={dtype[bad]}): pipes and memories are 0..6 and "
            f"dtype codes 0..3, see pypto.codegen.isa"
        )
    return counts_arr, paths_arr
