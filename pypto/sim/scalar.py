"""The scalar unit: works out the instructions each core issues to its pipes.

Raw mode's scalar instructions (``MOV``, ``ADD``, ``SUB``, ``MUL`` on the int64 registers
R0..R31, and the branches ``BNE``, ``BLT``) compute addresses and loop counts; COPY, VLD
and VST may add a register to an address. No instruction moves data into an R
register, so what a core issues never depends on tensor data: ``issue`` runs the scalar
unit over a program once and returns the straight-line program of what each core
issued, in order. Every engine and the executor then run that program, so they agree
by construction on the control flow, and the timing engines still charge each scalar
instruction its issue slot (``[scalar] op_cycles`` of the target).

The issued program is a fixed point: its register-based addresses are resolved, and
each branch in it goes to the instruction issued after it (where it went), so issuing
it again changes nothing. A program that needs none of this (everything codegen
writes) is returned as it is, at the cost of a few vectorized comparisons.

A program whose cores issue more than ``budget`` instructions together (a loop that
never ends) is a ``SimError`` naming the instruction the scalar unit was at, never a
hang, and what is issued stays in memory that ``budget`` bounds.

Example:
    >>> from pypto.codegen.asm import parse
    >>> p = parse(".program p target=ascend910b\\n.core 0\\n  MOV R1, #3\\nloop:\\n"
    ...           "  SUB R1, R1, #1\\n  BNE R1, #0, loop\\n")
    >>> [len(stream) for stream in issue(p).cores]
    [7]
"""

from __future__ import annotations

import numpy as np

from pypto import native
from pypto.codegen.isa import BRANCHES, INSTR, REGISTER_BASED, SCALAR_ALU, SCALAR_REGISTERS, Op
from pypto.codegen.program import Program
from pypto.errors import SimError

#: Instructions a program's cores may issue together before the scalar unit calls a loop
#: runaway (about 40 MB of issued instructions).
DEFAULT_BUDGET = 1 << 18

_F = {name: i for i, name in enumerate(INSTR.names)}
_D, _A, _B = _F["d_addr"], _F["a_addr"], _F["b_addr"]
_INT64 = 1 << 64
_BRANCH = np.zeros(256, dtype=bool)
_BRANCH[[int(op) for op in BRANCHES]] = True
_BASED = np.zeros(256, dtype=bool)
_BASED[[int(op) for op in REGISTER_BASED]] = True
_BASED_U8, _BRANCH_U8 = _BASED.view(np.uint8), _BRANCH.view(np.uint8)  # for _scan.pyx


def needs_issue(program: Program) -> bool:
    """Whether ``program`` has a register-based address or a branch that does not go to
    the next instruction (otherwise ``issue`` would return it unchanged). Scanned by
    ``_scan.pyx`` when it is built and selected (``pypto.native``)."""
    scan = native.extension("pypto.sim._scan", stacklevel=2)
    if scan is not None:
        return bool(scan.needs_issue([np.ascontiguousarray(c) for c in program.cores],
                                     _BASED_U8, _BRANCH_U8))
    return needs_issue_reference(program)


def needs_issue_reference(program: Program) -> bool:
    """The specification of ``needs_issue``: NumPy over each core's fields."""
    for stream in program.cores:
        if not len(stream):
            continue
        ops = stream["op"]
        if (_BASED[ops] & ((stream["pipe2"] != 0) | (stream["event"] != 0))).any():
            return True
        branches = np.flatnonzero(_BRANCH[ops])
        if len(branches) and (stream["d_addr"][branches] != branches + 1).any():
            return True
    return False


def issue(program: Program, budget: int = DEFAULT_BUDGET) -> Program:
    """The straight-line program of what each core of ``program`` issues (see the
    module docstring); ``program`` itself when nothing is to be worked out.

    Raises:
        SimError: the cores issue more than ``budget`` instructions together, a branch
            leaves its stream, a scalar instruction names no register, or an address
            leaves the int64 range.
    """
    if not needs_issue(program):
        return program
    cores, lines = [], []
    left = budget
    for core, stream in enumerate(program.cores):
        rows, origin = _Core(program, core, left, budget).run(stream.tolist())
        left -= len(rows)
        cores.append(np.array(rows, dtype=INSTR) if rows else np.zeros(0, dtype=INSTR))
        source = program.lines[core] if program.lines is not None else None
        lines.append(tuple(source[i] for i in origin) if source is not None else ())
    return Program(program.name, program.target, program.symbols, tuple(cores),
                   lines=tuple(lines) if program.lines is not None else None)


