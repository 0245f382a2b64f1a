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

import numpy as np

from pypto.codegen import isa
from pypto.codegen.asm_format import format_instruction
from pypto.codegen.asm_parse import parse_row
from pypto.codegen.asm_syntax import (
    LABEL,
    NAME,
    Cursor,
    LabelRef,
)
from pypto.codegen.isa import INSTR
from pypto.codegen.memories import MemoryMap, for_target, isa_view, memory_map
from pypto.codegen.program import Program, Symbol
from pypto.errors import AsmError
from pypto.ir.dtypes import BY_NAME
from pypto.targets import Target

_ROLES = ("in", "out", "tmp")
_DIRECTIVE = re.compile(r"\.(\w+)")
_HEADER = re.compile(r"\s+([^\s;]+)\s+target=([^\s;]+)")
_TENSOR = re.compile(rf"\s+({NAME})\s+(\w+)\s*\[([^\]]*)\]\s*(\w+)")
_CORE = re.compile(r"\s+(\d+)")
_LABEL_DEF = re.compile(rf"({LABEL.pattern})\s*:(?=\s|$|;)")


# ---------------------------------------------------------------------------- printing

def print_program(program: Program, target: Target | None = None) -> str:
    """The program as PTO assembly text; ``parse`` reads it back to an equal program.

    Memories are named as ``target`` names them (by default the packaged target named by
    ``program.target``, else by role). Branch targets get labels ``L<index>:`` on lines of
    their own. Raises ``AsmError`` for a program the text cannot represent (say an
    instruction whose pipe is not the one its op and memories imply).
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
        labels = _branch_targets(stream, index)
        for position, row in enumerate(stream.tolist()):
            if position in labels:
                lines.append(f"L{position}:")
            try:
                lines.append("    " + format_instruction(row, program.symbols, memories))
            except AsmError as error:
                raise AsmError(f"core {index}, instruction {position}: {error}") from None
        if len(stream) in labels:
            lines.append(f"L{len(stream)}:")
    return "\n".join(lines) + "\n"


def _branch_targets(stream: np.ndarray, core: int) -> set[int]:
    """The instructions branches of ``stream`` go to (a label each); ``AsmError`` for a
    target outside the stream."""
    if not len(stream):
        return set()
    branches = np.isin(stream["op"], [int(op) for op in isa.BRANCHES])
    targets = stream["d_addr"][branches]
    bad = (targets < 0) | (targets > len(stream))
    if bad.any():
        position = int(np.flatnonzero(branches)[np.flatnonzero(bad)[0]])
        raise AsmError(f"core {core}, instruction {position}: cannot print a branch to "
                       f"instruction {int(targets[bad][0])}: the stream has {len(stream)}")
    return {int(t) for t in targets}


def _format_tensor(symbol: Symbol, names: set[str]) -> str:
    shape = ",".join(str(n) for n in symbol.shape)
    if not re.fullmatch(NAME, symbol.name) or symbol.name in names \
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
    a program's target (a packaged one prints its own names), or None (by role). A
    branch names its target ``L<index>``. Raises ``AsmError`` if a field the text does
    not carry differs from what ``parse_instruction`` would derive for it.
    """
    if isinstance(target, str):
        return format_instruction(row, symbols, _memories(target, None))
    return format_instruction(row, symbols, isa_view() if target is None else memory_map(target))


def _memories(name: str, target: Target | None) -> MemoryMap:
    return for_target(name) if target is None else memory_map(target)


# ----------------------------------------------------------------------------- parsing

class _Streams:
    """The cores a text builds: their rows, the source line of each, and labels."""

    def __init__(self, symbols: Sequence[Symbol], memories: MemoryMap) -> None:
        self.symbols, self.memories = symbols, memories
        self.cores: list[list[tuple]] = []
        self.lines: list[list[int]] = []
        self.labels: dict[str, int] = {}
        self.refs: list[tuple[int, LabelRef, Cursor]] = []

    def open_core(self, cursor: Cursor, found: re.Match[str], limit: int | None) -> None:
        number = int(found.group(1))
        if number != len(self.cores):
            cursor.fail(f"expected .core {len(self.cores)}: cores are numbered from 0, in order",
                        found.start(1))
        if limit is not None and number >= limit:
            cursor.fail(f"core {number} does not exist: the target has {limit} cores",
                        found.start(1))
        self.close_core()
        self.cores.append([])
        self.lines.append([])

    def label(self, cursor: Cursor) -> None:
        """A ``NAME:`` at the cursor marks the next instruction."""
        found = cursor.match(_LABEL_DEF)
        if found is None:
            return
        if found.group(1) in self.labels:
            cursor.fail(f"label {found.group(1)!r} is defined twice in this core", found.start(1))
        self.labels[found.group(1)] = len(self.cores[-1])

    def instruction(self, cursor: Cursor) -> None:
        row, ref = parse_row(cursor, self.symbols, self.memories)
        if ref is not None:
            self.refs.append((len(self.cores[-1]), ref, cursor))
        self.cores[-1].append(row)
        self.lines[-1].append(cursor.lineno)

    def close_core(self) -> None:
        """Resolve the branches of the core being read (labels are per core)."""
        for index, ref, cursor in self.refs:
            if ref.name not in self.labels:
                known = ", ".join(self.labels) or "none"
                cursor.fail(f"unknown label {ref.name!r} (this core's labels: {known})",
                            ref.column - 1)
            self.cores[-1][index] = _with_target(self.cores[-1][index], self.labels[ref.name])
        self.labels, self.refs = {}, []

    def program(self, name: str, target: str, symbols: Sequence[Symbol]) -> Program:
        self.close_core()
        arrays = tuple(np.array(rows, dtype=INSTR) if rows else np.zeros(0, dtype=INSTR)
                       for rows in self.cores)
        return Program(name, target, tuple(symbols), arrays,
                       lines=tuple(tuple(lines) for lines in self.lines))


