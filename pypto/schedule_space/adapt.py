"""Adapting a schedule tuned for one shape to a nearby shape of the same family.

The compile-time lookup (``pypto.compile.resolver``) uses it for the ``nearest`` step;
the tuner can use it to warm-start from tuned neighbours.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

from pypto.errors import PyptoError
from pypto.schedule_space.schedule import Schedule

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.schedule_space.space import Space
    from pypto.targets import Target


def adapt(wl: Workload, target: Target, schedule: Schedule) -> Schedule | None:
    """``schedule`` (tuned for another shape of ``wl``'s family) made valid for ``wl``:
    completed, every knob moved to the nearest of this shape's choices (on a log scale),
    then repaired greedily (one knob at a time, the change that removes the most
    violations) until the space accepts it. None if that fails."""
    from pypto.schedule_space import complete, space_for

    try:
        space = space_for(wl, target)
        knobs = dict(complete(wl, Schedule(schedule)))
        default = space.default()
        adapted = {name: _closest(axis.choices, knobs.get(name, default[name]))
                   for name, axis in space.axes.items()}
        candidate = Schedule(adapted)
        problems = _problems(wl, target, space, candidate)
        for _ in range(2 * len(space.axes)):
            if not problems:
                return candidate
            best = _best_repair(wl, target, space, candidate, len(problems))
            if best is None:
                return None
            candidate = best
            problems = _problems(wl, target, space, candidate)
        return None if problems else candidate
    except PyptoError:
        return None


def _best_repair(wl: Workload, target: Target, space: Space, candidate: Schedule,
                 current_problems: int) -> Schedule | None:
    """The one-knob change of ``candidate`` that leaves the fewest violations (fewer than
    ``current_problems``), trying each knob's choices nearest first; None if none helps."""
    best: tuple[int, Schedule] | None = None
    for name in reversed(list(space.axes)):
        current = candidate[name]
        for choice in sorted(space.axes[name].choices,
                             key=functools.partial(_gap, value=current)):
            if choice == current and type(choice) is type(current):
                continue
            trial = candidate.replace(**{name: choice})
            n = len(_problems(wl, target, space, trial))
            if n < current_problems and (best is None or n < best[0]):
                best = (n, trial)
                if n == 0:
                    return trial
    return None if best is None else best[1]


def valid_as_is(wl: Workload, target: Target, schedule: Schedule) -> Schedule | None:
    """``schedule`` completed with neutral knobs, if that is valid for ``wl`` now."""
    from pypto.schedule_space import complete, space_for

    try:
        s = complete(wl, schedule)
        return None if _problems(wl, target, space_for(wl, target), s) else s
    except PyptoError:
        return None


def _problems(wl: Workload, target: Target, space: Space, s: Schedule) -> list[str]:
    return space.validate(s)


def _gap(choice: Any, value: Any) -> tuple[float, Any]:
    """How far ``choice`` is from ``value``: log ratio for sizes, else equal or not; ties
    go to the smaller choice (it fits in memory more often)."""
    numeric = (isinstance(choice, int) and isinstance(value, int)
               and not isinstance(choice, bool) and not isinstance(value, bool))
    if numeric and choice > 0 and value > 0:
        return abs(math.log2(choice) - math.log2(value)), choice
    same = choice == value and type(choice) is type(value)
    return (0.0 if same else 1.0), 0


def _closest(choices: tuple[Any, ...], value: Any) -> Any:
    return min(choices, key=lambda c: _gap(c, value))
