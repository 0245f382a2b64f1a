"""The code-generation side of the op families: one emitter per family, registered
once under the family's name (the schedule side, ``pypto.schedule_space.registry``,
registers the same names; a test checks that the two cover the same families).

An emitter takes ``(workload, schedule, target, gm_in, gm_out)`` (``gm_in``/``gm_out``:
the GM symbol of each input and of each output node) and returns one ``StreamBuilder``
per core, for a schedule the family's space accepts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pypto.codegen import conv2d, matmul, movement, vector
from pypto.codegen.program import StreamBuilder
from pypto.errors import UnsupportedError
from pypto.ir.workload import Workload
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target

Emit = Callable[[Workload, Schedule, Target, dict[int, int], dict[int, int]],
                list[StreamBuilder]]


@dataclass(frozen=True)
class Emitter:
    """One op family's code generation."""

    family: str
    emit: Emit


EMITTERS: Mapping[str, Emitter] = MappingProxyType({e.family: e for e in (
    Emitter("matmul", matmul.emit),
    Emitter("vector", vector.emit),
    Emitter("conv2d", conv2d.emit),
    Emitter("movement", movement.emit),
)})


def emitter_of(wl: Workload) -> Emitter:
    """The emitter of ``wl``'s family; ``UnsupportedError`` when it has none."""
    try:
        return EMITTERS[wl.family]
    except KeyError:
        raise UnsupportedError(f"{wl.family} has no NPU code generation yet (it arrives "
                               "with the schedule-spaces work); run this kernel with "
                               "pypto.Context(device_type='cpu')") from None
