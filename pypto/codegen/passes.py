"""A fused workload lowered as two passes of one program, when its schedule says so
(``fuse_tail=False``, ``split_at=n``; ``pypto.schedule_space.fusion``).

The head pass (the cube op, or the chain's first ops) stores the values the tail reads
in GM: into the workload's outputs where they are outputs, else into scratch tensors
of the program (symbols of role ``tmp``). Every core then meets at a ``SYNC_ALL``, so
that no core's tail reads a block another core has not written yet, and the tail pass
runs. Each pass is emitted by its family's own emitter; the passes' on-chip buffers
may reuse the same bytes, which the synchronization pass orders like any others.
"""

from __future__ import annotations

from pypto.codegen.isa import Op
from pypto.codegen.program import StreamBuilder
from pypto.codegen.registry import emitter_of
from pypto.errors import ScheduleError
from pypto.ir.split import split_workload
from pypto.ir.workload import Workload
from pypto.schedule_space import space_for, validate
from pypto.schedule_space.fusion import AXES, has_tail, head_ops, neutral
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target


def emit_passes(wl: Workload, s: Schedule, target: Target, gm_in: dict[int, int],
                gm_out: dict[int, int]) -> tuple[list[StreamBuilder], tuple[int, ...]]:
    """The streams of ``wl`` split under ``s``, and the whole's nodes that need a
    scratch tensor (their GM symbols follow the outputs', in this order)."""
    parts = split_workload(wl, head_ops(wl, s))
    schedules = part_schedules(wl, s, target)
    first_scratch = max([*gm_in.values(), *gm_out.values()], default=-1) + 1
    value_symbol = dict(gm_out) | {n: first_scratch + j for j, n in enumerate(parts.scratch)}
    streams = []
    for part, sched, sources, outputs in (
            (parts.head, schedules[0], parts.head_inputs, parts.head_outputs),
            (parts.tail, schedules[1], parts.tail_inputs, parts.tail_outputs)):
        problems = validate(part, sched, target)
        if problems:  # the space's constraints should have ruled this out
            raise ScheduleError(f"schedule {s.to_json()} of {wl.describe()} gives the pass "
                                f"{part.describe()} the invalid schedule {sched.to_json()}: "
                                + "; ".join(problems))
        part_in = {j: gm_in[i] if kind == "input" else value_symbol[i]
                   for j, (kind, i) in enumerate(sources)}
        part_out = {local: value_symbol[n] for local, n in zip(part.outputs, outputs)}
        streams.append(emitter_of(part).emit(part, sched, target, part_in, part_out))
    return merge(target, streams[0], streams[1]), parts.scratch


def part_schedules(wl: Workload, s: Schedule, target: Target) -> tuple[Schedule, Schedule]:
    """The schedules of the two passes of ``wl`` split under ``s``: the head takes the
    schedule's knobs (fusion axes at their fused values); the tail of a vector chain
    takes the same tiling, the tail of a cube op its own default."""
    parts = split_workload(wl, head_ops(wl, s))

    def take(part: Workload) -> Schedule:
        fused = neutral(part)
        return Schedule({name: fused[name] if name in AXES else s[name]
                         for name in space_for(part, target).axes})

    tail = space_for(parts.tail, target).default() if has_tail(wl) else take(parts.tail)
    return take(parts.head), tail


def merge(target: Target, head: list[StreamBuilder],
          tail: list[StreamBuilder]) -> list[StreamBuilder]:
    """One stream per core: its head pass, a ``SYNC_ALL``, its tail pass. A core with
    no head work still meets the head's own ``SYNC_ALL``s (split-K has one)."""
    head_arrays = [sb.array() for sb in head]
    meets = int((head_arrays[0]["op"] == Op.SYNC_ALL).sum()) if head_arrays else 0
    out = []
    for core in range(max(len(head), len(tail))):
        sb = StreamBuilder(target)
        if core < len(head_arrays):
            sb.extend(head_arrays[core])
        else:
            for _ in range(meets):
                sb.emit(Op.SYNC_ALL)
        sb.emit(Op.SYNC_ALL)
        if core < len(tail):
            sb.extend(tail[core].array())
        out.append(sb)
    return out
