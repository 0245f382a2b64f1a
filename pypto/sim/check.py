"""Static checks of a program before timing it: every op code is an instruction, every
operand has a shape, every GM operand has its tensor's dtype (bounds are in elements, so
a wider dtype would reach past the tensor's bytes), every GM access stays inside its
tensor, every on-chip access inside its memory (capacity and alignment), only copies
into GM are atomic, every core executes equally many ``SYNC_ALL`` instructions, and the
program's work stays within a budget (``check_work``). The compiled engine clears a good
program in one pass over its records; otherwise NumPy, vectorized over each core's
arrays, finds the first problem: a ``SimError`` naming the core, the instruction and
what to fix."""

from __future__ import annotations

import functools

import numpy as np

from pypto import native
from pypto.codegen.isa import F_ATOMIC, OPERANDS, ROLE, Mem, Op
from pypto.codegen.memories import memory_map
from pypto.codegen.program import Program
from pypto.errors import SimError
from pypto.ir.dtypes import BY_CODE
from pypto.targets import Target

_ITEMSIZE = np.zeros(256, dtype=np.int64)
for _code, _dt in BY_CODE.items():
    _ITEMSIZE[_code] = _dt.itemsize
_KNOWN_OP = np.zeros(256, dtype=bool)
_KNOWN_OP[[int(_op) for _op in Op]] = True
_CUBE_OR_VECTOR = np.zeros(256, dtype=bool)
for _op in Op:
    _CUBE_OR_VECTOR[int(_op)] = _op == Op.MMAD or int(_op) >= int(Op.VADD)


_STRICT = _CUBE_OR_VECTOR.astype(np.uint8)
#: the work budget of a program: element accesses (rows x cols of every operand of every
#: instruction), which bound what the timing engines walk (pieces and L2 lines) and what
#: the executor computes. The largest programs lowering builds stay far below it (a
#: 8192^3 float16 GEMM on ascend910b: 4.5e10, 3.4 million instructions).
MAX_PROGRAM_WORK = 2**40


@functools.lru_cache(maxsize=16)
def _memories(target: Target) -> tuple[np.ndarray, np.ndarray]:
    """(capacity, alignment) of each on-chip memory code on ``target`` (capacity 0: the
    target does not have it)."""
    capacity = np.zeros(len(Mem), dtype=np.int64)
    alignment = np.ones(len(Mem), dtype=np.int64)
    codes = memory_map(target).roles
    for role in ROLE.values():
        if role == "global":
            continue
        m = target.role(role)
        capacity[codes[role]], alignment[codes[role]] = m.capacity, m.alignment
    capacity.flags.writeable = alignment.flags.writeable = False
    return capacity, alignment


def check_program(program: Program, target: Target) -> None:
    """Raise ``SimError`` naming the first problem of ``program`` on ``target`` (see the
    module docstring), or return. The compiled engine, when built, clears a good
    program in one pass; NumPy then finds what is wrong with a bad one."""
    capacity, alignment = _memories(target)
    check_opcodes(program, target)
    check_extents(program, target)
    sizes = np.array([s.size for s in program.symbols] or [0], dtype=np.int64)
    check_gm_dtypes(program, target)
    if not _passes_compiled_check(program, capacity, alignment, sizes):
        _check_with_numpy(program, target, capacity, alignment, sizes)
    check_work(program, target)


def check_opcodes(program: Program, target: Target) -> None:
    """Raise ``SimError`` at the first instruction whose op code is no PTO instruction
    (a program built in code, not parsed, can hold any byte there)."""
    for core, stream in enumerate(program.cores):
        unknown = ~_KNOWN_OP[stream["op"]]
        if unknown.any():
            i = int(np.flatnonzero(unknown)[0])
            raise SimError(f"{program.where(core, i)}: op code {int(stream['op'][i])} is no "
                           f"PTO instruction (known: {', '.join(op.name for op in Op)})")


