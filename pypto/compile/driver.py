"""``compile_graph``: partition a traced graph, pick a schedule per workload, lower each.

Schedule per workload: the explicit one if the kernel gave it, else the database's
fallback chain (``pypto.compile.resolver``: tuned, nearest, model, default). A raw block
(``pypto.inline_asm``) has none: it runs as written (source ``raw``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pypto.compile.compiled import (
    Compiled,
    CompileOptions,
    TensorIO,
    as_schedule,
    lower_step,
)
from pypto.compile.raw import RAW_SOURCE
from pypto.errors import ScheduleError, ShapeError
from pypto.ir.partition import partition
from pypto.ir.workload import RAW

if TYPE_CHECKING:
    from pypto.ir.graph import Graph
    from pypto.targets import Target


def compile_graph(graph: Graph, structure: Any, target: Target, *, kernel_name: str,
                  options: CompileOptions | None = None,
                  io: TensorIO | None = None) -> Compiled:
    """Partition ``graph`` under the kernel's fusion policy, choose every workload's
    schedule (explicit, else looked up) and lower each to a program for ``target``."""
    from pypto.compile.resolver import choose_schedule
    from pypto.schedule_space import Schedule, complete

    options = options or CompileOptions()
    check_fits_gm(graph, target)
    plan = partition(graph, options.fuse)
    raw = [step.workload.family == RAW for step in plan.steps]
    explicit = explicit_schedules(options.schedule, len(plan.steps), kernel_name, raw)
    schedules, sources = [], []
    for step, given in zip(plan.steps, explicit):
        if step.workload.family == RAW:
            schedules.append(Schedule({}))
            sources.append(RAW_SOURCE)
        elif given is not None:
            schedules.append(complete(step.workload, as_schedule(given)))
            sources.append("explicit")
        else:
            sched, source = choose_schedule(step.workload, target, options.buckets)
            schedules.append(sched)
            sources.append(source)
    programs = [lower_step(kernel_name, graph, plan, target, i, s)
                for i, s in enumerate(schedules)]
    return Compiled(kernel_name, graph, structure, target, plan, schedules, sources, programs,
                    options=options, io=io)


def check_fits_gm(graph: Graph, target: Target) -> None:
    """Refuse, before anything is built, a kernel whose tensors do not fit the target's
    global memory: each tensor alone, and the arguments and results together."""
    gm = target.role("global")
    sizes = {node.id: math.prod(node.shape) * node.dtype.itemsize for node in graph.nodes}
    for node in graph.nodes:
        if sizes[node.id] > gm.capacity:
            raise ShapeError(f"a {node.op} result of shape {list(node.shape)} "
                             f"({node.dtype.name}) takes {_gib(sizes[node.id])}, more than "
                             f"{target.name}'s {gm.name} of {_gib(gm.capacity)}: split the "
                             "work into smaller kernels")
    io = sum(sizes[i] for i in {*graph.inputs, *graph.outputs})
    if io > gm.capacity:
        raise ShapeError(f"the kernel's arguments and results take {_gib(io)} together, more "
                         f"than {target.name}'s {gm.name} of {_gib(gm.capacity)}: split the "
                         "work into smaller kernels")


def _gib(nbytes: int) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def explicit_schedules(schedule: Any, count: int, name: str,
                       raw: Sequence[bool] = ()) -> list[Any]:
    """One explicit schedule (or None) per workload, from a kernel's ``schedule=``; a
    mapping is the one tuned workload's when the others are raw blocks (``raw``)."""
    if schedule is None:
        return [None] * count
    if isinstance(schedule, Mapping):
        tuned = [i for i in range(count) if not (raw and raw[i])]
        if len(tuned) != 1:
            raise ScheduleError(f"kernel {name!r} has {len(tuned)} tuned workloads; pass "
                                "schedule= as a list with one schedule (or None) per workload")
        return [schedule if i == tuned[0] else None for i in range(count)]
    if isinstance(schedule, Sequence) and not isinstance(schedule, str):
        if len(schedule) != count:
            raise ScheduleError(f"kernel {name!r} has {count} workloads but schedule= has "
                                f"{len(schedule)} entries")
        return list(schedule)
    raise ScheduleError(f"schedule= must be a mapping of knobs or a list of them, got "
                        f"{type(schedule).__name__}")
