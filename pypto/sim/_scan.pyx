# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False
"""Two scans that run before every simulation, compiled: one pass over each core's
records instead of NumPy's several per core (about 3 ms of a 48-core program of 61,000
instructions, a tenth of a tuning trial of a 4096x4096 softmax).

* ``gm_dtypes_match``: whether ``check.check_gm_dtypes`` would pass (it then runs only
  to name the first offending instruction);
* ``needs_issue``: ``scalar.needs_issue``.

Both give exactly what their Python specifications give;
``tests/test_sim_scans.py`` checks that on random programs.
"""

cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t

from pypto.codegen.instr cimport Instr  # pypto.codegen.isa.INSTR

include "_constants.pxi"   # MEM_GM: pypto.codegen.isa's values

cnp.import_array()


def gm_dtypes_match(list cores, const int64_t[::1] codes):
    """Whether every GM operand of every core (C-contiguous ``INSTR`` arrays) has the
    dtype of its tensor: ``codes[gm]`` (``gm`` clipped into ``codes``), the operand's
    dtype being ``dtype`` for ``d`` and ``sdtype`` for ``a`` and ``b``."""
    cdef cnp.ndarray stream
    cdef const Instr* code
    cdef Py_ssize_t i, n
    cdef int64_t last = codes.shape[0] - 1, sym, want
    for stream in cores:
        n = stream.shape[0]
        code = <const Instr*>cnp.PyArray_DATA(stream)
        with nogil:
            for i in range(n):
                sym = code[i].gm
                sym = 0 if sym < 0 else (last if sym > last else sym)
                want = codes[sym]
                if (code[i].d_mem == MEM_GM and code[i].dtype != want) \
                        or (code[i].a_mem == MEM_GM and code[i].sdtype != want) \
                        or (code[i].b_mem == MEM_GM and code[i].sdtype != want):
                    with gil:
                        return False
    return True


def needs_issue(list cores, const uint8_t[::1] based, const uint8_t[::1] branch):
    """Whether a core has a register-based address (``pipe2`` or ``event`` set on an
    instruction whose opcode ``based`` marks) or a branch (an opcode ``branch`` marks)
    that does not go to the next instruction."""
    cdef cnp.ndarray stream
    cdef const Instr* code
    cdef Py_ssize_t i, n
    for stream in cores:
        n = stream.shape[0]
        code = <const Instr*>cnp.PyArray_DATA(stream)
        with nogil:
            for i in range(n):
                if based[code[i].op] and (code[i].pipe2 != 0 or code[i].event != 0):
                    with gil:
                        return True
                if branch[code[i].op] and code[i].d_addr != i + 1:
                    with gil:
                        return True
    return False
