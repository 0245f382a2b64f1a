"""PTO assembly text: ``print_program`` writes a ``Program``, ``parse`` reads it back.

``parse(print_program(p)) == p``, and ``print_program(parse(text)) == text`` for text
``print_program`` wrote. Fields not printed are derived: the pipe from the op and its
memories (SET_FLAG / WAIT_FLAG name theirs), ``sdtype`` from ``dtype``, ``gm`` from the
GM operand, zero for the rest. A line looks like
``VADDS.F16 UB[0x800:16x64,64,1], GM[A][0:16x64,64,1], #1.5  ; a comment``.

Memories are spelled as the program's target names them (``UB`` is the vector memory
of an Ascend target, ``NRAM`` that of an MLU one; ``pypto.codegen.memories``); for a
target that is not a packaged one, by role (``VECTOR[...]``), unless the ``Target`` is
passed.

Example:
    >>> text = ".program p target=t\\n.core 0\\n    BARRIER\\n"
    >>> print_program(parse(text)) == text
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import IntEnum
from typing import NoReturn, TypeVar

import numpy as np

from pypto.codegen import isa
from pypto.codegen.isa import INSTR, OPERANDS, Mem, Op, Pipe
from pypto.codegen.memories import MemoryMap, for_target, isa_view, memory_map
from pypto.codegen.program import Program, Symbol, pipe_of
from pypto.errors import AsmError
from pypto.ir.dtypes import BY_CODE, BY_NAME, BY_SUFFIX
from pypto.targets import Target

_E = TypeVar("_E", bound=IntEnum)
_NO_DTYPE = frozenset({Op.SET_FLAG, Op.WAIT_FLAG, Op.BARRIER, Op.SYNC_ALL, Op.NOP})
_SYNC = frozenset({Op.SET_FLAG, Op.WAIT_FLAG})
_WITH_IMM = isa.SCALAR_IMM | {Op.VDUP}
_FLAGS = {"T": isa.F_TRANSPOSE, "ACC": isa.F_ACCUMULATE, "RELU": isa.F_RELU,
          "ATOMIC": isa.F_ATOMIC}
_ROLES = ("in", "out", "tmp")
# Per operand field (mem, addr, rows, cols, rs, cs): the INSTR field giving its range.
_OPERAND_FIELDS = ("d_mem", "d_addr", "d_rows", "d_cols", "d_rs", "d_cs")
_RANGE = {name: np.iinfo(INSTR[name]) for name in ("event", *_OPERAND_FIELDS[1:])}
_FIELD_NAMES: tuple[str, ...] = INSTR.names or ()
_CODES = frozenset(int(m) for m in Mem)

_NAME = r"[A-Za-z_][\w.]*"
_INT = r"-?(?:0[xX][0-9a-fA-F]+|\d+)"
_SPACE = re.compile(r"\s*")
_COMMA = re.compile(r"\s*,\s*")
_MNEMONIC = re.compile(r"[A-Za-z_]\w*(?:\.\w+)*")
_WORD = re.compile(r"[A-Za-z_]\w*")
_EVENT = re.compile(_INT)
_IMM = re.compile(r"#\s*([^\s,;]+)")
_MEM_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?=\[)")
_GM_TENSOR = re.compile(rf"\[\s*({_NAME})\s*\]\s*(?=\[)")
_REGION = re.compile(  # [ADDR:ROWSxCOLS,RS,CS]
    rf"\[\s*({_INT})\s*:\s*(-?\d+)\s*[xX]\s*(-?\d+)\s*,\s*(-?\d+)\s*,\s*(-?\d+)\s*\]")
_DIRECTIVE = re.compile(r"\.(\w+)")
_HEADER = re.compile(r"\s+([^\s;]+)\s+target=([^\s;]+)")
_TENSOR = re.compile(rf"\s+({_NAME})\s+(\w+)\s*\[([^\]]*)\]\s*(\w+)")
_CORE = re.compile(r"\s+(\d+)")


class _Cursor:
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
        self.match(_SPACE)
        return self.pos >= self.end

    def expect_end(self, what: str) -> None:
        if not self.at_end():
            self.fail(f"unexpected text {self.text[self.pos:self.end]!r} after {what}")

    def number(self, found: re.Match[str], group: int, field: str) -> int:
        """The integer in ``group`` of ``found``, checked to fit the INSTR ``field``."""
        digits = found.group(group)
        value = int(digits, 16 if "x" in digits.lower() else 10)
        limits = _RANGE[field]
        if not limits.min <= value <= limits.max:
            self.fail(f"{value} is out of range for {field.removeprefix('d_')} "
                      f"({limits.min}..{limits.max})", found.start(group))
        return value


# ---------------------------------------------------------------------------- printing

def print_program(program: Program, target: Target | None = None) -> str:
    """The program as PTO assembly text; ``parse`` reads it back to an equal program.

    Memories are named as ``target`` names them (by default the packaged target named by
    ``program.target``, else by role). Raises ``AsmError`` for a program the text cannot
    represent (say an instruction whose pipe is not the one its op and memories imply).
    """
    memories = _memories(program.target, target)
    for what, token in (("program name", program.name), ("target name", program.target)):
        if not re.fullmatch(r"[^\s;]+", token):
            raise AsmError(f"cannot print {what} {token!r}: it must be non-empty, "
                           "without spaces or ';'")
    lines = [f".program {program.name} target={program.target}"]
    names: set[str] = set()
    for symbol in program.symbols:
        lines.append(_format_tensor(symbol, names))
    for index, stream in enumerate(program.cores):
        lines.append(f".core {index}")
        for position, row in enumerate(stream.tolist()):
            try:
                lines.append("    " + _print_instruction(row, program.symbols, memories))
            except AsmError as error:
                raise AsmError(f"core {index}, instruction {position}: {error}") from None
    return "\n".join(lines) + "\n"


def _format_tensor(symbol: Symbol, names: set[str]) -> str:
    shape = ",".join(str(n) for n in symbol.shape)
    if not re.fullmatch(_NAME, symbol.name) or symbol.name in names \
            or BY_NAME.get(symbol.dtype.name) != symbol.dtype or symbol.role not in _ROLES \
            or not re.fullmatch(r"[\d,]*", shape):
        raise AsmError(f"cannot print tensor {symbol.name!r}: it needs a unique name like A_1, "
                       f"a dtype of {', '.join(BY_NAME)}, dimensions >= 0 and a role of "
                       f"{', '.join(_ROLES)}")
    names.add(symbol.name)
    return f".tensor {symbol.name} {symbol.dtype.name} [{shape}] {symbol.role}"


def print_instruction(row: Sequence | np.void, symbols: Sequence[Symbol],
                      target: Target | str | None = None) -> str:
    """One instruction (a tuple in ``INSTR`` field order, or a record) as text.

    ``symbols`` names the GM tensors, ``target`` the memories: a ``Target``, the name of
    a program's target (a packaged one prints its own names), or None (by role).
    Raises ``AsmError`` if a field the text does not carry differs from what
    ``parse_instruction`` would derive for it.
    """
    if isinstance(target, str):
        return _print_instruction(row, symbols, _memories(target, None))
    return _print_instruction(row, symbols, isa_view() if target is None else memory_map(target))


def _memories(name: str, target: Target | None) -> MemoryMap:
    return for_target(name) if target is None else memory_map(target)


def _print_instruction(row: Sequence | np.void, symbols: Sequence[Symbol],
                       memories: MemoryMap) -> str:
    fields = row.item() if isinstance(row, np.void) else tuple(row)
    op = _decode(Op, fields[0], "opcode")
    mnemonic = _mnemonic(op, fields[4], fields[5], fields[6])
    if op in _SYNC:
        src, dst = (fields[1], fields[2]) if op == Op.SET_FLAG else (fields[2], fields[1])
        text = f"{mnemonic} {_decode(Pipe, src, 'pipe').name}, " \
               f"{_decode(Pipe, dst, 'pipe').name}, {fields[3]}"
        expected = _make_row(memories, op, 0, 0, fields[6], 0.0, [], fields[1], fields[2],
                             fields[3])
    else:
        count = isa.operand_count(op)
        operands = [(*fields[9 + 6 * i:15 + 6 * i], fields[7]) for i in range(count)]
        parts = [_format_operand(op, i, operand, symbols, memories)
                 for i, operand in enumerate(operands)]
        imm = float(fields[8]) if op in _WITH_IMM else 0.0
        if op in _WITH_IMM:
            parts.append(f"#{imm!r}")
        text = f"{mnemonic} {', '.join(parts)}" if parts else mnemonic
        try:
            expected = _make_row(memories, op, fields[4], fields[5], fields[6], imm, operands)
        except ValueError as error:
            raise AsmError(f"cannot print {text!r}: {error}") from None
    for name, have, want in zip(_FIELD_NAMES, fields, expected):
        # repr tells -0.0 from 0.0 and lets nan equal nan.
        if repr(have) != repr(want) if name == "imm" else have != want:
            raise AsmError(f"cannot print {text!r}: its field {name} is {have!r} but the text "
                           f"means {want!r}")
    return text


def _decode(kind: type[_E], code: int, what: str) -> _E:
    try:
        return kind(code)
    except ValueError:
        raise AsmError(f"cannot print an instruction with {what} code {code}") from None


def _mnemonic(op: Op, dtype: int, sdtype: int, flags: int) -> str:
    if flags & ~sum(_FLAGS.values()):
        raise AsmError(f"cannot print {op.name} with flags {flags:#x}: only "
                       f"{', '.join('.' + name for name in _FLAGS)} exist")
    text = op.name
    if op not in _NO_DTYPE:
        for code in (dtype, sdtype) if sdtype != dtype else (dtype,):
            if code not in BY_CODE:
                raise AsmError(f"cannot print {op.name} with dtype code {code}")
            text += "." + BY_CODE[code].suffix
    return text + "".join(f".{name}" for name, bit in _FLAGS.items() if flags & bit)


def _format_operand(op: Op, index: int, operand: tuple, symbols: Sequence[Symbol],
                    memories: MemoryMap) -> str:
    mem, addr, rows, cols, rs, cs, gm = operand
    region = f"{rows}x{cols},{rs},{cs}]"
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
    if mem == Mem.GM:
        if not 0 <= gm < len(symbols):
            raise AsmError(f"cannot print {op.name}: GM tensor index {gm} is not one of the "
                           f"program's {len(symbols)} tensors")
        return f"{name}[{symbols[gm].name}][{addr}:{region}"
    return f"{name}[{addr:#x}:{region}"


def _make_row(memories: MemoryMap, op: Op, dtype: int, sdtype: int, flags: int, imm: float,
              operands: list[tuple], pipe: int | None = None, pipe2: int = 0,
              event: int = 0) -> tuple:
    """The INSTR tuple with every field the text does not carry derived (as StreamBuilder)."""
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
    return (int(op), pipe, pipe2, event, dtype, sdtype, flags, gm, float(imm), *packed)


# ----------------------------------------------------------------------------- parsing

def parse(text: str, target: Target | None = None) -> Program:
    """Read PTO assembly (as ``print_program`` writes it) into a ``Program``.

    Memories are read as ``target`` names them (by default the packaged target the
    ``.program`` line names, else by role). Blank lines and ``;`` comments are ignored;
    mnemonics, memories and pipes may be in any case. Raises ``AsmError`` with the line
    and column of the first problem.
    """
    header: tuple[str, str] | None = None
    memories = isa_view()
    symbols: list[Symbol] = []
    cores: list[list[tuple]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        cursor = _Cursor(line, lineno)
        if cursor.at_end():
            continue
        start = cursor.pos
        directive = cursor.match(_DIRECTIVE)
        word = directive.group(1) if directive else None
        keyword = word.lower() if word else None
        if header is None and keyword != "program":
            cursor.fail("expected .program NAME target=TARGET as the first line", start)
        if keyword is None and not cores:
            cursor.fail("instruction before .core: start a core with a '.core N' line", start)
        if keyword is None:
            cores[-1].append(_parse_instruction(cursor, symbols, memories))
        elif keyword == "program" and header is None:
            found = cursor.match(_HEADER) or cursor.fail("expected .program NAME target=TARGET")
            header = (found.group(1), found.group(2))
            memories = _memories(header[1], target)
        elif keyword == "program":
            cursor.fail("a second .program line: a text holds one program", start)
        elif keyword == "tensor" and cores:
            cursor.fail(".tensor after .core: declare every tensor before the first .core", start)
        elif keyword == "tensor":
            symbols.append(_parse_tensor(cursor, symbols))
        elif keyword == "core":
            found = cursor.match(_CORE) or cursor.fail("expected a core number: .core N")
            if int(found.group(1)) != len(cores):
                cursor.fail(f"expected .core {len(cores)}: cores are numbered from 0, in order",
                            found.start(1))
            cores.append([])
        else:
            cursor.fail(f"unknown directive '.{word}' (expected .program, .tensor or .core)",
                        start)
        if keyword:  # an instruction checks its own end
            cursor.expect_end(f"the .{keyword} line")
    if header is None:
        raise AsmError("empty program: expected a '.program NAME target=TARGET' line", line=1)
    arrays = tuple(np.array(rows, dtype=INSTR) if rows else np.zeros(0, dtype=INSTR)
                   for rows in cores)
    return Program(header[0], header[1], tuple(symbols), arrays)


def _parse_tensor(cursor: _Cursor, symbols: list[Symbol]) -> Symbol:
    found = cursor.match(_TENSOR) or cursor.fail(
        "expected .tensor NAME DTYPE [DIMS] ROLE, like .tensor A float16 [1024,1024] in")
    name, dtype_name, dims, role = found.groups()
    if any(s.name == name for s in symbols):
        cursor.fail(f"tensor {name!r} is declared twice", found.start(1))
    dtype = BY_NAME.get(dtype_name.lower()) or cursor.fail(
        f"unknown dtype {dtype_name!r} (expected one of {', '.join(BY_NAME)})", found.start(2))
    dims_found = list(re.finditer(r"[^,]+", dims)) if dims.strip() else []
    for dim in dims_found:
        if not re.fullmatch(r"\s*\d+\s*", dim.group()):
            cursor.fail(f"expected a non-negative integer dimension, got {dim.group().strip()!r}",
                        found.start(3) + dim.start())
    if role not in _ROLES:
        cursor.fail(f"unknown role {role!r} (expected one of {', '.join(_ROLES)})",
                    found.start(4))
    return Symbol(name, dtype, tuple(int(dim.group()) for dim in dims_found), role)


def parse_instruction(line: str, symbols: Sequence[Symbol], lineno: int = 1,
                      target: Target | None = None) -> tuple:
    """One instruction line as a tuple in ``INSTR`` field order (as ``StreamBuilder.rows``).

    ``symbols`` are the GM tensors operands may name, ``target`` names the memories
    (without one: by role); ``lineno`` goes into errors.
    """
    memories = isa_view() if target is None else memory_map(target)
    return _parse_instruction(_Cursor(line, lineno), symbols, memories)


def _parse_instruction(cursor: _Cursor, symbols: Sequence[Symbol],
                       memories: MemoryMap) -> tuple:
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

    if op in _SYNC:
        kinds: tuple[str, ...] = ("source pipe", "destination pipe", "event")
    else:
        kinds = OPERANDS[:isa.operand_count(op)] + (("#imm",) if op in _WITH_IMM else ())
    values: list = []
    for index, kind in enumerate(kinds):
        if cursor.at_end():
            cursor.fail(f"{op.name} takes {len(kinds)} operands ({', '.join(kinds)}), "
                        f"found {index}")
        if index and not cursor.match(_COMMA):
            cursor.fail(f"expected ',' before operand {kind} of {op.name}")
        values.append(_parse_operand(cursor, kind, symbols, values, memories))
    if not cursor.at_end():
        if kinds and cursor.text[cursor.pos] == ",":
            cursor.fail(f"too many operands: {op.name} takes {len(kinds)} ({', '.join(kinds)})")
        cursor.fail(f"{op.name} takes no operands" if not kinds
                    else f"unexpected text {cursor.text[cursor.pos:cursor.end]!r}")

    if op in _SYNC:
        src, dst, event = values
        pipe, pipe2 = (src, dst) if op == Op.SET_FLAG else (dst, src)
        return _make_row(memories, op, 0, 0, flags, 0.0, [], pipe, pipe2, event)
    imm = values.pop() if op in _WITH_IMM else 0.0
    try:
        return _make_row(memories, op, dtype, sdtype, flags, imm, values)
    except ValueError as error:  # a COPY between memories with no path
        cursor.fail(f"{error} (COPY paths: {memories.paths()})", start)


def _parse_suffixes(cursor: _Cursor, op: Op, suffixes: list[str], pos: int
                    ) -> tuple[int, int, int]:
    """``(dtype, sdtype, flags)`` from the suffixes after the opcode (at column ``pos``)."""
    dtypes: list[int] = []
    flags = 0
    for suffix in suffixes:
        key = suffix.upper()
        if key in BY_SUFFIX and not flags and len(dtypes) < 2:
            if op in _NO_DTYPE:
                cursor.fail(f"{op.name} takes no dtype suffix", pos)
            dtypes.append(BY_SUFFIX[key].code)
        elif key in _FLAGS and not flags & _FLAGS[key]:
            flags |= _FLAGS[key]
        else:
            cursor.fail(f"unexpected suffix '.{suffix}' on {op.name}: write "
                        f"OP.DTYPE[.SOURCE_DTYPE][.T][.ACC][.RELU][.ATOMIC] with DTYPE one of "
                        f"{', '.join(BY_SUFFIX)}", pos)
        pos += len(suffix) + 1
    if not dtypes and op not in _NO_DTYPE:
        cursor.fail(f"{op.name} needs a dtype suffix, like {op.name}.F16", pos)
    return (dtypes[0], dtypes[-1], flags) if dtypes else (0, 0, flags)


def _parse_operand(cursor: _Cursor, kind: str, symbols: Sequence[Symbol], previous: list,
                   memories: MemoryMap) -> int | float | tuple:
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
    if kind == "#imm":
        found = cursor.match(_IMM) or cursor.fail("expected an immediate, like #1.5 or #-inf")
        try:
            return float(found.group(1))
        except ValueError:
            cursor.fail(f"expected a number after '#', got {found.group(1)!r}", start)
    return _parse_memory(cursor, symbols, previous, memories)


def _operand_example(memories: MemoryMap) -> str:
    vector, gm = memories.names[memories.roles["vector"]], memories.names[Mem.GM]
    return f"{vector}[0x0:16x16,16,1] or {gm}[A][0:16x16,16,1]"


def _parse_memory(cursor: _Cursor, symbols: Sequence[Symbol], previous: list,
                  memories: MemoryMap) -> tuple:
    start = cursor.pos
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
    region = cursor.match(_REGION) or cursor.fail(
        f"expected [ADDR:ROWSxCOLS,RS,CS] after {found.group(1)}, like "
        f"{_operand_example(memories)}")
    numbers = [cursor.number(region, i + 1, field) for i, field in enumerate(_OPERAND_FIELDS[1:])]
    return (int(mem), *numbers, gm)
