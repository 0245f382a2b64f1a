"""The functional executor: runs a ``Program`` numerically, one core after another, in
program order, on byte-addressed on-chip memories with capacity, bounds and alignment
checks. (Timing is the timing engine's job; here only the numbers and the rules.)
The scalar unit (``pypto.sim.scalar``) first works out what each core issues: raw
mode's scalar instructions are done by then, and VLD and VST are copies.
``SYNC_ALL`` splits the streams into phases: every core runs its first phase, then
every core its second, and so on, which is the order the cross-core barrier enforces.

Uninitialised on-chip memory holds NaN-like bytes (0xFF), so a program that reads what
it never wrote produces visibly wrong results instead of lucky zeros.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from pypto.codegen.isa import (
    BINARY,
    COMPARE,
    COPIES,
    F_ACCUMULATE,
    F_ATOMIC,
    F_RELU,
    F_TRANSPOSE,
    INSTR,
    REDUCE,
    ROLE,
    SCALAR_IMM,
    SCALAR_OPS,
    SELECT,
    VECTOR,
    Mem,
    Op,
    Pipe,
)
from pypto.codegen.memories import memory_map
from pypto.codegen.program import Program
from pypto.errors import SimError
from pypto.ir import numerics
from pypto.ir.dtypes import BY_CODE
from pypto.targets import Target

_F = {name: i for i, name in enumerate(INSTR.names)}
_NP = {code: dt.np for code, dt in BY_CODE.items()}
_BINARY = {Op.VADD: "add", Op.VSUB: "sub", Op.VMUL: "mul", Op.VDIV: "div", Op.VMAX: "maximum",
           Op.VMIN: "minimum"}
_COMPARE = {Op.VCMPEQ: "equal", Op.VCMPNE: "not_equal", Op.VCMPLT: "less",
            Op.VCMPLE: "less_equal", Op.VCMPGT: "greater", Op.VCMPGE: "greater_equal"}
_SCALAR = {Op.VADDS: "add_scalar", Op.VMULS: "mul_scalar", Op.VMAXS: "max_scalar",
           Op.VMINS: "min_scalar"}
_UNARY = {Op.VCOPY: "copy", Op.VCAST: "cast", Op.VRELU: "relu", Op.VEXP: "exp", Op.VLN: "log",
          Op.VSQRT: "sqrt", Op.VRSQRT: "rsqrt", Op.VRECIP: "reciprocal", Op.VGELU: "gelu",
          Op.VSIGMOID: "sigmoid", Op.VTANH: "tanh", Op.VABS: "abs", Op.VNEG: "neg"}
_REDUCE = {Op.VREDSUM: "sum", Op.VREDMAX: "max", Op.VREDMIN: "min"}


class _Core:
    def __init__(self, target: Target, gm: list[np.ndarray], program: Program, index: int):
        self.target, self.gm, self.program, self.index = target, gm, program, index
        self.mem: dict[int, np.ndarray] = {}
        self.align: dict[int, int] = {}
        self.memories = memory_map(target)
        for role in ROLE.values():
            if role == "global":
                continue
            m, code = target.role(role), self.memories.roles[role]
            if code not in self.mem:  # roles that share a memory share its bytes
                self.mem[code] = np.full(m.capacity, 0xFF, dtype=np.uint8)
            self.align[code] = m.alignment
        self.flags: dict[tuple[int, int, int], int] = defaultdict(int)
        self.pc = 0
        self.row: tuple = ()

    def fail(self, message: str) -> SimError:
        from pypto.codegen.asm import print_instruction

        try:
            text = print_instruction(self.row, self.program.symbols, self.target)
        except Exception:  # noqa: BLE001 - the message matters more than the listing
            text = repr(self.row)
        return SimError(f"{self.program.where(self.index, self.pc)} ({text.strip()}): {message}")

    def view(self, prefix: str, code: int, aligned: bool = False) -> np.ndarray:
        r = self.row
        mem = r[_F[prefix + "_mem"]]
        addr, rows, cols = r[_F[prefix + "_addr"]], r[_F[prefix + "_rows"]], r[_F[prefix + "_cols"]]
        rs, cs = r[_F[prefix + "_rs"]], r[_F[prefix + "_cs"]]
        dt = _NP[code]
        isz = dt.itemsize
        if rows <= 0 or cols <= 0:
            raise self.fail(f"operand {prefix} has an empty shape {rows}x{cols}")
        if mem == Mem.GM:
            arr = self.gm[r[_F["gm"]]]
            if arr.dtype != dt:  # bounds below count elements: a wider view would overrun
                sym = self.program.symbols[r[_F["gm"]]]
                raise self.fail(f"operand {prefix} accesses GM tensor {sym.name} "
                                f"({sym.dtype.name}) as {dt}")
            lo = addr + min(0, (rows - 1) * rs) + min(0, (cols - 1) * cs)
            hi = addr + max(0, (rows - 1) * rs) + max(0, (cols - 1) * cs)
            if lo < 0 or hi >= arr.size:
                sym = self.program.symbols[r[_F["gm"]]]
                raise self.fail(f"GM access to {sym.name} elements [{lo}, {hi}] is outside "
                                f"its {arr.size} elements")
            return as_strided(arr[addr:], (rows, cols), _strides(rows, cols, rs, cs, isz))
        buf, name = self.mem.get(mem), self.memories.name(mem)
        if buf is None:
            raise self.fail(f"{name} does not exist on {self.target.name}")
        if rs < 0 or cs < 0:
            raise self.fail("on-chip strides must be non-negative")
        span = ((rows - 1) * rs + (cols - 1) * cs + 1) * isz
        if addr < 0 or addr + span > buf.size:
            raise self.fail(f"{name} access [{addr:#x}, {addr + span:#x}) exceeds its "
                            f"capacity of {buf.size} bytes")
        if addr % isz or (aligned and addr % self.align[mem]):
            need = self.align[mem] if aligned else isz
            raise self.fail(f"{name} address {addr:#x} is not {need}-byte aligned")
        return as_strided(buf[addr:addr + span].view(dt), (rows, cols), _strides(rows, cols,
                                                                                 rs, cs, isz))

    def bcast(self, src: np.ndarray, shape: tuple[int, int], name: str) -> np.ndarray:
        try:
            return np.broadcast_to(src, shape)
        except ValueError:
            raise self.fail(f"operand {name} of shape {src.shape} does not broadcast to "
                            f"{shape}") from None

    def run(self, rows: list[tuple], start: int) -> None:
        for self.pc, self.row in enumerate(rows, start):
            self.step(Op(self.row[0]))

    def step(self, op: Op) -> None:
        r = self.row
        dcode, scode, flags = r[_F["dtype"]], r[_F["sdtype"]], r[_F["flags"]]
        if op in COPIES:
            strict = op != Op.COPY  # a register load or store aligns as vector operands do
            src = self.view("a", scode, aligned=strict)
            dst = self.view("d", dcode, aligned=strict)
            if flags & F_TRANSPOSE:
                src = src.T
            if src.shape != dst.shape:
                raise self.fail(f"copy shapes differ: {src.shape} -> {dst.shape}")
            with np.errstate(all="ignore"):
                if flags & F_RELU:  # FIX's in-flight ReLU, after the conversion
                    value = numerics.apply_unary("relu", src.astype(dst.dtype), dst.dtype)
                else:
                    value = src.astype(dst.dtype)
                if flags & F_ATOMIC:  # converted first, then added in GM (as the L2 does)
                    if r[_F["d_mem"]] != Mem.GM:
                        raise self.fail("an atomic copy must write to GM")
                    value = numerics.apply_binary("add", dst.copy(), value, dst.dtype)
                dst[...] = value
        elif op == Op.MMAD:
            a = self.view("a", scode, aligned=True)
            b = self.view("b", scode, aligned=True)
            d = self.view("d", dcode, aligned=True)
            if a.shape[1] != b.shape[0] or d.shape != (a.shape[0], b.shape[1]):
                raise self.fail(f"MMAD shapes do not fit: {a.shape} @ {b.shape} -> {d.shape}")
            prod = numerics.apply_matmul(a, b)
            with np.errstate(all="ignore"):
                if flags & F_ACCUMULATE:
                    d[...] = (d.astype(prod.dtype) + prod).astype(d.dtype)
                else:
                    d[...] = prod.astype(d.dtype)
        elif op in VECTOR:
            self.vector(op, dcode, scode)
        elif op == Op.SET_FLAG:
            self.flag(r[_F["pipe"]], r[_F["pipe2"]], r[_F["event"]], +1)
        elif op == Op.WAIT_FLAG:
            self.flag(r[_F["pipe2"]], r[_F["pipe"]], r[_F["event"]], -1)
        elif op in (Op.BARRIER, Op.SYNC_ALL, Op.NOP) or op in SCALAR_OPS:
            pass    # the scalar unit has done its instructions (``pypto.sim.scalar``)
        else:  # pragma: no cover - every Op is handled above
            raise self.fail(f"no rule for {op.name}")

    def vector(self, op: Op, dcode: int, scode: int) -> None:
        d = self.view("d", dcode, aligned=True)
        out_dt = d.dtype
        if op == Op.VDUP:
            d[...] = self.row[_F["imm"]]
            return
        a = self.view("a", scode, aligned=True)
        if op in REDUCE:
            if d.shape[1] != 1:
                raise self.fail(f"a reduction writes one column, got {d.shape}")
            a = self.bcast(a, (d.shape[0], a.shape[1]), "a")
            d[...] = numerics.apply_reduce(_REDUCE[op], a, 1, out_dt)
            return
        a = self.bcast(a, d.shape, "a")
        if op in BINARY or op in COMPARE or op in SELECT:
            b = self.bcast(self.view("b", scode, aligned=True), d.shape, "b")
            if op in COMPARE:
                d[...] = numerics.apply_compare(_COMPARE[op], a, b)
            elif op in SELECT:  # d holds the condition on entry
                d[...] = numerics.apply_where(d.copy(), a, b, out_dt)
            else:
                d[...] = numerics.apply_binary(_BINARY[op], a, b, out_dt)
        elif op in SCALAR_IMM:
            d[...] = numerics.apply_scalar(_SCALAR[op], a, self.row[_F["imm"]], out_dt)
        else:
            d[...] = numerics.apply_unary(_UNARY[op], a, out_dt)

    def flag(self, src: int, dst: int, event: int, delta: int) -> None:
        if not 0 <= event < self.target.event_ids:
            raise self.fail(f"event id {event} is outside 0..{self.target.event_ids - 1}")
        key = (src, dst, event)
        if delta < 0 and self.flags[key] == 0:
            raise self.fail(f"deadlock: WAIT_FLAG {Pipe(src).name}->{Pipe(dst).name} event "
                            f"{event} waits for a SET_FLAG that was never issued before it")
        self.flags[key] += delta


def _strides(rows: int, cols: int, rs: int, cs: int, isz: int) -> tuple[int, int]:
    """Byte strides of a ``rows x cols`` view; a stride along one element is never taken,
    and may be anything (a 1x1 operand with stride 2**62 is in bounds; in bytes it would
    not fit ``as_strided``'s C long)."""
    return (rs * isz if rows > 1 else 0, cs * isz if cols > 1 else 0)


def execute(program: Program, target: Target, gm: list[np.ndarray]) -> None:
    """Run ``program``: ``gm[i]`` is the flat array of ``program.symbols[i]`` (updated)."""
    from pypto.sim.check import check_work
    from pypto.sim.scalar import issue

    program = issue(program)
    check_work(program, target)     # before any loop: a stride-0 operand may repeat forever
    if len(gm) != len(program.symbols):
        raise SimError(f"{program.name} needs {len(program.symbols)} GM tensors, got {len(gm)}")
    for i, (arr, sym) in enumerate(zip(gm, program.symbols)):
        if arr.ndim != 1 or arr.size != sym.size or arr.dtype != sym.dtype.np:
            raise SimError(f"GM tensor {i} ({sym.name}) must be a flat {sym.dtype.name} array of "
                           f"{sym.size} elements")
    phases = [_phases(stream.tolist()) for stream in program.cores]
    counts = {len(p) for p in phases}
    if len(counts) > 1:
        per_core = ", ".join(f"core {i}: {len(p) - 1}" for i, p in enumerate(phases))
        raise SimError(f"{program.name}: the cores execute different numbers of SYNC_ALL "
                       f"({per_core}); every core must meet at each SYNC_ALL")
    cores = [_Core(target, gm, program, index) for index in range(len(program.cores))]
    # Many small matmuls: with OpenBLAS's threads fighting over the machine's cores a
    # 1024^3 GEMM executes 7x slower than on one thread.
    with _blas_controller().limit(limits=1, user_api="blas"):
        for phase in range(counts.pop() if counts else 0):
            for core, core_phases in zip(cores, phases):
                start, rows = core_phases[phase]
                core.run(rows, start)


@functools.cache
def _blas_controller() -> Any:
    """threadpoolctl's view of the loaded BLAS libraries (found once per process)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _phases(rows: list[tuple]) -> list[tuple[int, list[tuple]]]:
    """(first index, rows) of each phase of a stream; a SYNC_ALL ends its phase."""
    out, start = [], 0
    for i, row in enumerate(rows):
        if row[0] == Op.SYNC_ALL:
            out.append((start, rows[start:i + 1]))
            start = i + 1
    out.append((start, rows[start:]))
    return out
