"""PTO assembly parsing, one instruction at a time: the ``INSTR`` row of a line (the
grammar: ``pypto.codegen.asm_syntax``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pypto.codegen import isa
from pypto.codegen.asm_syntax import (
    FLAGS,
    IMM_LIMIT,
    LABEL,
    NAME,
    NO_DTYPE,
    ONE_REGISTER,
    OPERAND_FIELDS,
    RANGE,
    REGISTER_BYTES,
    SYNC,
    WITH_IMM,
    Cursor,
    LabelRef,
    make_row,
    memory_side,
    scalar_row,
)
from pypto.codegen.isa import OPERANDS, Mem, Op, Pipe
from pypto.codegen.memories import MemoryMap
from pypto.codegen.program import Symbol
from pypto.ir.dtypes import BY_CODE, BY_SUFFIX

_INT = r"-?(?:0[xX][0-9a-fA-F]+|\d+)"
_UINT = r"(?:0[xX][0-9a-fA-F]+|\d+)"
_COMMA = re.compile(r"\s*,\s*")
_MNEMONIC = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")
_WORD = re.compile(r"[A-Za-z_]\w*")
_EVENT = re.compile(_INT)
_IMM = re.compile(r"#\s*([^\s,;]+)")
_INT_IMM = re.compile(rf"#\s*({_INT})(?![\w.])")
_SCALAR_REG = re.compile(r"[Rr](\d+)(?!\w)")
_VECTOR_REG = re.compile(r"[Qq](\d+)(?![\w\[])")
_MEM_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?=\[)")
_GM_TENSOR = re.compile(rf"\[\s*({NAME})\s*\]\s*(?=\[)")
_ADDRESS = rf"(?:[Rr](?P<base>\d+)\s*(?:(?P<sign>[+-])\s*(?P<offset>{_UINT}))?|(?P<addr>{_INT}))"
_REGION = re.compile(  # [ADDR:ROWSxCOLS,RS,CS]
    rf"\[\s*{_ADDRESS}\s*:\s*(?P<rows>-?\d+)\s*[xX]\s*(?P<cols>-?\d+)\s*,\s*(?P<rs>-?\d+)\s*,"
    rf"\s*(?P<cs>-?\d+)\s*\]")
_SHORT = re.compile(rf"\[\s*{_ADDRESS}\s*\]")   # [ADDR]: one register's bytes, contiguous


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
    if op in SYNC:
        kinds: tuple[str, ...] = ("source pipe", "destination pipe", "event")
    else:
        kinds = OPERANDS[:isa.operand_count(op)] + (("#imm",) if op in WITH_IMM else ())
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
    if op in SYNC:
        src, dst, event = values
        pipe, pipe2 = (src, dst) if op == Op.SET_FLAG else (dst, src)
        return make_row(memories, op, 0, 0, flags, 0.0, [], pipe, pipe2, event), None
    imm = values.pop() if op in WITH_IMM else 0.0
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
    one_dtype = op in ONE_REGISTER
    for suffix in suffixes:
        key = suffix.upper()
        if key in BY_SUFFIX and not flags and len(dtypes) < (1 if one_dtype else 2):
            if op in NO_DTYPE:
                cursor.fail(f"{op.name} takes no dtype suffix", pos)
            dtypes.append(BY_SUFFIX[key].code)
        elif key in FLAGS and not flags & FLAGS[key] and not one_dtype \
                and op not in isa.SCALAR_OPS:
            flags |= FLAGS[key]
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
    if op in ONE_REGISTER and (index == memory_side(op)) == bool(register):
        what = "one vector register, like Q0" if register is None else \
            f"a memory address, like {memories.names[memories.roles['vector']]}[0x100]"
        cursor.fail(f"expected {what} as operand {OPERANDS[index]} of {op.name}", start)
    if register:
        number = int(register.group(1))
        if number >= isa.VECTOR_REGISTERS:
            cursor.fail(f"Q{number} does not exist: the vector registers are "
                        f"Q0..Q{isa.VECTOR_REGISTERS - 1}", start)
        per_row = REGISTER_BYTES // isz
        code = memories.roles.get("registers", Mem.REGISTERS)
        return (int(code), number * REGISTER_BYTES, 1, per_row, per_row, 1, -1), 0
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
    if op in ONE_REGISTER:
        region = cursor.match(_SHORT) or cursor.fail(
            f"expected [ADDRESS] after {found.group(1)}: {op.name} moves one whole register, "
            f"like {found.group(1)}[0x100] or {found.group(1)}[R1+0x40]")
        per_row = REGISTER_BYTES // isz
        shape = (1, per_row, per_row, 1)
    else:
        region = cursor.match(_REGION) or cursor.fail(
            f"expected [ADDR:ROWSxCOLS,RS,CS] after {found.group(1)}, like "
            f"{_operand_example(memories)}")
        shape = tuple(cursor.number(region, name, field) for name, field in
                      zip(("rows", "cols", "rs", "cs"), OPERAND_FIELDS[2:]))
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
    limits = RANGE["d_addr"]
    if not limits.min <= offset <= limits.max:
        cursor.fail(f"{offset} is out of range for addr ({limits.min}..{limits.max})",
                    region.start("offset"))
    return offset, number + 1
