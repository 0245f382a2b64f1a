"""One PTO assembly instruction: the text of an ``INSTR`` row, and the row of a text.

``pypto.codegen.asm`` reads and writes whole programs with these. A line looks like
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
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NoReturn, TypeVar

import numpy as np

from pypto.codegen import isa
from pypto.codegen.isa import INSTR, OPERANDS, Mem, Op, Pipe
from pypto.codegen.memories import MemoryMap
from pypto.codegen.program import Symbol, pipe_of
from pypto.errors import AsmError
from pypto.ir.dtypes import BY_CODE, BY_SUFFIX

_E = TypeVar("_E", bound=IntEnum)
NO_DTYPE = frozenset({Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER, Op.SYNC_ALL, Op.NOP}) | isa.SCALAR_OPS
_SYNC = frozenset({Op.SET_FLAG, Op.WAIT_FLAG})
_WITH_IMM = isa.SCALAR_IMM | {Op.VDUP}
_ONE_REGISTER = frozenset({Op.VLD, Op.VST})   # their memory side: operand a (VLD), d (VST)
_FLAGS = {"T": isa.F_TRANSPOSE, "ACC": isa.F_ACCUMULATE, "RELU": isa.F_RELU,
          "ATOMIC": isa.F_ATOMIC}
# Per operand field (mem, addr, rows, cols, rs, cs): the INSTR field giving its range.
_OPERAND_FIELDS = ("d_mem", "d_addr", "d_rows", "d_cols", "d_rs", "d_cs")
_RANGE = {name: np.iinfo(INSTR[name]) for name in ("event", *_OPERAND_FIELDS[1:])}
_FIELD_NAMES: tuple[str, ...] = INSTR.names or ()
_CODES = frozenset(int(m) for m in Mem)
_REGISTER_BYTES = isa.VECTOR_REGISTER_BYTES
#: the largest scalar immediate: integers a double (``imm``) holds exactly
IMM_LIMIT = 2**53

NAME = r"[A-Za-z_][\w.]*"
_INT = r"-?(?:0[xX][0-9a-fA-F]+|\d+)"
_UINT = r"(?:0[xX][0-9a-fA-F]+|\d+)"
SPACE = re.compile(r"\s*")
_COMMA = re.compile(r"\s*,\s*")
_MNEMONIC = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")
_WORD = re.compile(r"[A-Za-z_]\w*")
_EVENT = re.compile(_INT)
_IMM = re.compile(r"#\s*([^\s,;]+)")
_INT_IMM = re.compile(rf"#\s*({_INT})(?![\w.])")
_SCALAR_REG = re.compile(r"[Rr](\d+)(?!\w)")
_VECTOR_REG = re.compile(r"[Qq](\d+)(?![\w\[])")
LABEL = re.compile(r"[A-Za-z_]\w*")
_MEM_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?=\[)")
_GM_TENSOR = re.compile(rf"\[\s*({NAME})\s*\]\s*(?=\[)")
_ADDRESS = rf"(?:[Rr](?P<base>\d+)\s*(?:(?P<sign>[+-])\s*(?P<offset>{_UINT}))?|(?P<addr>{_INT}))"
_REGION = re.compile(  # [ADDR:ROWSxCOLS,RS,CS]
    rf"\[\s*{_ADDRESS}\s*:\s*(?P<rows>-?\d+)\s*[xX]\s*(?P<cols>-?\d+)\s*,\s*(?P<rs>-?\d+)\s*,"
    rf"\s*(?P<cs>-?\d+)\s*\]")
_SHORT = re.compile(rf"\[\s*{_ADDRESS}\s*\]")   # [ADDR]: one register's bytes, contiguous


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
        limits = _RANGE[field]
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


# ---------------------------------------------------------------------------- printing

def format_instruction(row: Sequence | np.void, symbols: Sequence[Symbol],
                       memories: MemoryMap) -> str:
    """The text of one row (a tuple in ``INSTR`` field order, or a record); ``AsmError``
    if a field the text does not carry differs from what parsing would derive."""
    fields = row.item() if isinstance(row, np.void) else tuple(row)
    op = _decode(Op, fields[0], "opcode")
    mnemonic = _mnemonic(op, fields[4], fields[5], fields[6])
    if op in _SYNC:
        src, dst = (fields[1], fields[2]) if op == Op.SET_FLAG else (fields[2], fields[1])
        text = f"{mnemonic} {_decode(Pipe, src, 'pipe').name}, " \
               f"{_decode(Pipe, dst, 'pipe').name}, {fields[3]}"
        expected = make_row(memories, op, 0, 0, fields[6], 0.0, [], fields[1], fields[2],
                            fields[3])
    elif op in isa.SCALAR_OPS:
        text, expected = _format_scalar(op, fields)
    else:
        text, expected = _format_memory_op(op, mnemonic, fields, symbols, memories)
    for name, have, want in zip(_FIELD_NAMES, fields, expected):
        # repr tells -0.0 from 0.0 and lets nan equal nan.
        if repr(have) != repr(want) if name == "imm" else have != want:
            raise AsmError(f"cannot print {text!r}: its field {name} is {have!r} but the text "
                           f"means {want!r}")
    return text


def _format_memory_op(op: Op, mnemonic: str, fields: tuple, symbols: Sequence[Symbol],
                      memories: MemoryMap) -> tuple[str, tuple]:
    count = isa.operand_count(op)
    operands = [(*fields[9 + 6 * i:15 + 6 * i], fields[7]) for i in range(count)]
    bases = _bases(op, fields) if op in isa.REGISTER_BASED else (0, 0)
    sizes = (BY_CODE[fields[4]].itemsize, *[BY_CODE[fields[5]].itemsize] * 2)
    parts = [_format_operand(op, i, operand, symbols, memories, bases[i] if i < 2 else 0,
                             sizes[i])
             for i, operand in enumerate(operands)]
    imm = float(fields[8]) if op in _WITH_IMM else 0.0
    if op in _WITH_IMM:
        parts.append(f"#{imm!r}")
    text = f"{mnemonic} {', '.join(parts)}" if parts else mnemonic
    try:
        expected = make_row(memories, op, fields[4], fields[5], fields[6], imm, operands,
                            bases=bases)
    except ValueError as error:
        raise AsmError(f"cannot print {text!r}: {error}") from None
    return text, expected


def _bases(op: Op, fields: tuple) -> tuple[int, int]:
    """The base register + 1 (0: none) of operands d and a of a register-based op."""
    bases = (fields[2], fields[3])
    for which, code in zip("da", bases):
        if not 0 <= code <= isa.SCALAR_REGISTERS:
            raise AsmError(f"cannot print {op.name}: operand {which}'s base register code is "
                           f"{code} (0 for none, n + 1 for Rn)")
    return bases


def _format_scalar(op: Op, fields: tuple) -> tuple[str, tuple]:
    d, a, b, imm = fields[10], fields[16], fields[22], fields[8]
    immediate = b if op not in (Op.MOV,) else a
    parts = []
    if op == Op.MOV:
        parts = [_register(op, "d", d), _register_or_imm(op, "a", a, imm)]
    elif op in isa.SCALAR_ALU:
        parts = [_register(op, "d", d), _register(op, "a", a), _register_or_imm(op, "b", b, imm)]
    else:
        if d < 0:
            raise AsmError(f"cannot print {op.name}: its target instruction {d} is negative")
        parts = [_register(op, "a", a), _register_or_imm(op, "b", b, imm), f"L{d}"]
    text = f"{op.name} {', '.join(parts)}"
    return text, scalar_row(op, d, a, b if op != Op.MOV else 0,
                            float(imm) if immediate == -1 else 0.0)


def _register(op: Op, which: str, number: int) -> str:
    if not 0 <= number < isa.SCALAR_REGISTERS:
        raise AsmError(f"cannot print {op.name}: operand {which} is register {number}, not one "
                       f"of R0..R{isa.SCALAR_REGISTERS - 1}")
    return f"R{number}"


def _register_or_imm(op: Op, which: str, number: int, imm: float) -> str:
    if number != -1:
        return _register(op, which, number)
    if not (imm == int(imm) if np.isfinite(imm) else False) or abs(imm) > IMM_LIMIT:
        raise AsmError(f"cannot print {op.name}: its immediate {imm!r} is not an integer of at "
                       f"most 2**53 in magnitude")
    return f"#{int(imm)}"


def _decode(kind: type[_E], code: int, what: str) -> _E:
    try:
        return kind(code)
    except ValueError:
        raise AsmError(f"cannot print an instruction with {what} code {code}") from None


def _mnemonic(op: Op, dtype: int, sdtype: int, flags: int) -> str:
    if flags & ~sum(_FLAGS.values()):
        raise AsmError(f"cannot print {op.name} with flags {flags:#x}: only "
                       f"{', '.join('.' + name for name in _FLAGS)} exist")
    if flags and (op in _ONE_REGISTER or op in isa.SCALAR_OPS):
        raise AsmError(f"cannot print {op.name} with flags {flags:#x}: it takes none")
    text = op.name
    if op not in NO_DTYPE:
        for code in (dtype, sdtype) if sdtype != dtype else (dtype,):
            if code not in BY_CODE:
                raise AsmError(f"cannot print {op.name} with dtype code {code}")
            text += "." + BY_CODE[code].suffix
    return text + "".join(f".{name}" for name, bit in _FLAGS.items() if flags & bit)


def _whole_register(mem: int, addr: int, rows: int, cols: int, rs: int, cs: int,
                    isz: int) -> int | None:
    """The number n of ``Qn`` if the region is that whole register, else None."""
    per_row = _REGISTER_BYTES // isz
    if mem != Mem.REGISTERS or (rows, cols, rs, cs) != (1, per_row, per_row, 1) \
            or addr % _REGISTER_BYTES or not 0 <= addr // _REGISTER_BYTES < isa.VECTOR_REGISTERS:
        return None
    return addr // _REGISTER_BYTES


def _format_operand(op: Op, index: int, operand: tuple, symbols: Sequence[Symbol],
                    memories: MemoryMap, base: int, isz: int) -> str:
    mem, addr, rows, cols, rs, cs, gm = operand
    register = _whole_register(mem, addr, rows, cols, rs, cs, isz)
    side = _memory_side(op)
    if op in _ONE_REGISTER and index != side:
        if register is None or base:
            raise AsmError(f"cannot print {op.name}: operand {OPERANDS[index]} must be one whole "
                           f"vector register Q0..Q{isa.VECTOR_REGISTERS - 1}")
        return f"Q{register}"
    if register is not None and not base and op not in _ONE_REGISTER:
        return f"Q{register}"
    if mem not in memories.names:
        if mem == Mem.NONE or mem not in _CODES:
            raise AsmError(f"cannot print {op.name}: operand {OPERANDS[index]} has no memory "
                           f"(code {mem}); {op.name} takes {isa.operand_count(op)} memory "
                           "operands")
        codes = ", ".join(f"{name} as {code.name}" for code, name in memories.names.items())
        raise AsmError(f"cannot print {op.name}: operand {OPERANDS[index]} is in "
                       f"{Mem(mem).name}, a memory code {memories.target} does not use (it "
                       f"codes {codes})")
    name = memories.names[mem]
    address = _format_address(addr, base, hexadecimal=mem != Mem.GM)
    if op in _ONE_REGISTER:
        per_row = _REGISTER_BYTES // isz
        if (rows, cols, rs, cs) != (1, per_row, per_row, 1):
            raise AsmError(f"cannot print {op.name}: its {OPERANDS[index]} region {rows}x{cols},"
                           f"{rs},{cs} is not one register's {per_row} contiguous elements")
        region = f"[{address}]"
    else:
        region = f"[{address}:{rows}x{cols},{rs},{cs}]"
    if mem == Mem.GM:
        if not 0 <= gm < len(symbols):
            raise AsmError(f"cannot print {op.name}: GM tensor index {gm} is not one of the "
                           f"program's {len(symbols)} tensors")
        return f"{name}[{symbols[gm].name}]{region}"
    return f"{name}{region}"


def _format_address(addr: int, base: int, hexadecimal: bool) -> str:
    number = f"{addr:#x}" if hexadecimal else str(addr)
    if not base:
        return number
    if addr == 0:
        return f"R{base - 1}"
    return f"R{base - 1}{'-' if addr < 0 else '+'}{number.lstrip('-')}"


def _memory_side(op: Op) -> int:
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
    row = [0] * len(_FIELD_NAMES)
    row[0], row[1], row[7], row[8] = int(op), int(Pipe.SCALAR), -1, float(imm)
    row[10], row[16], row[22] = d, a, b
    return tuple(row)


# ----------------------------------------------------------------------------- parsing

def parse_row(cursor: Cursor, symbols: Sequence[Symbol], memories: MemoryMap
              ) -> tuple[tuple, LabelRef | None]:
    """The row of the instruction at the cursor, and its branch target's label (None
    unless it is a branch; the row's ``d_addr`` is 0 until the label is resolved)."""
    if cursor.at_end():
        vector = memories.names[memories.roles["vector"]]
        cursor.fail(f"expected an instruction, like VADD.F16 {vector}[0x0:16x16,16,1], ...")
    found = cursor.match(_MNEMONIC) or cursor.fail(
        "expected an instruction mnemonic, like VADD.F16")
    start = found.start()
    name, *suffixes = found.group().split(".")
    op = Op.__members__.get(name.upper())
    if op is None:  # not ``or``: NOP is 0
        cursor.fail(f"unknown opcode {name!r}", start)
    dtype, sdtype, flags = _parse_suffixes(cursor, op, suffixes, start + len(name))
    if cursor.pos < cursor.end and not cursor.text[cursor.pos].isspace():
        cursor.fail("expected a space after the mnemonic")
    if op in isa.SCALAR_OPS:
        return _parse_scalar(cursor, op)
    if op in _SYNC:
        kinds: tuple[str, ...] = ("source pipe", "destination pipe", "event")
    else:
        kinds = OPERANDS[:isa.operand_count(op)] + (("#imm",) if op in _WITH_IMM else ())
    sizes = (_itemsize(dtype), _itemsize(sdtype), _itemsize(sdtype))
    values: list = []
    bases = [0, 0]
    for index, kind in enumerate(kinds):
        _before_operand(cursor, op, kinds, index)
        if kind in OPERANDS:
            operand, base = _parse_memory(cursor, symbols, values, memories, op, index,
                                          sizes[index])
            values.append(operand)
            if base:
                bases[index] = base
        else:
            values.append(_parse_other(cursor, kind))
    _after_operands(cursor, op, kinds)
    if op in _SYNC:
        src, dst, event = values
        pipe, pipe2 = (src, dst) if op == Op.SET_FLAG else (dst, src)
        return make_row(memories, op, 0, 0, flags, 0.0, [], pipe, pipe2, event), None
    imm = values.pop() if op in _WITH_IMM else 0.0
    try:
        return make_row(memories, op, dtype, sdtype, flags, imm, values,
                        bases=(bases[0], bases[1])), None
    except ValueError as error:  # a COPY between memories with no path
        cursor.fail(f"{error} (COPY paths: {memories.paths()})", start)