def check_work(program: Program, target: Target) -> None:
    """Raise ``SimError`` unless ``program``'s work is bounded: no operand walks more bytes
    than the largest on-chip memory of ``target`` holds (a stride of 0 lets an operand
    walk one row 2^31 times inside its memory: the engines' loops would run for hours),
    and the program makes at most ``MAX_PROGRAM_WORK`` element accesses. Checked before
    any engine or the executor loops over the program."""
    capacity, _ = _memories(target)
    largest = int(capacity.max())
    total = 0
    for core, stream in enumerate(program.cores):
        if not len(stream):
            continue
        for prefix in OPERANDS:
            used = stream[f"{prefix}_mem"] != 0
            if not used.any():
                continue
            rows = np.maximum(stream[f"{prefix}_rows"].astype(np.int64), 0)
            cols = np.maximum(stream[f"{prefix}_cols"].astype(np.int64), 0)
            elements = np.where(used, rows * cols, 0)     # int32 x int32: no overflow
            code = stream["dtype"] if prefix == "d" else stream["sdtype"]
            walked = elements * np.maximum(_ITEMSIZE[code], 1)
            over = walked > largest
            if over.any():
                i = int(np.flatnonzero(over)[0])
                _fail_if(program, target, core, over,
                         f"operand {prefix} walks {int(rows[i])}x{int(cols[i])} elements "
                         f"({int(walked[i]):,} bytes), more than the largest on-chip memory "
                         f"of {target.name} holds ({largest:,} bytes): an instruction "
                         "moves at most what fits on chip (a stride of 0 repeats a row); "
                         "split it into instructions of fewer rows")
            total += int(elements.sum())
    if total > MAX_PROGRAM_WORK:
        raise SimError(f"{program.name}: {total:,} element accesses, over the work budget "
                       f"of {MAX_PROGRAM_WORK:,} per program (rows x cols of every operand "
                       "of every instruction): split the work into smaller programs")


def _check_with_numpy(program: Program, target: Target, capacity: np.ndarray,
                      alignment: np.ndarray, sizes: np.ndarray) -> None:
    for core, stream in enumerate(program.cores):
        if not len(stream):
            continue
        atomic = (stream["flags"] & F_ATOMIC) != 0
        if atomic.any():
            _fail_if(program, target, core, atomic & ((stream["op"] != Op.COPY)
                                              | (stream["d_mem"] != Mem.GM)),
                     "an atomic (.ATOMIC) instruction must be a COPY into GM: only GM adds "
                     "into what it holds")
        for prefix in OPERANDS:
            mem = stream[f"{prefix}_mem"].astype(np.int64)
            used = mem != 0
            if not used.any():
                continue
            rows = stream[f"{prefix}_rows"].astype(np.int64)
            cols = stream[f"{prefix}_cols"].astype(np.int64)
            rs, cs = stream[f"{prefix}_rs"], stream[f"{prefix}_cs"]
            addr = stream[f"{prefix}_addr"]
            code = stream["dtype"] if prefix == "d" else stream["sdtype"]
            isz = _ITEMSIZE[code]
            _fail_if(program, target, core, used & ((rows <= 0) | (cols <= 0)),
                     f"operand {prefix} has an empty shape")
            gm = used & (mem == Mem.GM)
            if gm.any():
                sym = stream["gm"].astype(np.int64)
                _fail_if(program, target, core, gm & ((sym < 0) | (sym >= len(program.symbols))),
                         f"operand {prefix} names no declared GM tensor")
                span_r, span_c = (rows - 1) * rs, (cols - 1) * cs
                lo = addr + np.minimum(span_r, 0) + np.minimum(span_c, 0)
                hi = addr + np.maximum(span_r, 0) + np.maximum(span_c, 0)
                size = sizes[np.clip(sym, 0, len(sizes) - 1)]
                _fail_if(program, target, core, gm & ((lo < 0) | (hi >= size)),
                         f"operand {prefix} reaches outside its GM tensor")
            chip = used & (mem != Mem.GM)
            if chip.any():
                # a code beyond Mem is no memory at all (capacity 0), not the last one
                room = np.where(mem < len(Mem), capacity[np.clip(mem, 0, len(Mem) - 1)], 0)
                _fail_if(program, target, core, chip & (room == 0),
                         f"operand {prefix} names a memory {target.name} does not have")
                _fail_if(program, target, core, chip & ((rs < 0) | (cs < 0) | (addr < 0)),
                         f"operand {prefix} has a negative on-chip address or stride")
                end = addr + ((rows - 1) * rs + (cols - 1) * cs + 1) * isz
                _fail_if(program, target, core, chip & (end > room),
                         f"operand {prefix} runs past the end of its memory")
                align = alignment[np.clip(mem, 0, len(Mem) - 1)]
                strict = chip & _CUBE_OR_VECTOR[stream["op"]]
                _fail_if(program, target, core, strict & (addr % align != 0),
                         f"operand {prefix} is not aligned to its memory's alignment")
    check_sync_all(program)


def _passes_compiled_check(program: Program, capacity: np.ndarray, alignment: np.ndarray,
                           sizes: np.ndarray) -> bool:
    """The compiled engine's verdict (False also when the Python specification is to
    run: ``PYPTO_IMPL=python`` or the engine is not built)."""
    engine = native.extension("pypto.sim._engine", stacklevel=3)
    if engine is None:
        return False
    cores = [np.ascontiguousarray(stream) for stream in program.cores]
    return bool(engine.check(cores, capacity, alignment, sizes, len(program.symbols),
                             _ITEMSIZE, _STRICT))


