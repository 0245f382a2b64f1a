"""PTO assembly printing, one instruction at a time: the text of an ``INSTR`` row
(the grammar: ``pypto.codegen.asm_syntax``)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import TypeVar

import numpy as np

from pypto.codegen import isa
from pypto.codegen.asm_syntax import (
    CODES,
    FIELD_NAMES,
    FLAGS,
    IMM_LIMIT,
    NO_DTYPE,
    ONE_REGISTER,
    REGISTER_BYTES,
    SYNC,
    WITH_IMM,
    make_row,
    memory_side,
    scalar_row,
)
from pypto.codegen.isa import OPERANDS, Mem, Op, Pipe
from pypto.codegen.memories import MemoryMap
from pypto.codegen.program import Symbol
from pypto.errors import AsmError
from pypto.ir.dtypes import BY_CODE

_E = TypeVar("_E", bound=IntEnum)


def format_instruction(row: Sequence | np.void, symbols: Sequence[Symbol],
                       memories: MemoryMap) -> str:
    """The text of one row (a tuple in ``INSTR`` field order, or a record); ``AsmError``
    if a field the text does not carry differs from what parsing would derive."""
    fields = row.item() if isinstance(row, np.void) else tuple(row)
    op = _decode(Op, fields[0], "opcode")
    mnemonic = _mnemonic(op, fields[4], fields[5], fields[6])
    if op in SYNC:
        src, dst = (fields[1], fields[2]) if op == Op.SET_FLAG else (fields[2], fields[1])
        text = f"{mnemonic} {_decode(Pipe, src, 'pipe').name}, " \
               f"{_decode(Pipe, dst, 'pipe').name}, {fields[3]}"
        expected = make_row(memories, op, 0, 0, fields[6], 0.0, [], fields[1], fields[2],
                            fields[3])
    elif op in isa.SCALAR_OPS:
        text, expected = _format_scalar(op, fields)
    else:
        text, expected = _format_memory_op(op, mnemonic, fields, symbols, memories)
    for name, have, want in zip(FIELD_NAMES, fields, expected):
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
    imm = float(fields[8]) if op in WITH_IMM else 0.0
    if op in WITH_IMM:
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
    if flags & ~sum(FLAGS.values()):
        raise AsmError(f"cannot print {op.name} with flags {flags:#x}: only "
                       f"{', '.join('.' + name for name in FLAGS)} exist")
    if flags and (op in ONE_REGISTER or op in isa.SCALAR_OPS):
        raise AsmError(f"cannot print {op.name} with flags {flags:#x}: it takes none")
    text = op.name
    if op not in NO_DTYPE:
        for code in (dtype, sdtype) if sdtype != dtype else (dtype,):
            if code not in BY_CODE:
                raise AsmError(f"cannot print {op.name} with dtype code {code}")
            text += "." + BY_CODE[code].suffix
    return text + "".join(f".{name}" for name, bit in FLAGS.items() if flags & bit)


def _whole_register(mem: int, addr: int, rows: int, cols: int, rs: int, cs: int,
                    isz: int) -> int | None:
    """The number n of ``Qn`` if the region is that whole register, else None."""
    per_row = REGISTER_BYTES // isz
    if mem != Mem.REGISTERS or (rows, cols, rs, cs) != (1, per_row, per_row, 1) \
            or addr % REGISTER_BYTES or not 0 <= addr // REGISTER_BYTES < isa.VECTOR_REGISTERS:
        return None
    return addr // REGISTER_BYTES


def _format_operand(op: Op, index: int, operand: tuple, symbols: Sequence[Symbol],
                    memories: MemoryMap, base: int, isz: int) -> str:
    mem, addr, rows, cols, rs, cs, gm = operand
    register = _whole_register(mem, addr, rows, cols, rs, cs, isz)
    side = memory_side(op)
    if op in ONE_REGISTER and index != side:
        if register is None or base:
            raise AsmError(f"cannot print {op.name}: operand {OPERANDS[index]} must be one whole "
                           f"vector register Q0..Q{isa.VECTOR_REGISTERS - 1}")
        return f"Q{register}"
    if register is not None and not base and op not in ONE_REGISTER:
        return f"Q{register}"
    if mem not in memories.names:
        if mem == Mem.NONE or mem not in CODES:
            raise AsmError(f"cannot print {op.name}: operand {OPERANDS[index]} has no memory "
                           f"(code {mem}); {op.name} takes {isa.operand_count(op)} memory "
                           "operands")
        codes = ", ".join(f"{name} as {code.name}" for code, name in memories.names.items())
        raise AsmError(f"cannot print {op.name}: operand {OPERANDS[index]} is in "
                       f"{Mem(mem).name}, a memory code {memories.target} does not use (it "
                       f"codes {codes})")
    name = memories.names[mem]
    address = _format_address(addr, base, hexadecimal=mem != Mem.GM)
    if op in ONE_REGISTER:
        per_row = REGISTER_BYTES // isz
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