def _itemsize(code: int) -> int:
    return BY_CODE[code].itemsize if code in BY_CODE else 1


def _before_operand(cursor: Cursor, op: Op, kinds: Sequence[str], index: int) -> None:
    if cursor.at_end():
        cursor.fail(f"{op.name} takes {len(kinds)} operands ({', '.join(kinds)}), "
                    f"found {index}")
    if index and not cursor.match(_COMMA):
        cursor.fail(f"expected ',' before operand {kinds[index]} of {op.name}")


def _after_operands(cursor: Cursor, op: Op, kinds: Sequence[str]) -> None:
    if not cursor.at_end():
        if kinds and cursor.text[cursor.pos] == ",":
            cursor.fail(f"too many operands: {op.name} takes {len(kinds)} ({', '.join(kinds)})")
        cursor.fail(f"{op.name} takes no operands" if not kinds
                    else f"unexpected text {cursor.text[cursor.pos:cursor.end]!r}")


def _parse_scalar(cursor: Cursor, op: Op) -> tuple[tuple, LabelRef | None]:
    if op == Op.MOV:
        kinds: tuple[str, ...] = ("Rd", "Ra or #imm")
    elif op in isa.SCALAR_ALU:
        kinds = ("Rd", "Ra", "Rb or #imm")
    else:
        kinds = ("Ra", "Rb or #imm", "label")
    registers: list[int] = []
    imm, label = 0.0, None
    for index, kind in enumerate(kinds):
        _before_operand(cursor, op, kinds, index)
        if kind == "label":
            found = cursor.match(LABEL) or cursor.fail(
                "expected the label of the branch target, like 'loop' (a line 'loop:' marks "
                "the instruction)")
            label = LabelRef(found.group(), found.start() + 1)
        elif kind.endswith("#imm") and cursor.text.startswith("#", cursor.pos):
            imm = float(_parse_int_imm(cursor))
            registers.append(-1)
        else:
            registers.append(_parse_register(cursor, kind))
    _after_operands(cursor, op, kinds)
    if op == Op.MOV:
        return scalar_row(op, registers[0], registers[1], 0, imm), None
    if op in isa.SCALAR_ALU:
        return scalar_row(op, *registers, imm), None
    return scalar_row(op, 0, registers[0], registers[1], imm), label


