"""Schedules and the rules that make one valid for a workload on a target.

The constraints of ``space_for(workload, target)`` are the one definition of a valid
schedule: ``validate`` lists what they reject (empty when the schedule is valid) and
lowering refuses the same. ``default_schedule`` is the documented heuristic used when
nothing better is known. Each op family is one record in ``registry.FAMILIES``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pypto.schedule_space.registry import FAMILIES, Family, family_of, space_for
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Space

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.targets import Target

__all__ = ["FAMILIES", "Family", "Schedule", "Space", "complete", "default_schedule",
           "family_of", "input_layouts", "space_for", "validate"]


def default_schedule(wl: Workload, target: Target) -> Schedule:
    """The heuristic schedule for ``wl`` on ``target`` (good, not tuned)."""
    return space_for(wl, target).default()


def complete(wl: Workload, schedule: Schedule) -> Schedule:
    """Fill in knobs that have a neutral value and are missing from ``schedule`` (records
    written before those knobs existed); complete a schedule before validating it."""
    return family_of(wl).complete(wl, schedule)


def validate(wl: Workload, schedule: Schedule, target: Target) -> list[str]:
    """Every constraint ``schedule`` violates for ``wl`` on ``target`` (empty if valid):
    exactly ``space_for(wl, target).validate(schedule)``."""
    return space_for(wl, target).validate(schedule)


def input_layouts(wl: Workload, schedule: Schedule) -> list[str]:
    """How each input of ``wl`` lies in GM under ``schedule`` (a matmul may store a
    captured constant in NZ; otherwise as the caller gave it)."""
    return family_of(wl).input_layouts(wl, schedule)
