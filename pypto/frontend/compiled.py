"""``Compiled``: a kernel lowered for one input signature and target (DESIGN §12)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from pypto.errors import KernelError, ScheduleError
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes
from pypto.ir.graph import Graph
from pypto.ir.layouts import to_nz
from pypto.ir.partition import Plan, partition

if TYPE_CHECKING:
    from pypto.codegen.program import Program
    from pypto.ir.fusion import FusePolicy
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Schedule
    from pypto.sim.result import SimResult
    from pypto.targets import Target

SOURCES = ("explicit", "tuned", "nearest", "model", "default")


class Compiled:
    """The workloads, schedules and programs of one kernel signature.

    ``workloads``, ``schedules`` and ``sources`` line up (one entry per fused kernel);
    ``asm()`` is the PTO assembly; calling it runs the programs on the simulated NPU.
    """

    def __init__(self, name: str, graph: Graph, structure: Any, target: Target, plan: Plan,
                 schedules: list[Schedule], sources: list[str], programs: list[Program]) -> None:
        self.name, self.graph, self.structure, self.target = name, graph, structure, target
        self.plan = plan
        self.schedules = list(schedules)
        self.sources = list(sources)
        self.programs = list(programs)

    @property
    def workloads(self) -> list[Workload]:
        return [step.workload for step in self.plan.steps]

    def __repr__(self) -> str:
        return (f"<Compiled {self.name} on {self.target.name}: {len(self.programs)} workload(s), "
                f"sources {self.sources}>")

    def asm(self) -> str:
        """PTO assembly of every workload, each headed by its description and schedule."""
        parts = []
        for i, (wl, s, src, prog) in enumerate(zip(self.workloads, self.schedules, self.sources,
                                                   self.programs)):
            parts.append(f"; workload {i}: {wl.describe()}\n; key {wl.key}\n"
                         f"; schedule ({src}) {s.to_json()}\n{prog.asm()}")
        return "\n".join(parts)

    def with_schedule(self, index: int, schedule: Mapping[str, Any]) -> Compiled:
        """A new ``Compiled`` whose workload ``index`` uses ``schedule`` (source explicit)."""
        from pypto.schedule_space import Schedule

        if not 0 <= index < len(self.programs):
            raise KernelError(f"workload index {index} is out of range: {self.name} has "
                              f"{len(self.programs)} workload(s)")
        from pypto.schedule_space import complete

        sched = schedule if isinstance(schedule, Schedule) else Schedule(schedule)
        sched = complete(self.workloads[index], sched)
        schedules, sources, programs = list(self.schedules), list(self.sources), list(self.programs)
        schedules[index], sources[index] = sched, "explicit"
        programs[index] = _lower_step(self, index, sched)
        return Compiled(self.name, self.graph, self.structure, self.target, self.plan, schedules,
                        sources, programs)

    def simulate_each(self, *, trace: bool = False, hazards: bool = False) -> list[SimResult]:
        """One ``SimResult`` per workload (timing only; no numbers are computed)."""
        from pypto.sim.roofline import workload_bound
        from pypto.sim.timing import simulate

        return [simulate(p, self.target, bound_cycles=workload_bound(wl, self.target),
                         trace=trace, hazards=hazards)
                for wl, p in zip(self.workloads, self.programs)]

    def simulate(self, *, trace: bool = False, hazards: bool = False) -> SimResult:
        """Time the kernel on the simulated NPU without computing any numbers.

        Workloads run one after another, so their times add up. ``trace`` keeps
        per-instruction start and end cycles; ``hazards`` checks the timed trace for
        races between pipes.

        Example:
            >>> import pypto
            >>> k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
            >>> r = k.lower(pypto.spec((256, 256), "float16"),
            ...             pypto.spec((256, 256), "float16")).simulate()
            >>> r.cycles >= r.bound_cycles
            True
        """
        from pypto.sim.result import SimResult

        return SimResult.combine(self.simulate_each(trace=trace, hazards=hazards))

    def _check_args(self, tensors: Sequence[Any]) -> None:
        if len(tensors) != len(self.plan.inputs):
            raise KernelError(f"{self.name} was compiled for {len(self.plan.inputs)} tensor "
                              f"argument(s), got {len(tensors)}")
        for i, (t, bid) in enumerate(zip(tensors, self.plan.inputs)):
            buf = self.plan.buffers[bid]
            if not isinstance(t, Tensor) or t.is_symbolic:
                raise KernelError(f"{self.name}: argument {i} must be a concrete PyPTO tensor")
            if t.shape != buf.shape or t.dtype.name != buf.dtype:
                raise KernelError(f"{self.name}: argument {i} is {t.dtype.name}{list(t.shape)} but "
                                  f"this compiled kernel takes {buf.dtype}{list(buf.shape)}; call "
                                  f"the kernel itself to compile for new shapes")

    def __call__(self, *tensors: Tensor) -> Any:
        """Run on the simulated NPU; returns the kernel's outputs as tensors."""
        from pypto.schedule_space import input_layouts
        from pypto.sim.executor import execute

        self._check_args(tensors)
        gm: dict[int, np.ndarray] = {}
        for t, bid in zip(tensors, self.plan.inputs):
            gm[bid] = np.ascontiguousarray(t._data).reshape(-1)  # type: ignore[union-attr]
        for buf in self.plan.buffers:
            if buf.kind == "const":
                gm[buf.id] = np.ascontiguousarray(self.graph.consts[buf.node],
                                                  dtype=buf.dtype).reshape(-1)
            elif buf.id not in gm:
                gm[buf.id] = np.empty(int(np.prod(buf.shape)), dtype=buf.dtype)
        nz: dict[int, np.ndarray] = {}  # buffers a program reads in NZ, formatted once
        for step, program, sched in zip(self.plan.steps, self.programs, self.schedules):
            args = []
            for b, layout in zip(step.inputs, input_layouts(step.workload, sched)):
                if layout == "NZ" and b not in nz:
                    nz[b] = to_nz(gm[b].reshape(self.plan.buffers[b].shape))
                args.append(nz[b] if layout == "NZ" else gm[b])
            execute(program, self.target, args + [gm[b] for b in step.outputs])
        arrays = [gm[bid].reshape(shape).copy() for bid, shape in self.plan.outputs]
        return pack_outputs(self.graph, self.structure, arrays)

    def run_reference(self, *tensors: Tensor) -> Any:
        """Run the same graph with the NumPy reference (the CPU oracle)."""
        from pypto.ir.reference import evaluate

        self._check_args(tensors)
        outs = evaluate(self.graph, [t.numpy() for t in tensors])
        return pack_outputs(self.graph, self.structure, outs)


