"""The PTO instruction set: opcodes, pipes, memories and the instruction record.

A ``Program`` stores each core's instruction stream as a NumPy structured array of
``INSTR`` records (struct-of-arrays access through field names). Every instruction has
up to three operands: ``d`` (destination) and ``a``, ``b`` (sources). An operand names
a memory and a 2-D region in it:

* on-chip memories (``Mem`` names them by role): ``addr`` is a byte address; ``rows``
  x ``cols`` elements with a row stride ``rs`` and a column stride ``cs`` (both in
  elements);
* ``GM``: the tensor is ``gm`` (a symbol index), ``addr`` is an element offset, and
  ``rs``/``cs`` are element strides (``0`` repeats: broadcasting).

Raw mode (``pypto.inline_asm``) adds registers. The vector registers ``Q0..Q31`` are
``Mem.REGISTERS``, a memory of ``VECTOR_REGISTERS`` x ``VECTOR_REGISTER_BYTES`` bytes
(``Qn`` is the region at ``n * 256``, one row of the instruction's element type), which
the vector unit reads and writes like its own buffers. The scalar registers ``R0..R31``
(int64) belong to the scalar unit: its instructions (``SCALAR_OPS``) keep register
numbers in the ``addr`` field of operands with no memory (``d``: the destination, ``a``
and ``b``: the sources, ``-1`` for the immediate ``imm``), a branch its target
instruction's index in ``d_addr``. A COPY, VLD or VST may add a scalar register to an
operand's address: ``pipe2`` holds operand ``d``'s register + 1 and ``event`` operand
``a``'s (0: none). No instruction moves data into an R register, so the instructions
a core issues never depend on tensor data: the scalar unit (``pypto.sim.scalar``)
works them out before the pipes run.

The compiled extensions use these numbers too: ``setup.py`` runs this file by path (so
it imports only the standard library and NumPy) and writes them into
``pypto/_constants.pxi``.
"""

from __future__ import annotations

import enum

import numpy as np


class Pipe(enum.IntEnum):
    """The units a core runs instructions on. Which pipe a COPY runs on is the target's
    data path's (``pypto.codegen.memories``); the comments give the usual ones."""

    SCALAR = 0
    MTE2 = 1   # loads: global -> stage / vector
    MTE1 = 2   # stage -> left / right
    CUBE = 3   # matrix unit
    FIX = 4    # accumulator -> global / vector, with conversion
    VEC = 5    # vector unit
    MTE3 = 6   # stores: vector -> global


class Mem(enum.IntEnum):
    """A memory, by the role it plays (``pypto.targets.ROLES``, in that order); each
    target names the memory of each role. A memory that plays several roles on a target
    (one that holds the left operand, the accumulator and the vector buffers) has the
    code of the first: see ``pypto.codegen.memories``."""

    NONE = 0
    GM = 1        # global: the off-chip memory every kernel reads and writes
    STAGE = 2     # on-chip staging of the cube's operands
    LEFT = 3      # the cube's left operand
    RIGHT = 4     # the cube's right operand
    ACC = 5       # the cube's accumulator
    VECTOR = 6    # the vector unit's operands
    REGISTERS = 7  # raw mode's vector registers Q0..Q31


#: The role (``pypto.targets.ROLES``) each memory code stands for.
ROLE = {Mem.GM: "global", Mem.STAGE: "stage", Mem.LEFT: "left", Mem.RIGHT: "right",
        Mem.ACC: "acc", Mem.VECTOR: "vector", Mem.REGISTERS: "registers"}

#: Raw mode's registers: R0..R31 (int64, the scalar unit's) and Q0..Q31 (the vector unit's).
SCALAR_REGISTERS = 32
VECTOR_REGISTERS = 32
VECTOR_REGISTER_BYTES = 256