def _with_target(row: tuple, target: int) -> tuple:
    return row[:10] + (target,) + row[11:]


def parse(text: str, target: Target | None = None) -> Program:
    """Read PTO assembly (as ``print_program`` writes it) into a ``Program``.

    Memories are read as ``target`` names them (by default the packaged target the
    ``.program`` line names, else by role). Blank lines and ``;`` comments are ignored;
    mnemonics, memories and pipes may be in any case; ``NAME:`` labels an instruction
    (per core). The program's ``lines`` are each instruction's line in ``text``.
    Raises ``AsmError`` with the line and column of the first problem.
    """
    header: tuple[str, str] | None = None
    symbols: list[Symbol] = []
    streams = _Streams(symbols, isa_view())
    for lineno, line in enumerate(text.splitlines(), start=1):
        cursor = Cursor(line, lineno)
        if cursor.at_end():
            continue
        start = cursor.pos
        directive = cursor.match(_DIRECTIVE)
        word = directive.group(1) if directive else None
        keyword = word.lower() if word else None
        if header is None and keyword != "program":
            cursor.fail("expected .program NAME target=TARGET as the first line", start)
        if keyword is None and not streams.cores:
            cursor.fail("instruction before .core: start a core with a '.core N' line", start)
        if keyword is None:
            _instruction_line(cursor, streams)
            continue
        if keyword == "program" and header is None:
            found = cursor.match(_HEADER) or cursor.fail("expected .program NAME target=TARGET")
            header = (found.group(1), found.group(2))
            streams.memories = _memories(header[1], target)
        elif keyword == "program":
            cursor.fail("a second .program line: a text holds one program", start)
        elif keyword == "tensor" and streams.cores:
            cursor.fail(".tensor after .core: declare every tensor before the first .core", start)
        elif keyword == "tensor":
            symbols.append(_parse_tensor(cursor, symbols))
        elif keyword == "core":
            streams.open_core(cursor, cursor.match(_CORE) or cursor.fail(
                "expected a core number: .core N"), None)
        else:
            cursor.fail(f"unknown directive '.{word}' (expected .program, .tensor or .core)",
                        start)
        cursor.expect_end(f"the .{keyword} line")
    if header is None:
        raise AsmError("empty program: expected a '.program NAME target=TARGET' line", line=1)
    return streams.program(header[0], header[1], symbols)


def parse_block(code: str, symbols: Sequence[Symbol], target: Target, *, name: str = "raw",
                max_cores: int | None = None) -> Program:
    """Read the instructions of a raw block (``pypto.inline_asm``): the grammar of
    ``parse`` without the ``.program`` and ``.tensor`` lines (``symbols`` are the tensors
    ``GM[NAME]`` may name). Instructions before any ``.core N`` line are core 0's; at
    most ``max_cores`` cores. Line numbers (errors, the program's ``lines``) count from
    the first line of ``code``.
    """
    streams = _Streams(symbols, memory_map(target))
    for lineno, line in enumerate(code.splitlines(), start=1):
        cursor = Cursor(line, lineno)
        if cursor.at_end():
            continue
        start = cursor.pos
        directive = cursor.match(_DIRECTIVE)
        if directive is None:
            if not streams.cores:
                streams.cores.append([])
                streams.lines.append([])
            _instruction_line(cursor, streams)
            continue
        if directive.group(1).lower() != "core":
            what = "bind tensors with inline_asm(code, NAME=tensor)" \
                if directive.group(1).lower() in ("tensor", "program") else "use .core N"
            cursor.fail(f"unexpected directive '.{directive.group(1)}' in a raw block: {what}",
                        start)
        found = cursor.match(_CORE) or cursor.fail("expected a core number: .core N")
        streams.open_core(cursor, found, max_cores)
        cursor.expect_end("the .core line")
    return streams.program(name, target.name, symbols)


def _instruction_line(cursor: Cursor, streams: _Streams) -> None:
    """A line of a core: ``[LABEL:] [INSTRUCTION]``."""
    streams.label(cursor)
    if not cursor.at_end():
        streams.instruction(cursor)


def _parse_tensor(cursor: Cursor, symbols: list[Symbol]) -> Symbol:
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
    (without one: by role); ``lineno`` goes into errors. A branch's label must be the
    printer's ``L<index>``.
    """
    memories = isa_view() if target is None else memory_map(target)
    cursor = Cursor(line, lineno)
    row, ref = parse_row(cursor, symbols, memories)
    if ref is None:
        return row
    found = re.fullmatch(r"L(\d+)", ref.name)
    if found is None:
        cursor.fail(f"unknown label {ref.name!r}: one instruction alone knows only the "
                    "printer's labels, L<index>", ref.column - 1)
    return _with_target(row, int(found.group(1)))