def pack_outputs(graph: Graph, structure: Any, arrays: list[np.ndarray]) -> Any:
    tensors = []
    for node_id, arr in zip(graph.outputs, arrays):
        node = graph.nodes[node_id]
        arr = np.array(arr, dtype=node.dtype.np, order="C").reshape(node.shape)
        tensors.append(Tensor(arr.shape, dtypes.as_dtype(node.dtype), node.layout, data=arr))
    if structure == "single":
        return tensors[0]
    return structure(tensors)


def _buffer_names(graph: Graph, plan: Plan) -> dict[int, str]:
    names: dict[int, str] = {}
    used: set[str] = set()
    out_ids = {bid: k for k, (bid, _) in reversed(list(enumerate(plan.outputs)))}
    for buf in plan.buffers:
        name = f"out{out_ids[buf.id]}" if buf.id in out_ids and buf.kind == "tmp" else buf.name
        while name in used:
            name += "_"
        used.add(name)
        names[buf.id] = name
    return names


def _lower_step(c: Compiled, index: int, schedule: Schedule) -> Program:
    from pypto.codegen.lower import lower

    step = c.plan.steps[index]
    names = _buffer_names(c.graph, c.plan)
    return lower(step.workload, schedule, c.target, name=f"{c.name}_{index}",
                 input_names=[names[b] for b in step.inputs],
                 output_names=[names[b] for b in step.outputs])


def _explicit(schedule: Any, count: int, name: str) -> list[Any]:
    if schedule is None:
        return [None] * count
    if isinstance(schedule, Mapping):
        if count != 1:
            raise ScheduleError(f"kernel {name!r} has {count} workloads; pass schedule= as a "
                                "list with one schedule (or None) per workload")
        return [schedule]
    if isinstance(schedule, Sequence) and not isinstance(schedule, str):
        if len(schedule) != count:
            raise ScheduleError(f"kernel {name!r} has {count} workloads but schedule= has "
                                f"{len(schedule)} entries")
        return list(schedule)
    raise ScheduleError(f"schedule= must be a mapping of knobs or a list of them, got "
                        f"{type(schedule).__name__}")


def _looked_up(wl: Workload, target: Target) -> tuple[Schedule, str]:
    """The schedule the database chain picks for ``wl`` and its source; never fails because
    of the database (it warns and falls back)."""
    from pypto.db.lookup import choose_schedule

    return choose_schedule(wl, target)


def compile_graph(graph: Graph, structure: Any, target: Target, *, fuse: FusePolicy,
                  schedule: Any, kernel_name: str) -> Compiled:
    """Partition, pick a schedule per workload, and lower each to a program.

    Schedule per workload: the explicit one if given, else the database's lookup chain
    (tuned, nearest, model, default; see ``pypto.db.lookup``).
    """
    from pypto.schedule_space import Schedule

    plan = partition(graph, fuse)
    explicit = _explicit(schedule, len(plan.steps), kernel_name)
    schedules, sources = [], []
    for step, given in zip(plan.steps, explicit):
        if given is not None:
            from pypto.schedule_space import complete

            sched = given if isinstance(given, Schedule) else Schedule(given)
            schedules.append(complete(step.workload, sched))
            sources.append("explicit")
        else:
            sched, source = _looked_up(step.workload, target)
            schedules.append(sched)
            sources.append(source)
    compiled = Compiled(kernel_name, graph, structure, target, plan, schedules, sources, [])
    compiled.programs = [_lower_step(compiled, i, s) for i, s in enumerate(schedules)]
    return compiled