class _Core:
    """One core's scalar unit: registers R0..R31 (int64, zero at launch)."""

    def __init__(self, program: Program, core: int, left: int, budget: int) -> None:
        self.program, self.core, self.left, self.budget = program, core, left, budget
        self.registers = [0] * SCALAR_REGISTERS
        self.pc = 0
        self.row: tuple = ()

    def fail(self, message: str) -> SimError:
        from pypto.codegen.asm import print_instruction

        try:
            text = print_instruction(self.row, self.program.symbols, self.program.target)
        except Exception:  # noqa: BLE001 - the message matters more than the listing
            text = "unprintable"
        return SimError(f"{self.program.where(self.core, self.pc)} ({text}): {message}")

    def run(self, rows: list[tuple]) -> tuple[list[tuple], list[int]]:
        """The rows this core issues and the index in ``rows`` of each."""
        out: list[tuple] = []
        origin: list[int] = []
        while self.pc < len(rows):
            self.row = row = rows[self.pc]
            if len(out) >= self.left:
                raise self.fail(f"the cores issued {self.budget:,} instructions without core "
                                f"{self.core} reaching the end of its stream: a loop that never "
                                "ends? (raise the instruction budget if it should run longer)")
            origin.append(self.pc)
            op = row[0]
            if op in SCALAR_ALU:
                self.registers[self.register(row[_D], "d")] = self.alu(Op(op), row)
                out.append(row)
                self.pc += 1
            elif op in BRANCHES:
                out.append(row[:_D] + (len(out) + 1,) + row[_D + 1:])
                self.pc = self.branch(Op(op), row, len(rows))
            elif op in REGISTER_BASED and (row[2] or row[3]):
                out.append(self.resolve(row))
                self.pc += 1
            else:
                out.append(row)
                self.pc += 1
        return out, origin

    def register(self, number: int, which: str) -> int:
        if not 0 <= number < SCALAR_REGISTERS:
            raise self.fail(f"operand {which} names register {number}: the scalar registers "
                            f"are R0..R{SCALAR_REGISTERS - 1}")
        return number

    def value(self, number: int, which: str) -> int:
        """Register ``number``'s value, or the immediate when it is -1."""
        if number != -1:
            return self.registers[self.register(number, which)]
        imm = self.row[_F["imm"]]
        if not (np.isfinite(imm) and imm == int(imm)):
            raise self.fail(f"the immediate {imm!r} is not an integer")
        return int(imm)

    def alu(self, op: Op, row: tuple) -> int:
        if op == Op.MOV:
            return self.value(row[_A], "a")
        a, b = self.registers[self.register(row[_A], "a")], self.value(row[_B], "b")
        result = a + b if op == Op.ADD else a - b if op == Op.SUB else a * b
        return (result + (1 << 63)) % _INT64 - (1 << 63)   # int64 wraps, as registers do

    def branch(self, op: Op, row: tuple, length: int) -> int:
        """The next instruction's index."""
        a, b = self.registers[self.register(row[_A], "a")], self.value(row[_B], "b")
        if not (a != b if op == Op.BNE else a < b):
            return self.pc + 1
        target = row[_D]
        if not 0 <= target <= length:
            raise self.fail(f"the branch goes to instruction {target}, outside the stream "
                            f"of {length}")
        return target

    def resolve(self, row: tuple) -> tuple:
        """``row`` with its base registers added to its addresses (bases cleared)."""
        fields = list(row)
        for base, addr, which in ((row[2], _D, "d"), (row[3], _A, "a")):
            if not base:
                continue
            address = fields[addr] + self.registers[self.register(base - 1, f"{which}'s base")]
            if not -(1 << 63) <= address < 1 << 63:
                raise self.fail(f"operand {which}'s address {address} leaves the int64 range")
            fields[addr] = address
        fields[2] = fields[3] = 0
        return tuple(fields)
