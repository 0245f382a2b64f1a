"""``lower(workload, schedule, target)`` -> ``Program``.

The passes, in order: validate the schedule (against the workload's schedule space,
the one definition of a valid schedule); *tile and place* (the family emitter
splits the work into blocks per core and gives every buffer its slots in L1, L0A, L0B,
L0C and UB); *insert DMAs and compute* (the same emitter, one instruction stream per
core); *pack* each stream into an ``INSTR`` array; *insert synchronization*
(``sync.insert_sync``, from the streams' byte-level dependencies), which gives the
``Program``'s arrays. A schedule that turns a fusion off (``fuse_tail=False``,
``split_at``) is emitted as two passes of the program (``passes``). Emitting, packing
and synchronization run compiled code (``_sync.pyx``) when it is built, byte for byte
what their Python specifications give.
"""

from __future__ import annotations

from collections.abc import Sequence

from pypto.codegen.passes import emit_passes
from pypto.codegen.program import Program, Symbol
from pypto.codegen.registry import emitter_of
from pypto.codegen.sync import insert_sync
from pypto.errors import ScheduleError
from pypto.ir.dtypes import BY_NAME
from pypto.ir.layouts import nz_shape
from pypto.ir.workload import TensorSpec, Workload
from pypto.schedule_space import input_layouts, validate
from pypto.schedule_space.fusion import head_ops
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target


def lower(wl: Workload, schedule: Schedule, target: Target, *, name: str = "workload",
          input_names: Sequence[str] | None = None,
          output_names: Sequence[str] | None = None) -> Program:
    """Generate the PTO program of ``wl`` under ``schedule`` for ``target``.

    Raises:
        ScheduleError: ``schedule`` is not a point of ``space_for(wl, target)`` (the
            message lists the space's violations); complete old schedules first
            (``pypto.schedule_space.complete``).
        UnsupportedError: ``wl``'s family has no NPU code generation.
    """
    emitter = emitter_of(wl)
    problems = validate(wl, schedule, target)
    if problems:
        raise ScheduleError(f"schedule {schedule.to_json()} is not valid for {wl.describe()} "
                            f"on {target.name}: " + "; ".join(problems))
    in_names = list(input_names or [f"in{i}" for i in range(len(wl.inputs))])
    out_names = list(output_names or [f"out{i}" for i in range(len(wl.outputs))])
    layouts = input_layouts(wl, schedule)
    symbols = [Symbol(n, BY_NAME[s.dtype], _stored_shape(s, layout), "in")
               for n, s, layout in zip(in_names, wl.inputs, layouts)]
    symbols += [Symbol(n, BY_NAME[wl.nodes[o].dtype], wl.nodes[o].shape, "out")
                for n, o in zip(out_names, wl.outputs)]
    gm_in = {i: i for i in range(len(wl.inputs))}
    gm_out = {o: len(wl.inputs) + j for j, o in enumerate(wl.outputs)}
    if head_ops(wl, schedule):  # a fusion the schedule turns off: two passes
        streams, scratch = emit_passes(wl, schedule, target, gm_in, gm_out)
        symbols += scratch_symbols(wl, scratch, {s.name for s in symbols})
    else:
        streams = emitter.emit(wl, schedule, target, gm_in, gm_out)
    cores = tuple(insert_sync(sb.array(), target.event_ids) for sb in streams)
    return Program(name, target.name, tuple(symbols), cores)


def scratch_symbols(wl: Workload, nodes: Sequence[int], taken: set[str]) -> list[Symbol]:
    """GM tensors of role ``tmp`` for the values of ``nodes`` that one pass of the
    program stores for the next, named ``tmp<node>`` (made unique)."""
    out = []
    for n in nodes:
        name = f"tmp{n}"
        while name in taken:
            name += "_"
        taken.add(name)
        out.append(Symbol(name, BY_NAME[wl.nodes[n].dtype], wl.nodes[n].shape, "tmp"))
    return out


def _stored_shape(spec: TensorSpec, layout: str) -> tuple[int, ...]:
    """The shape of an input as it lies in GM (an NZ matrix is stored in blocks)."""
    if layout == "NZ":
        return nz_shape(spec.shape, BY_NAME[spec.dtype].itemsize)
    return spec.shape
