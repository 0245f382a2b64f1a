"""Raw blocks (``pypto.inline_asm``) in a compiled kernel: read by the PTO assembly
parser for the kernel's target, issued by the scalar unit, checked, and never tuned.

``lower_raw`` turns a block into the program its cores issue (loops unrolled,
register-based addresses resolved: ``pypto.sim.scalar``), so a block that cannot run
fails when the kernel compiles, naming the line of the code string: a bad line
(``AsmError``, with the column and what was expected), a loop that exceeds the block's
instruction budget, an access outside a tensor or a memory, a misaligned address
(``SimError``). A block's GM inputs are read-only. Races between its pipes are the
author's to avoid: each is a ``HazardWarning`` naming the lines, not an error.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pypto.codegen.isa import Mem
from pypto.errors import AsmError, HazardWarning
from pypto.ir.dtypes import BY_NAME
from pypto.ir.graph import Node
from pypto.ir.raw import RawSpec
from pypto.ir.workload import Workload

#: ``Compiled.sources`` of a raw block: its code is the schedule.
RAW_SOURCE = "raw"

if TYPE_CHECKING:
    from pypto.codegen.program import Program, Symbol
    from pypto.targets import Target

Inputs = tuple[tuple[tuple[int, ...], str], ...]   # (shape, dtype name) per binding


def raw_spec(wl: Workload) -> RawSpec:
    """The block of raw workload ``wl``."""
    return RawSpec.of(next(n for n in wl.nodes if n.op == "inline_asm"))


def lower_workload(wl: Workload, target: Target, name: str) -> Program:
    """The issued program of raw workload ``wl`` on ``target``."""
    return lower_raw(raw_spec(wl), tuple((s.shape, s.dtype) for s in wl.inputs), target, name)


@functools.lru_cache(maxsize=64)
def lower_raw(spec: RawSpec, inputs: Inputs, target: Target, name: str) -> Program:
    """The program the cores of block ``spec`` issue on ``target`` (see the module
    docstring), its inputs of the given shapes and dtypes."""
    from pypto.codegen.asm import parse_block
    from pypto.sim.check import check_program
    from pypto.sim.races import find_races
    from pypto.sim.scalar import DEFAULT_BUDGET, issue

    symbols = raw_symbols(spec, inputs)
    program = parse_block(spec.code, symbols, target, name=name,
                          max_cores=max(target.cube_cores, target.vector_cores))
    _refuse_writes_to_inputs(program, spec)
    issued = issue(program, spec.budget or DEFAULT_BUDGET)
    check_program(issued, target)
    for race in find_races(issued):
        warnings.warn(f"{name}: {race} (synchronization inside pypto.raw() is the block's "
                      "own: order the pipes with SET_FLAG/WAIT_FLAG or BARRIER)",
                      HazardWarning, stacklevel=2)
    return issued


def raw_symbols(spec: RawSpec, inputs: Inputs) -> list[Symbol]:
    """The GM tensors a block names: its bindings (read-only), then its outputs."""
    from pypto.codegen.program import Symbol

    symbols = [Symbol(name, BY_NAME[dtype], shape, "in")
               for name, (shape, dtype) in zip(spec.inputs, inputs)]
    return symbols + [Symbol(name, BY_NAME[dtype], shape, "out")
                      for name, shape, dtype in spec.outputs]


def _refuse_writes_to_inputs(program: Program, spec: RawSpec) -> None:
    lines = spec.code.splitlines()
    for core, stream in enumerate(program.cores):
        writes = (stream["d_mem"] == Mem.GM) & (stream["gm"] >= 0) \
            & (stream["gm"] < len(spec.inputs))
        if writes.any():
            i = int(np.flatnonzero(writes)[0])
            line = program.lines[core][i] if program.lines else 1
            tensor = spec.inputs[int(stream["gm"][i])]
            text = lines[line - 1] if line <= len(lines) else ""
            raise AsmError(f"GM[{tensor}] is bound to an input of the raw block, which is "
                           f"read-only: write a declared output instead "
                           f"(inline_asm(..., outputs={{'out': pypto.spec(shape, dtype)}}))",
                           line=line, column=len(text) - len(text.lstrip()) + 1, text=text)


def run_raw(node: Node, arrays: Sequence[np.ndarray], target: Target, name: str
            ) -> list[np.ndarray]:
    """Run raw block ``node`` on the functional executor: its outputs, from the arrays
    bound to it (how the CPU reference evaluates a block: it is NPU code)."""
    spec = RawSpec.of(node)
    inputs = tuple((tuple(a.shape), a.dtype.name) for a in arrays)
    program = lower_raw(spec, inputs, target, name)
    outputs = [poisoned(shape, dtype) for _, shape, dtype in spec.outputs]
    execute_raw(program, target, [np.ascontiguousarray(a).reshape(-1) for a in arrays], outputs)
    return [out.reshape(shape) for out, (_, shape, _) in zip(outputs, spec.outputs)]


def poisoned(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """A flat output buffer of NaN-like bytes (0xFF), as on-chip memory starts: what a
    block never writes shows as garbage, not as lucky zeros."""
    out = np.empty(int(np.prod(shape)), dtype=BY_NAME[dtype].np)
    out.view(np.uint8).fill(0xFF)
    return out


def execute_raw(program: Program, target: Target, inputs: list[np.ndarray],
                outputs: list[np.ndarray]) -> None:
    from pypto.sim.executor import execute

    execute(program, target, inputs + outputs)


def raw_bound(program: Program, target: Target) -> int:
    """The roofline bound of a block: its work and the GM bytes it touches (not all of
    its tensors' bytes: nothing obliges a block to read all it is given)."""
    from pypto.sim.roofline import program_bound, touched_gm_bytes

    return program_bound(program, target, touched_gm_bytes(program))
