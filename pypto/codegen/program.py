"""``Program``: per-core PTO instruction streams plus the GM symbol table."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MethodType, ModuleType

import numpy as np

from pypto import native
from pypto.codegen.isa import COPIES, INSTR, OPERANDS, SCALAR_OPS, Mem, Op, Pipe
from pypto.codegen.memories import MemoryMap, isa_view, memory_map
from pypto.ir.dtypes import DType
from pypto.targets import Target


def pipe_of(op: Op, src: Mem = Mem.NONE, dst: Mem = Mem.NONE,
            memories: MemoryMap | None = None) -> Pipe:
    """The pipe an instruction runs on: a COPY's (VLD's, VST's) is that of the data path
    from ``src`` to ``dst`` on the target of ``memories`` (by default ``isa_view()``);
    for SET/WAIT the pipe is explicit.

    Raises:
        ValueError: a COPY between memories with no data path.
    """
    if op in COPIES:
        return (memories or isa_view()).copy_pipe(src, dst)
    if op == Op.MMAD:
        return Pipe.CUBE
    if op in (Op.BARRIER, Op.SYNC_ALL, Op.NOP) or op in SCALAR_OPS:
        return Pipe.SCALAR
    return Pipe.VEC


@dataclass(frozen=True)
class Symbol:
    """A GM tensor a program reads or writes: ``role`` is ``in``, ``out`` or ``tmp``."""

    name: str
    dtype: DType
    shape: tuple[int, ...]
    role: str

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True, eq=False)
class Program:
    """Instruction streams, one structured array (dtype ``INSTR``) per core.

    ``lines``, when known (a parsed text, a raw block), gives the source line of each
    instruction, per core: messages about an instruction then name its line. It is not
    part of what the program is (equality ignores it).
    """

    name: str
    target: str
    symbols: tuple[Symbol, ...]
    cores: tuple[np.ndarray, ...]
    lines: tuple[tuple[int, ...], ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        for stream in self.cores:
            if stream.dtype != INSTR:
                raise TypeError("Program cores must be INSTR arrays")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Program):
            return NotImplemented
        return (self.name, self.target, self.symbols) == (other.name, other.target, other.symbols) \
            and len(self.cores) == len(other.cores) \
            and all(np.array_equal(a, b) for a, b in zip(self.cores, other.cores))

    __hash__ = None  # type: ignore[assignment]

    @property
    def num_instructions(self) -> int:
        return sum(len(c) for c in self.cores)

    def instruction_name(self, core: int, index: int) -> str:
        """``instruction 5`` or, when the source lines are known, ``line 12``."""
        if self.lines is not None and core < len(self.lines) and index < len(self.lines[core]):
            return f"line {self.lines[core][index]}"
        return f"instruction {index}"

    def where(self, core: int, index: int) -> str:
        """``p, core 0, instruction 5`` (or ``line 12``): an instruction, for messages."""
        return f"{self.name}, core {core}, {self.instruction_name(core, index)}"

    def asm(self, target: Target | None = None) -> str:
        """The program as PTO assembly text (``pypto.codegen.asm.parse`` reads it back),
        memories named as ``target`` (by default the packaged target ``self.target``)
        names them."""
        from pypto.codegen.asm import print_program

        return print_program(self, target)


@dataclass
class Operand:
    """One memory operand while building (see ``isa`` for the meaning of the fields)."""

    mem: Mem
    addr: int
    rows: int
    cols: int
    rs: int
    cs: int = 1
    gm: int = -1


@dataclass
class StreamBuilder:
    """Collects one core's instructions as tuples in ``INSTR`` field order (``rows``),
    then packs them into an array. Instructions that compiled emitters (``_matmul.pyx``)
    wrote as ``INSTR`` records already join with ``extend``.

    A COPY runs on the pipe of ``target``'s data path between its memories; a builder
    made without a target takes ``memories.isa_view()``'s, which is the packaged
    targets' (the emitters should pass their target).

    ``emit`` runs once per generated instruction, so a builder made while the compiled
    implementations are selected (``pypto.native``) emits with the compiled ``emit`` of
    ``_sync.pyx``; this one stays as the specification (``emit_reference``). ``array``
    packs with the compiled packer then too.
    """

    target: Target | None = None
    rows: list[tuple] = field(default_factory=list)
    packed: list[np.ndarray] = field(default_factory=list)  # what comes before ``rows``
    packed_count: int = 0
    memories: MemoryMap = field(init=False, repr=False, compare=False)
    _copy_table: bytes = field(init=False, repr=False, compare=False)  # for compiled emit
    _compiled: ModuleType | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.memories = isa_view() if self.target is None else memory_map(self.target)
        self._copy_table = self.memories.copy_table
        self._compiled = native.extension("pypto.codegen._sync", stacklevel=3)
        if self._compiled is not None:
            setattr(self, "emit", MethodType(self._compiled.emit, self))  # noqa: B010

    def copy_pipe(self, src: Mem, dst: Mem) -> Pipe:
        """The pipe of a COPY from ``src`` to ``dst`` (``ValueError`` if no path)."""
        return self.memories.copy_pipe(src, dst)

    def emit(self, op: Op, *operands: Operand, dtype: DType | None = None,
             sdtype: DType | None = None, flags: int = 0, imm: float = 0.0,
             pipe: Pipe | None = None, pipe2: Pipe = Pipe.SCALAR, event: int = 0) -> int:
        """Append one instruction: ``op`` on operands ``d, a, b`` (in that order; more
        are ignored); the last GM operand gives ``gm``; ``sdtype`` defaults to
        ``dtype``; ``pipe`` defaults to what ``pipe_of`` gives. Returns its index in
        the stream."""
        gm = -1
        packed: list = []
        for i in range(len(OPERANDS)):
            if i < len(operands):
                o = operands[i]
                if o.mem == Mem.GM:
                    gm = o.gm
                packed += [int(o.mem), o.addr, o.rows, o.cols, o.rs, o.cs]
            else:
                packed += [0, 0, 0, 0, 0, 0]
        if pipe is None:
            src = operands[1].mem if len(operands) > 1 else Mem.NONE
            dst = operands[0].mem if operands else Mem.NONE
            pipe = pipe_of(op, src, dst, self.memories)
        dcode = dtype.code if dtype is not None else 0
        scode = sdtype.code if sdtype is not None else dcode
        self.rows.append((int(op), int(pipe), int(pipe2), event, dcode, scode, flags, gm,
                          float(imm), *packed))
        return self.packed_count + len(self.rows) - 1

    def extend(self, block: np.ndarray) -> None:
        """Append instructions already packed (an ``INSTR`` array)."""
        if self.rows:
            self.packed.append(self._pack_rows())
            self.packed_count += len(self.rows)
            self.rows = []
        self.packed.append(block)
        self.packed_count += len(block)

    def array(self) -> np.ndarray:
        """The stream as one ``INSTR`` array."""
        blocks = self.packed + ([self._pack_rows()] if self.rows else [])
        if not blocks:
            return np.zeros(0, dtype=INSTR)
        return blocks[0] if len(blocks) == 1 else concatenate(blocks)

    def take(self) -> np.ndarray:
        """The stream so far as one ``INSTR`` array, leaving the builder empty."""
        out = self.array()
        self.rows, self.packed, self.packed_count = [], [], 0
        return out

    def _pack_rows(self) -> np.ndarray:
        packed = self._compiled.pack(self.rows) if self._compiled is not None else None
        return packed if packed is not None else np.array(self.rows, dtype=INSTR)


def concatenate(blocks: list[np.ndarray]) -> np.ndarray:
    """``np.concatenate(blocks)`` of ``INSTR`` arrays, copied as bytes: NumPy copies
    packed records field by field, about 14 times slower (26 ms for the 48 streams of a
    split 4096x4096 softmax)."""
    out = np.empty(sum(len(b) for b in blocks), dtype=INSTR)
    raw = out.view(np.uint8)
    at = 0
    for block in blocks:
        raw[at:at + block.nbytes] = np.ascontiguousarray(block, dtype=INSTR).view(np.uint8)
        at += block.nbytes
    return out


#: The specification of the compiled ``emit`` (``_sync.pyx``).
emit_reference = StreamBuilder.emit
