"""The grammar of one PTO assembly instruction, shared by its printer
(``asm_format``) and its parser (``asm_parse``); ``pypto.codegen.asm`` reads and writes
whole programs with them. A line looks like
``VADDS.F16 UB[0x800:16x64,64,1], GM[A][0:16x64,64,1], #1.5``; raw mode adds
registers (``pypto.codegen.isa``):

* ``MOV R0, #0x100``, ``ADD R1, R1, #256``, ``SUB R2, R2, R3``, ``MUL R4, R1, #2``;
* ``BNE R2, #0, loop`` and ``BLT R1, R5, loop``: to the instruction a ``loop:`` label
  marks (the printer names labels ``L<index>``);
* ``Q5`` is vector register 5 whole (one row of the instruction's element type), in any
  memory operand: ``VADD.F32 Q0, Q1, Q2``;
* ``VLD.F32 Q0, UB[0x100]`` and ``VST.F32 UB[R1+0x40], Q0`` move one register; COPY
  operands may add a register to their address too: ``GM[x][R2+64:1x64,64,1]``.

Fields the text does not carry are derived (the pipe from the op and its memories,
``sdtype`` from ``dtype``, ``gm`` from the GM operand, zero for the rest), and the
printer refuses a row whose fields differ from what its text would mean.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from pypto.codegen import isa
from pypto.codegen.isa import INSTR, Mem, Op, Pipe
from pypto.codegen.memories import MemoryMap
from pypto.codegen.program import pipe_of
from pypto.errors import AsmError

NO_DTYPE = frozenset({Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER, Op.SYNC_ALL, Op.NOP}) | isa.SCALAR_OPS
SYNC = frozenset({Op.SET_FLAG, Op.WAIT_FLAG})
WITH_IMM = isa.SCALAR_IMM | {Op.VDUP}
ONE_REGISTER = frozenset({Op.VLD, Op.VST})   # their memory side: operand a (VLD), d (VST)
FLAGS = {"T": isa.F_TRANSPOSE, "ACC": isa.F_ACCUMULATE, "RELU": isa.F_RELU,
         "ATOMIC": isa.F_ATOMIC}
# Per operand field (mem, addr, rows, cols, rs, cs): the INSTR field giving its range.
OPERAND_FIELDS = ("d_mem", "d_addr", "d_rows", "d_cols", "d_rs", "d_cs")
RANGE = {name: np.iinfo(INSTR[name]) for name in ("event", *OPERAND_FIELDS[1:])}
FIELD_NAMES: tuple[str, ...] = INSTR.names or ()
CODES = frozenset(int(m) for m in Mem)
REGISTER_BYTES = isa.VECTOR_REGISTER_BYTES
#: the largest scalar immediate: integers a double (``imm``) holds exactly
IMM_LIMIT = 2**53

NAME = r"[A-Za-z_][\w.]*"
SPACE = re.compile(r"\s*")
LABEL = re.compile(r"[A-Za-z_]\w*")


class Cursor:
    """A position in one line of text (its comment cut off), for scanning and errors."""

    def __init__(self, text: str, lineno: int) -> None:
        self.text, self.lineno, self.pos = text, lineno, 0
        comment = text.find(";")
        self.end = len(text.rstrip()) if comment < 0 else len(text[:comment].rstrip())

    def fail(self, message: str, pos: int | None = None) -> NoReturn:
        column = (self.pos if pos is None else pos) + 1
        raise AsmError(message, line=self.lineno, column=column, text=self.text)

    def match(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        found = pattern.match(self.text, self.pos, self.end)
        if found:
            self.pos = found.end()
        return found

    def at_end(self) -> bool:
        self.match(SPACE)
        return self.pos >= self.end

    def expect_end(self, what: str) -> None:
        if not self.at_end():
            self.fail(f"unexpected text {self.text[self.pos:self.end]!r} after {what}")

    def number(self, found: re.Match[str], group: int | str, field: str) -> int:
        """The integer in ``group`` of ``found``, checked to fit the INSTR ``field``."""
        digits = found.group(group)
        value = int(digits, 16 if "x" in digits.lower() else 10)
        limits = RANGE[field]
        if not limits.min <= value <= limits.max:
            self.fail(f"{value} is out of range for {field.removeprefix('d_')} "
                      f"({limits.min}..{limits.max})", found.start(group))
        return value


@dataclass(frozen=True)
class LabelRef:
    """A branch's target as the text names it; the row's ``d_addr`` is filled in once the
    labels of the stream are known."""

    name: str
    column: int


def memory_side(op: Op) -> int:
    """The operand of a VLD (a) or VST (d) that is in memory rather than a register."""
    return 1 if op == Op.VLD else 0


def make_row(memories: MemoryMap, op: Op, dtype: int, sdtype: int, flags: int, imm: float,
             operands: list[tuple], pipe: int | None = None, pipe2: int = 0,
             event: int = 0, bases: tuple[int, int] = (0, 0)) -> tuple:
    """The INSTR tuple with every field the text does not carry derived (as StreamBuilder);
    ``bases`` are operand d's and a's base register + 1 (0: none)."""
    gm = -1
    packed: list[int] = []
    for mem, addr, rows, cols, rs, cs, tensor in operands:
        gm = tensor if mem == Mem.GM else gm
        packed += (mem, addr, rows, cols, rs, cs)
    packed += [0] * (18 - len(packed))
    if pipe is None:
        src = operands[1][0] if len(operands) > 1 else Mem.NONE
        dst = operands[0][0] if operands else Mem.NONE
        pipe = int(pipe_of(op, src, dst, memories))
    if op in isa.REGISTER_BASED:
        pipe2, event = bases
    return (int(op), pipe, pipe2, event, dtype, sdtype, flags, gm, float(imm), *packed)


def scalar_row(op: Op, d: int, a: int, b: int, imm: float) -> tuple:
    """The INSTR tuple of a scalar-unit instruction: registers (or a branch target, in d)
    in the operands' ``addr`` fields, ``-1`` for the immediate."""
    row = [0] * len(FIELD_NAMES)
    row[0], row[1], row[7], row[8] = int(op), int(Pipe.SCALAR), -1, float(imm)
    row[10], row[16], row[22] = d, a, b
    return tuple(row)
