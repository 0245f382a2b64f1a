"""``Compiled``: a kernel lowered for one input signature and target (DESIGN §12).

It works on plain arrays: the frontend hands it a ``TensorIO`` that turns the caller's
tensors into arrays and the outputs back into tensors, so this layer never needs the
frontend's ``Tensor``. Lowering and simulation load on first use, so that importing
``pypto`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from pypto.compile.buckets import Buckets
from pypto.errors import KernelError
from pypto.ir.fusion import FusePolicy
from pypto.ir.graph import Graph, Node
from pypto.ir.layouts import to_nz
from pypto.ir.partition import Plan, Step
from pypto.ir.workload import RAW

if TYPE_CHECKING:
    from pypto.codegen.program import Program
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Schedule
    from pypto.sim.result import SimResult
    from pypto.targets import Target

SOURCES = ("explicit", "tuned", "nearest", "model", "default", "raw")  # raw: pypto.inline_asm


class TensorIO(Protocol):
    """How a caller's values become input arrays and output arrays become values."""

    def to_array(self, value: Any) -> np.ndarray | None:
        """The data of ``value``, or None if it is not a concrete tensor."""

    def from_array(self, array: np.ndarray, node: Node) -> Any:
        """The value the caller gets for output ``node`` holding ``array``."""


class ArrayIO:
    """Plain NumPy arrays in and out (what the compile driver uses on its own)."""

    def to_array(self, value: Any) -> np.ndarray | None:
        return value if isinstance(value, np.ndarray) else None

    def from_array(self, array: np.ndarray, node: Node) -> Any:
        return array


@dataclass(frozen=True)
class CompileOptions:
    """A kernel's own options, kept so that a recompile (``retarget``) honours them."""

    fuse: FusePolicy = FusePolicy()
    schedule: Any = None            # explicit schedule(s), as given to @pypto.kernel
    dynamic_shape: bool = False
    buckets: Buckets | None = None  # a dynamic kernel's shape buckets