def _parse_register(cursor: Cursor, kind: str) -> int:
    start = cursor.pos
    found = cursor.match(_SCALAR_REG) or cursor.fail(
        f"expected a scalar register (R0..R{isa.SCALAR_REGISTERS - 1}) as operand {kind}")
    number = int(found.group(1))
    if number >= isa.SCALAR_REGISTERS:
        cursor.fail(f"R{number} does not exist: the scalar registers are "
                    f"R0..R{isa.SCALAR_REGISTERS - 1}", start)
    return number


def _parse_int_imm(cursor: Cursor) -> int:
    start = cursor.pos
    found = cursor.match(_INT_IMM) or cursor.fail(
        "expected an integer immediate, like #256 or #0x100 (scalar registers hold integers)")
    digits = found.group(1)
    value = int(digits, 16 if "x" in digits.lower() else 10)
    if abs(value) > IMM_LIMIT:
        cursor.fail(f"immediate {value} is out of range (at most 2**53 in magnitude)", start)
    return value


def _parse_suffixes(cursor: Cursor, op: Op, suffixes: list[str], pos: int
                    ) -> tuple[int, int, int]:
    """``(dtype, sdtype, flags)`` from the suffixes after the opcode (at column ``pos``)."""
    dtypes: list[int] = []
    flags = 0
    one_dtype = op in _ONE_REGISTER
    for suffix in suffixes:
        key = suffix.upper()
        if key in BY_SUFFIX and not flags and len(dtypes) < (1 if one_dtype else 2):
            if op in NO_DTYPE:
                cursor.fail(f"{op.name} takes no dtype suffix", pos)
            dtypes.append(BY_SUFFIX[key].code)
        elif key in _FLAGS and not flags & _FLAGS[key] and not one_dtype \
                and op not in isa.SCALAR_OPS:
            flags |= _FLAGS[key]
        elif one_dtype or op in isa.SCALAR_OPS:
            cursor.fail(f"unexpected suffix '.{suffix}' on {op.name}: "
                        + ("it takes none" if op in isa.SCALAR_OPS else
                           f"write {op.name}.DTYPE with DTYPE one of {', '.join(BY_SUFFIX)}"),
                        pos)
        else:
            cursor.fail(f"unexpected suffix '.{suffix}' on {op.name}: write "
                        f"OP.DTYPE[.SOURCE_DTYPE][.T][.ACC][.RELU][.ATOMIC] with DTYPE one of "
                        f"{', '.join(BY_SUFFIX)}", pos)
        pos += len(suffix) + 1
    if not dtypes and op not in NO_DTYPE:
        cursor.fail(f"{op.name} needs a dtype suffix, like {op.name}.F16", pos)
    return (dtypes[0], dtypes[-1], flags) if dtypes else (0, 0, flags)


