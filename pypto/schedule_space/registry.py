"""The op families, registered once: what the schedule side knows of each.

A ``Family`` record holds a family's space builder, default heuristic, ``complete``
(neutral values of knobs added after old records were written), how its inputs lie in
GM under a schedule, its work units (what the cores share; tests and the cost model
read it) and its bytes per memory role (cost-model features). ``FAMILIES`` maps
``Workload.family`` to its record; code generation keeps its own table of emitters
under the same names (``pypto.codegen.registry``), which must cover the same families.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pypto.errors import UnsupportedError
from pypto.schedule_space import conv2d, matmul, movement, vector
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Space

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.targets import Target

SPACE_CACHE_SIZE = 256  # (workload, target) pairs; lowering asks for every trial


@dataclass(frozen=True)
class Family:
    """One op family's schedule side."""

    name: str
    space: Callable[[Workload, Target], Space]
    default: Callable[[Workload, Target], Schedule]
    complete: Callable[[Workload, Schedule], Schedule]
    input_layouts: Callable[[Workload, Schedule], list[str]]
    work_units: Callable[[Workload, Any], int]
    footprints: Callable[[Workload, Any, Target], dict[str, int]]


def given_layouts(wl: Workload, schedule: Schedule) -> list[str]:
    """Every input lies in GM as the caller gave it."""
    return [spec.layout for spec in wl.inputs]


FAMILIES: Mapping[str, Family] = MappingProxyType({f.name: f for f in (
    Family("matmul", matmul.build_space, matmul.default, matmul.complete,
           matmul.operand_layouts, matmul.num_blocks, matmul.footprints),
    Family("vector", vector.build_space, vector.default, vector.complete, given_layouts,
           vector.num_tiles, vector.footprints),
    Family("conv2d", conv2d.build_space, conv2d.default, conv2d.complete, given_layouts,
           conv2d.num_blocks, conv2d.footprints),
    Family("movement", movement.build_space, movement.default, movement.complete,
           given_layouts, movement.num_tiles, movement.footprints),
)})


def family_of(wl: Workload) -> Family:
    """The record of ``wl``'s family; ``UnsupportedError`` when it has none."""
    try:
        return FAMILIES[wl.family]
    except KeyError:
        raise UnsupportedError(f"{wl.family} workloads have no NPU schedule; run them with "
                               "pypto.Context(device_type='cpu')") from None


@functools.lru_cache(maxsize=SPACE_CACHE_SIZE)
def space_for(wl: Workload, target: Target) -> Space:
    """The schedule space of ``wl`` on ``target`` (cached: workloads and targets hash
    and compare by their content keys)."""
    return family_of(wl).space(wl, target)