class Compiled:
    """The workloads, schedules and programs of one kernel signature.

    ``workloads``, ``schedules`` and ``sources`` line up (one entry per fused kernel);
    ``asm()`` is the PTO assembly; calling it runs the programs on the simulated NPU.
    """

    def __init__(self, name: str, graph: Graph, structure: Any, target: Target, plan: Plan,
                 schedules: list[Schedule], sources: list[str], programs: list[Program], *,
                 options: CompileOptions | None = None, io: TensorIO | None = None) -> None:
        self.name, self.graph, self.structure, self.target = name, graph, structure, target
        self.plan = plan
        self.schedules = list(schedules)
        self.sources = list(sources)
        self.programs = list(programs)
        self.options = options or CompileOptions()
        self.io: TensorIO = io or ArrayIO()
        # the same kernel compiled for other shapes of its tensor arguments on a target
        # (set by the frontend; ``pypto tune --shapes`` uses it)
        self.for_shapes: Callable[[Sequence[tuple[int, ...]], Target], Compiled] | None = None

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
                         f"; schedule ({src}) {s.to_json()}\n{prog.asm(self.target)}")
        return "\n".join(parts)

    def with_schedule(self, index: int, schedule: Mapping[str, Any]) -> Compiled:
        """A new ``Compiled`` whose workload ``index`` uses ``schedule`` (source explicit)."""
        from pypto.schedule_space import complete

        if not 0 <= index < len(self.programs):
            raise KernelError(f"workload index {index} is out of range: {self.name} has "
                              f"{len(self.programs)} workload(s)")
        if self.workloads[index].family == RAW:
            raise KernelError(f"workload {index} of {self.name} is a raw block "
                              "(pypto.inline_asm): it runs as written and has no schedule")
        sched = complete(self.workloads[index], as_schedule(schedule))
        schedules, sources, programs = list(self.schedules), list(self.sources), list(self.programs)
        schedules[index], sources[index] = sched, "explicit"
        programs[index] = lower_step(self.name, self.graph, self.plan, self.target, index, sched)
        out = Compiled(self.name, self.graph, self.structure, self.target, self.plan, schedules,
                       sources, programs, options=self.options, io=self.io)
        out.for_shapes = self.for_shapes
        return out

    def retarget(self, target: Target) -> Compiled:
        """The same kernel (graph and its own options: fusion, explicit schedules)
        compiled for ``target``, with schedules looked up for that target."""
        from pypto.compile.driver import compile_graph

        out = compile_graph(self.graph, self.structure, target, kernel_name=self.name,
                            options=self.options, io=self.io)
        out.for_shapes = self.for_shapes
        return out

    def simulate_each(self, *, trace: bool = False, hazards: bool = False) -> list[SimResult]:
        """One ``SimResult`` per workload (timing only; no numbers are computed)."""
        from pypto.compile.raw import raw_bound
        from pypto.sim.roofline import workload_bound
        from pypto.sim.timing import simulate

        return [simulate(p, self.target, trace=trace, hazards=hazards,
                         bound_cycles=raw_bound(p, self.target) if wl.family == RAW
                         else workload_bound(wl, self.target))
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

    def _input_arrays(self, values: Sequence[Any]) -> list[np.ndarray]:
        if len(values) != len(self.plan.inputs):
            raise KernelError(f"{self.name} was compiled for {len(self.plan.inputs)} tensor "
                              f"argument(s), got {len(values)}")
        arrays = []
        for i, (value, bid) in enumerate(zip(values, self.plan.inputs)):
            buf = self.plan.buffers[bid]
            array = self.io.to_array(value)
            if array is None:
                raise KernelError(f"{self.name}: argument {i} must be a concrete PyPTO tensor")
            if array.shape != buf.shape or array.dtype.name != buf.dtype:
                raise KernelError(f"{self.name}: argument {i} is {array.dtype.name}"
                                  f"{list(array.shape)} but this compiled kernel takes "
                                  f"{buf.dtype}{list(buf.shape)}; call the kernel itself to "
                                  "compile for new shapes")
            arrays.append(array)
        return arrays

    def __call__(self, *tensors: Any) -> Any:
        """Run on the simulated NPU; returns the kernel's outputs as tensors."""
        from pypto.compile.raw import poisoned
        from pypto.sim.executor import execute

        gm: dict[int, np.ndarray] = {}
        for array, bid in zip(self._input_arrays(tensors), self.plan.inputs):
            gm[bid] = np.ascontiguousarray(array).reshape(-1)
        for buf in self.plan.buffers:
            if buf.kind == "const":
                gm[buf.id] = np.ascontiguousarray(self.graph.consts[buf.node],
                                                  dtype=buf.dtype).reshape(-1)
            elif buf.id not in gm:
                gm[buf.id] = np.empty(int(np.prod(buf.shape)), dtype=buf.dtype)
        nz: dict[int, np.ndarray] = {}  # buffers a program reads in NZ, formatted once
        for step, program, sched in zip(self.plan.steps, self.programs, self.schedules):
            if step.workload.family == RAW:   # what a block does not write shows as garbage
                for b in step.outputs:
                    gm[b] = poisoned(self.plan.buffers[b].shape, self.plan.buffers[b].dtype)
            args = []
            for b, layout in zip(step.inputs, _input_layouts(step, sched)):
                if layout == "NZ" and b not in nz:
                    nz[b] = to_nz(gm[b].reshape(self.plan.buffers[b].shape))
                args.append(nz[b] if layout == "NZ" else gm[b])
            scratch = [np.empty(sym.size, sym.dtype.np) for sym in program.symbols
                       if sym.role == "tmp"]  # what one pass stores for the next
            execute(program, self.target, args + [gm[b] for b in step.outputs] + scratch)
        arrays = [gm[bid].reshape(shape).copy() for bid, shape in self.plan.outputs]
        return pack_outputs(self.graph, self.structure, arrays, self.io)

    def run_reference(self, *tensors: Any) -> Any:
        """Run the same graph with the NumPy reference (the CPU oracle)."""
        outs = reference_outputs(self.graph, self._input_arrays(tensors), self.target,
                                 self.name)
        return pack_outputs(self.graph, self.structure, outs, self.io)


def reference_outputs(graph: Graph, inputs: list[np.ndarray], target: Target,
                      name: str) -> list[np.ndarray]:
    """The graph's outputs by the CPU reference, its raw blocks run by the functional
    executor for ``target`` (they are NPU code)."""
    from pypto.compile.raw import run_raw
    from pypto.ir.reference import evaluate

    def raw(node: Node, arrays: list[np.ndarray]) -> list[np.ndarray]:
        return run_raw(node, arrays, target, f"{name}_inline_asm{node.id}")

    return evaluate(graph, inputs, raw)


def _input_layouts(step: Step, schedule: Schedule) -> list[str]:
    """How each input of ``step`` lies in GM (a raw block reads them as given)."""
    from pypto.schedule_space import input_layouts

    if step.workload.family == RAW:
        return [spec.layout for spec in step.workload.inputs]
    return input_layouts(step.workload, schedule)


def pack_outputs(graph: Graph, structure: Any, arrays: list[np.ndarray], io: TensorIO) -> Any:
    """The graph's outputs as the caller's values, in the kernel's output structure."""
    if structure is None:  # the kernel returned nothing (it may have run raw blocks)
        return None
    values = []
    for node_id, arr in zip(graph.outputs, arrays):
        node = graph.nodes[node_id]
        arr = np.array(arr, dtype=node.dtype.np, order="C").reshape(node.shape)
        values.append(io.from_array(arr, node))
    if structure == "single":
        return values[0]
    return structure(values)


def as_schedule(schedule: Mapping[str, Any]) -> Schedule:
    from pypto.schedule_space import Schedule

    return schedule if isinstance(schedule, Schedule) else Schedule(schedule)


def buffer_names(plan: Plan) -> dict[int, str]:
    """GM symbol names of the plan's buffers (outputs ``out0``, ``out1``, ...), unique."""
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


def lower_step(kernel_name: str, graph: Graph, plan: Plan, target: Target, index: int,
               schedule: Schedule) -> Program:
    """The program of workload ``index`` of ``plan`` under ``schedule`` (a raw block's:
    what its cores issue, ``pypto.compile.raw``)."""
    from pypto.codegen.lower import lower

    step = plan.steps[index]
    if step.workload.family == RAW:
        from pypto.compile.raw import lower_workload

        return lower_workload(step.workload, target, f"{kernel_name}_{index}_inline_asm")
    names = buffer_names(plan)
    return lower(step.workload, schedule, target, name=f"{kernel_name}_{index}",
                 input_names=[names[b] for b in step.inputs],
                 output_names=[names[b] for b in step.outputs])
