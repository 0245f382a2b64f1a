"""Tuning tasks: the distinct (workload, target) pairs a script's kernels run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypto.compile.compiled import Compiled
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Space
    from pypto.targets import Target


@dataclass
class Task:
    kernel: str
    index: int
    workload: Workload
    target: Target
    space: Space
    shapes: str = ""        # the call's argument shapes, where its kernel ran with several

    @property
    def key(self) -> tuple[str, str]:
        return (self.workload.key, self.target.key)

    @property
    def label(self) -> str:
        """``kernel[i]``: the kernel's i-th workload; then the argument shapes when the
        kernel ran with more than one (a dynamic kernel under ``--shapes``)."""
        return f"{self.kernel}[{self.index}]" + (f" {self.shapes}" if self.shapes else "")

    def us(self, cycles: float) -> float:
        return cycles / (self.target.clock_ghz * 1e3)


def extract_tasks(calls: list[Compiled]) -> list[Task]:
    """One task per distinct (workload key, target key), in first-call order; raw blocks
    (``pypto.inline_asm``) run as written and are not tasks."""
    from pypto.ir.workload import RAW
    from pypto.schedule_space import space_for

    signatures: dict[str, set[str]] = {}
    for c in calls:
        signatures.setdefault(c.name, set()).add(_shapes(c))
    seen: set[tuple[str, str]] = set()
    out = []
    for c in calls:
        shapes = _shapes(c) if len(signatures[c.name]) > 1 else ""
        for i, wl in enumerate(c.workloads):
            key = (wl.key, c.target.key)
            if key in seen or wl.family == RAW:
                continue
            seen.add(key)
            out.append(Task(c.name, i, wl, c.target, space_for(wl, c.target), shapes))
    return out


def _shapes(call: Compiled) -> str:
    """``x=300x512 w=512x64``: each argument's name and shape."""
    graph = call.graph
    return " ".join(f"{name}={'x'.join(map(str, graph.nodes[i].shape)) or 'scalar'}"
                    for name, i in zip(graph.input_names, graph.inputs))