#: No memory holds this many bytes. A tensor or an operand that reaches further is
#: refused first, so the int64 arithmetic of the checks below (and of the compiled
#: engine's pass) never wraps around: ``rows x stride`` past 2**63 once looked in bounds.
MAX_BYTES = float(1 << 62)


def check_extents(program: Program, target: Target) -> None:
    """Every tensor, and every operand's address, strides and extent, stay below
    ``MAX_BYTES`` (computed in float64, which cannot wrap); at most as many cores as the
    target has."""
    most = max(target.cube_cores, target.vector_cores)
    if len(program.cores) > most:
        raise SimError(f"{program.name}: {len(program.cores)} cores, but {target.name} has "
                       f"{most}")
    for s in program.symbols:
        if s.size * s.dtype.itemsize >= MAX_BYTES:
            raise SimError(f"{program.name}: tensor {s.name} of {s.size} elements takes more "
                           "bytes than any memory holds (2**62)")
    for core, stream in enumerate(program.cores):
        if not len(stream):
            continue
        for prefix in OPERANDS:
            code = stream["dtype"] if prefix == "d" else stream["sdtype"]
            isz = _ITEMSIZE[code].astype(np.float64)
            rs = np.abs(stream[f"{prefix}_rs"].astype(np.float64)) * isz
            cs = np.abs(stream[f"{prefix}_cs"].astype(np.float64)) * isz
            rows = np.maximum(stream[f"{prefix}_rows"].astype(np.float64) - 1, 0)
            cols = np.maximum(stream[f"{prefix}_cols"].astype(np.float64) - 1, 0)
            reach = np.abs(stream[f"{prefix}_addr"].astype(np.float64)) * isz \
                + rows * rs + cols * cs + isz
            far = (stream[f"{prefix}_mem"] != 0) & (
                (reach >= MAX_BYTES) | (rs >= MAX_BYTES) | (cs >= MAX_BYTES))
            _fail_if(program, target, core, far,
                     f"operand {prefix} reaches 2**62 bytes or more (its address, a stride, "
                     "or rows x stride): more than any memory holds")


def check_gm_dtypes(program: Program, target: Target) -> None:
    """Every GM operand's element type is its tensor's: GM bounds count elements, so a
    ``COPY.F32`` of an ``int8`` tensor would move four times the tensor's bytes. A
    program ``_scan.pyx`` clears (when built and selected) is not scanned again."""
    codes = np.array([s.dtype.code for s in program.symbols] or [-1], dtype=np.int64)
    scan = native.extension("pypto.sim._scan", stacklevel=2)
    if scan is not None and scan.gm_dtypes_match(
            [np.ascontiguousarray(c) for c in program.cores], codes):
        return
    for core, stream in enumerate(program.cores):
        if not len(stream):
            continue
        sym = np.clip(stream["gm"].astype(np.int64), 0, len(codes) - 1)
        for prefix in OPERANDS:
            gm = stream[f"{prefix}_mem"] == Mem.GM
            if not gm.any():
                continue
            code = (stream["dtype"] if prefix == "d" else stream["sdtype"]).astype(np.int64)
            bad = gm & (code != codes[sym])
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                if not program.symbols:
                    _fail_if(program, target, core, bad,
                             f"operand {prefix} reads GM symbol {int(stream['gm'][i])}, but "
                             "the program declares no GM tensor: give the Program the "
                             "symbols of its inputs and outputs")
                tensor = program.symbols[int(sym[i])]
                given = BY_CODE.get(int(code[i]))
                _fail_if(program, target, core, bad,
                         f"operand {prefix} reads GM tensor {tensor.name} as "
                         f"{given.name if given else f'dtype code {int(code[i])}'}, but "
                         f"{tensor.name} is {tensor.dtype.name}: give the instruction "
                         f"the tensor's dtype (a conversion happens on chip)")


def check_sync_all(program: Program) -> None:
    """Every core executes equally many ``SYNC_ALL`` instructions (each is a meeting of
    all the cores)."""
    counts = [int(np.count_nonzero(stream["op"] == Op.SYNC_ALL)) for stream in program.cores]
    for core, count in enumerate(counts):
        if count != counts[0]:
            raise SimError(f"{program.name}: core {core} has {count} SYNC_ALL"
                           f"{'' if count == 1 else 's'} but core 0 has {counts[0]}: every core "
                           "must meet at each SYNC_ALL")


def _fail_if(program: Program, target: Target, core: int, bad: np.ndarray,
             message: str) -> None:
    if not bad.any():
        return
    from pypto.codegen.asm import print_instruction

    i = int(np.flatnonzero(bad)[0])
    try:
        text = print_instruction(program.cores[core][i], program.symbols, target).strip()
    except Exception:  # noqa: BLE001 - the message matters more than the listing
        text = "unprintable"
    raise SimError(f"{program.where(core, i)} ({text}): {message}")