class Op(enum.IntEnum):
    NOP = 0
    COPY = 1        # d <- a, a DMA; pipe set by the (a.mem, d.mem) path of the target
    MMAD = 2        # d(ACC) (+)= a(LEFT) @ b(RIGHT); m, n, k from the operand shapes
    SET_FLAG = 3    # pipe: source pipe, pipe2: destination pipe, event: id
    WAIT_FLAG = 4   # pipe: destination pipe (it blocks), pipe2: source pipe
    BARRIER = 5     # all pipes drain (PIPE_ALL)
    SYNC_ALL = 6    # all pipes drain, then every core of the program meets here
    # vector unit: binary (d = a op b, with row/column broadcasting of a or b)
    VADD = 16
    VSUB = 17
    VMUL = 18
    VDIV = 19
    VMAX = 20
    VMIN = 21
    # selection: d = a where d is nonzero, else b (d holds the condition on entry, in the
    # result's dtype: VCAST it there first); d is read as well as written
    VSEL = 22
    # vector comparisons: d (bool, one byte: 0 or 1) = a op b, broadcasting as the binary ops
    VCMPEQ = 24
    VCMPNE = 25
    VCMPLT = 26
    VCMPLE = 27
    VCMPGT = 28
    VCMPGE = 29
    # vector, with a scalar immediate: d = a op imm
    VADDS = 32
    VMULS = 33
    VMAXS = 34
    VMINS = 35
    # vector unary: d = f(a)
    VCOPY = 48
    VRELU = 49
    VEXP = 50
    VLN = 51
    VSQRT = 52
    VRSQRT = 53
    VRECIP = 54
    VGELU = 55
    VSIGMOID = 56
    VTANH = 57
    VABS = 58
    VNEG = 59
    VCAST = 60      # d (dtype) <- a (sdtype)
    VDUP = 61       # d <- imm
    # vector reductions along the row: d[r, 0] = reduce(a[r, :])
    VREDSUM = 80
    VREDMAX = 81
    VREDMIN = 82
    # the scalar unit (raw mode): d <- a, d <- a op b on R registers (b or a may be #imm)
    MOV = 96
    ADD = 97
    SUB = 98
    MUL = 99
    # branches: to instruction d_addr if a != b (BNE) or a < b (BLT), b a register or #imm
    BNE = 104
    BLT = 105
    # one whole vector register from (VLD) or to (VST) the vector memory; a COPY on the
    # target's data path between them
    VLD = 112
    VST = 113


BINARY = frozenset({Op.VADD, Op.VSUB, Op.VMUL, Op.VDIV, Op.VMAX, Op.VMIN})
COMPARE = frozenset({Op.VCMPEQ, Op.VCMPNE, Op.VCMPLT, Op.VCMPLE, Op.VCMPGT, Op.VCMPGE})
SELECT = frozenset({Op.VSEL})
SCALAR_IMM = frozenset({Op.VADDS, Op.VMULS, Op.VMAXS, Op.VMINS})
UNARY = frozenset({Op.VCOPY, Op.VRELU, Op.VEXP, Op.VLN, Op.VSQRT, Op.VRSQRT, Op.VRECIP,
                   Op.VGELU, Op.VSIGMOID, Op.VTANH, Op.VABS, Op.VNEG, Op.VCAST})
REDUCE = frozenset({Op.VREDSUM, Op.VREDMAX, Op.VREDMIN})
VECTOR = BINARY | COMPARE | SELECT | SCALAR_IMM | UNARY | REDUCE | {Op.VDUP}
SCALAR_ALU = frozenset({Op.MOV, Op.ADD, Op.SUB, Op.MUL})
BRANCHES = frozenset({Op.BNE, Op.BLT})
#: what the scalar unit runs itself: no memory operands, on the SCALAR pipe
SCALAR_OPS = SCALAR_ALU | BRANCHES
#: instructions that move data along a target data path (their pipe is the path's)
COPIES = frozenset({Op.COPY, Op.VLD, Op.VST})
#: instructions whose addresses may add a scalar register (``pipe2``/``event``)
REGISTER_BASED = COPIES
#: instructions that read their destination too (it is an input as well as the output)
READS_DESTINATION = SELECT
#: The pipes that compute: MMAD runs on CUBE, vector instructions on VEC.
COMPUTE_PIPES = (Pipe.CUBE, Pipe.VEC)

# Instruction flags.
F_TRANSPOSE = 1    # COPY: the destination is the source transposed
F_ACCUMULATE = 2   # MMAD: add into d instead of overwriting it
F_RELU = 4         # COPY from the accumulator (FIX): apply ReLU on the way out
F_ATOMIC = 8       # COPY to GM: add into the destination (atomic accumulate) instead of storing

INSTR = np.dtype([
    ("op", "u1"), ("pipe", "u1"), ("pipe2", "u1"), ("event", "i1"),
    ("dtype", "u1"), ("sdtype", "u1"), ("flags", "u2"), ("gm", "i2"), ("imm", "f8"),
    *[(f"{o}_{field}", kind) for o in ("d", "a", "b") for field, kind in (
        ("mem", "u1"), ("addr", "i8"), ("rows", "i4"), ("cols", "i4"), ("rs", "i8"), ("cs", "i8"))],
])

OPERANDS = ("d", "a", "b")


def operand_count(op: Op) -> int:
    """How many memory operands ``op`` takes (d, a, b in that order)."""
    if op in BINARY or op in COMPARE or op in SELECT or op == Op.MMAD:
        return 3
    if op in SCALAR_IMM or op in UNARY or op in REDUCE or op in COPIES:
        return 2
    if op == Op.VDUP:
        return 1
    return 0