def _parse_other(cursor: Cursor, kind: str) -> int | float:
    start = cursor.pos
    if kind.endswith("pipe"):
        word = cursor.match(_WORD)
        pipe = Pipe.__members__.get(word.group().upper()) if word else None
        if pipe is None:
            cursor.fail(f"unknown pipe: expected the {kind}, one of {', '.join(Pipe.__members__)}",
                        start)
        return int(pipe)
    if kind == "event":
        found = cursor.match(_EVENT) or cursor.fail("expected an event number, like 0")
        return cursor.number(found, 0, "event")
    found = cursor.match(_IMM) or cursor.fail("expected an immediate, like #1.5 or #-inf")
    try:
        return float(found.group(1))
    except ValueError:
        cursor.fail(f"expected a number after '#', got {found.group(1)!r}", start)


def _operand_example(memories: MemoryMap) -> str:
    vector, gm = memories.names[memories.roles["vector"]], memories.names[Mem.GM]
    return f"{vector}[0x0:16x16,16,1] or {gm}[A][0:16x16,16,1]"


def _parse_memory(cursor: Cursor, symbols: Sequence[Symbol], previous: list,
                  memories: MemoryMap, op: Op, index: int, isz: int) -> tuple[tuple, int]:
    """One memory operand ``(mem, addr, rows, cols, rs, cs, gm)`` and its base register
    + 1 (0: none)."""
    start = cursor.pos
    register = cursor.match(_VECTOR_REG)
    if op in _ONE_REGISTER and (index == _memory_side(op)) == bool(register):
        what = "one vector register, like Q0" if register is None else \
            f"a memory address, like {memories.names[memories.roles['vector']]}[0x100]"
        cursor.fail(f"expected {what} as operand {OPERANDS[index]} of {op.name}", start)
    if register:
        number = int(register.group(1))
        if number >= isa.VECTOR_REGISTERS:
            cursor.fail(f"Q{number} does not exist: the vector registers are "
                        f"Q0..Q{isa.VECTOR_REGISTERS - 1}", start)
        per_row = _REGISTER_BYTES // isz
        code = memories.roles.get("registers", Mem.REGISTERS)
        return (int(code), number * _REGISTER_BYTES, 1, per_row, per_row, 1, -1), 0
    found = cursor.match(_MEM_NAME) or cursor.fail(
        f"expected a memory operand like {_operand_example(memories)}")
    mem = memories.code(found.group(1))
    if mem is None:
        known = ", ".join(memories.names.values())
        on = f" on {memories.target}" if memories.target else ""
        cursor.fail(f"unknown memory {found.group(1)!r}{on} (expected one of {known})", start)
    gm = -1
    if mem == Mem.GM:
        tensor = cursor.match(_GM_TENSOR) or cursor.fail(
            f"expected a tensor name: {found.group(1)}[NAME][OFFSET:ROWSxCOLS,RS,CS]")
        names = [s.name for s in symbols]
        if tensor.group(1) not in names:
            declared = ", ".join(names) if names else "none"
            cursor.fail(f"unknown tensor {tensor.group(1)!r} (declared: {declared})",
                        tensor.start(1))
        gm = names.index(tensor.group(1))
        if any(o[0] == Mem.GM and o[6] != gm for o in previous):
            cursor.fail("an instruction can name only one GM tensor", tensor.start(1))
    if op in _ONE_REGISTER:
        region = cursor.match(_SHORT) or cursor.fail(
            f"expected [ADDRESS] after {found.group(1)}: {op.name} moves one whole register, "
            f"like {found.group(1)}[0x100] or {found.group(1)}[R1+0x40]")
        per_row = _REGISTER_BYTES // isz
        shape = (1, per_row, per_row, 1)
    else:
        region = cursor.match(_REGION) or cursor.fail(
            f"expected [ADDR:ROWSxCOLS,RS,CS] after {found.group(1)}, like "
            f"{_operand_example(memories)}")
        shape = tuple(cursor.number(region, name, field) for name, field in
                      zip(("rows", "cols", "rs", "cs"), _OPERAND_FIELDS[2:]))
    address, base = _parse_address(cursor, region, op, index)
    return (int(mem), address, *shape, gm), base


def _parse_address(cursor: Cursor, region: re.Match[str], op: Op, index: int
                   ) -> tuple[int, int]:
    """(address or offset, base register + 1) of a region's ``ADDR`` part."""
    if region.group("base") is None:
        return cursor.number(region, "addr", "d_addr"), 0
    number = int(region.group("base"))
    if op not in isa.REGISTER_BASED or index > 1:
        cursor.fail(f"a register-based address (R{number}+...) is for COPY, VLD and VST; "
                    f"{op.name} takes fixed addresses", region.start("base") - 1)
    if number >= isa.SCALAR_REGISTERS:
        cursor.fail(f"R{number} does not exist: the scalar registers are "
                    f"R0..R{isa.SCALAR_REGISTERS - 1}", region.start("base") - 1)
    if region.group("offset") is None:
        return 0, number + 1
    digits = region.group("offset")
    offset = int(digits, 16 if "x" in digits.lower() else 10)
    offset = -offset if region.group("sign") == "-" else offset
    limits = _RANGE["d_addr"]
    if not limits.min <= offset <= limits.max:
        cursor.fail(f"{offset} is out of range for addr ({limits.min}..{limits.max})",
                    region.start("offset"))
    return offset, number + 1
