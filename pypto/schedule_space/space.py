"""``Space``: the schedules of one workload on one target.

A space is a list of named axes, each with finite ordered choices, and exact
constraints (buffer capacity counting buffer depth, alignment, divisibility) that every
point must meet: they are the one definition of a valid schedule (lowering refuses
what ``validate`` rejects, with the same messages). ``sample`` and ``neighbors`` only
return valid points; ``validate`` names the axis and the limit of every violation.
Axes are ordered so that later axes depend on earlier ones: sampling picks axis by axis
among the choices still feasible given the axes already picked (checks that need later
axes wait for them).
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pypto.schedule_space.schedule import Schedule

Check = Callable[[dict[str, Any]], list[str]]
EXACT_LIMIT = 200_000  # enumerate spaces up to this many raw points; estimate above


@dataclass(frozen=True)
class Axis:
    """One knob: its name, its choices in order, what it means, and (``note``) why the
    choices are limited, when a value outside them needs saying why."""

    name: str
    choices: tuple[Any, ...]
    doc: str = ""
    note: str = ""

    def index(self, value: Any) -> int:
        for i, c in enumerate(self.choices):
            if c == value and type(c) is type(value):
                return i
        raise ValueError(value)


@dataclass(frozen=True)
class Constraint:
    """A check over some axes; it runs once all of them are chosen."""

    axes: tuple[str, ...]
    check: Check


@dataclass(frozen=True)
class SpaceSize:
    value: int
    exact: bool

    def __str__(self) -> str:
        return f"{self.value:,}" if self.exact else f"~{self.value:,} (estimate)"


class Space:
    """Schedules of ``workload`` on ``target``; built by ``space_for``."""

    def __init__(self, workload: Any, target: Any, axes: Sequence[Axis],
                 constraints: Sequence[Constraint], default: Callable[[], Schedule]) -> None:
        self.workload, self.target = workload, target
        self.axes = {a.name: a for a in axes}
        self.constraints = list(constraints)
        self._default = default
        self._default_point: Schedule | None = None
        self._ready: dict[int, list[Constraint]] = {}
        order = [a.name for a in axes]
        for c in self.constraints:
            last = max(order.index(name) for name in c.axes)
            self._ready.setdefault(last, []).append(c)
        # after position p, which of the axes chosen so far a later check still reads:
        # whether a prefix can be completed depends on those values only
        self._frontier: list[tuple[str, ...]] = [
            tuple(n for n in order[:p + 1]
                  if any(n in c.axes for q, cs in self._ready.items() if q > p for c in cs))
            for p in range(len(order))]
        self._completable_memo: dict[tuple, bool] = {}
        self._names = order
        self._position = {name: i for i, name in enumerate(order)}
        self._reading = {name: [c for c in self.constraints if name in c.axes] for name in order}

    def __repr__(self) -> str:
        axes = ", ".join(f"{a.name}[{len(a.choices)}]" for a in self.axes.values())
        return f"Space({self.workload.family}: {axes})"

    # -- checks -------------------------------------------------------------------------
    def validate(self, schedule: Any) -> list[str]:
        """Every violation of ``schedule`` (empty when valid), naming axis and limit."""
        knobs = dict(schedule)
        out = []
        for name, axis in self.axes.items():
            if name not in knobs:
                out.append(f"missing knob {name!r} (choices: {list(axis.choices)})")
            elif not any(c == knobs[name] and type(c) is type(knobs[name]) for c in axis.choices):
                out.append(f"{name}={knobs[name]!r} is not one of its choices "
                           f"{_short(axis.choices)}" + (f": {axis.note}" if axis.note else ""))
        extra = sorted(set(knobs) - set(self.axes))
        if extra:
            out.append(f"unknown knob(s) {extra}; this space has {list(self.axes)}")
        return out or self.check(knobs)

    def check(self, knobs: Any) -> list[str]:
        """The constraints' violations of ``knobs`` (every axis present), without asking
        that each value be one of its axis's choices: for heuristics that step between
        grid points (the defaults' shrinking)."""
        out: list[str] = []
        for c in self.constraints:
            out += c.check(knobs)
        return out

    def is_valid(self, schedule: Any) -> bool:
        return not self.validate(schedule)

    def _partial_ok(self, knobs: dict[str, Any], position: int) -> bool:
        return all(not c.check(knobs) for c in self._ready.get(position, ()))

    def feasible(self, knobs: dict[str, Any], name: str) -> list[Any]:
        """The choices of axis ``name`` that, after the axes before it took the values in
        ``knobs``, still lead to a valid point: they pass the checks ready at ``name``,
        and the axes after it can be chosen too (forward checking, memoized on the
        values later checks read). Picking axis by axis among these never dead-ends."""
        pos = self._position[name]
        return [c for c in self.axes[name].choices
                if self._partial_ok({**knobs, name: c}, pos)
                and self._completable({**knobs, name: c}, pos)]

    def _completable(self, knobs: dict[str, Any], pos: int) -> bool:
        """Some choice of the axes after ``pos`` completes ``knobs`` (axes up to ``pos``,
        each passing its checks) into a valid point."""
        if pos + 1 == len(self.axes):
            return True
        key = (pos, tuple(knobs[n] for n in self._frontier[pos]))
        hit = self._completable_memo.get(key)
        if hit is None:
            after = self._names[pos + 1]
            hit = any(self._partial_ok({**knobs, after: c}, pos + 1)
                      and self._completable({**knobs, after: c}, pos + 1)
                      for c in self.axes[after].choices)
            self._completable_memo[key] = hit
        return hit

    # -- points -------------------------------------------------------------------------
    def default(self) -> Schedule:
        """The family's default heuristic point (computed once)."""
        if self._default_point is None:
            self._default_point = self._default()
        return self._default_point

    def sample(self, rng: random.Random | np.random.Generator | int | None = None) -> Schedule:
        """A uniformly chosen feasible choice per axis, in axis order (always valid)."""
        r = _rng(rng)
        knobs: dict[str, Any] = {}
        for name in self.axes:
            feasible = self.feasible(knobs, name)
            if not feasible:  # only when the space has no valid point at all
                return self.default()
            knobs[name] = feasible[r.randrange(len(feasible))]
        return Schedule(knobs)

    def neighbors(self, schedule: Any) -> list[Schedule]:
        """Valid points one step away along one axis. From a valid point only the
        constraints that read the changed axis can fail, so only those are checked."""
        base = dict(schedule)
        valid_base = self.is_valid(base)
        out = []
        for name, axis in self.axes.items():
            i = axis.index(base[name])
            for j in (i - 1, i + 1):
                if 0 <= j < len(axis.choices):
                    knobs = {**base, name: axis.choices[j]}
                    if (not any(c.check(knobs) for c in self._reading[name]) if valid_base
                            else self.is_valid(knobs)):
                        out.append(Schedule(knobs))
        return out

    def points(self) -> itertools.product:
        """Every raw point (valid or not), in axis order."""
        return itertools.product(*(a.choices for a in self.axes.values()))

    def raw_size(self) -> int:
        return math.prod(len(a.choices) for a in self.axes.values())

    def size(self, samples: int = 4000, seed: int = 0) -> SpaceSize:
        """The number of valid points: exact (by enumeration with pruning) for spaces of
        up to ``EXACT_LIMIT`` raw points, else an estimate (raw size x valid fraction of
        uniform raw samples), labelled as such."""
        names = list(self.axes)
        if self.raw_size() <= EXACT_LIMIT:
            return SpaceSize(self._count(names, 0, {}), True)
        r = random.Random(seed)
        valid = 0
        for _ in range(samples):
            knobs = {n: self.axes[n].choices[r.randrange(len(self.axes[n].choices))]
                     for n in names}
            valid += not any(c.check(knobs) for c in self.constraints)
        return SpaceSize(round(self.raw_size() * valid / samples), False)

    def _count(self, names: list[str], pos: int, knobs: dict[str, Any]) -> int:
        if pos == len(names):
            return 1
        total = 0
        for c in self.axes[names[pos]].choices:
            knobs[names[pos]] = c
            if self._partial_ok(knobs, pos):
                total += self._count(names, pos + 1, knobs)
        del knobs[names[pos]]
        return total

    def encode(self, schedule: Any) -> np.ndarray:
        """Numeric features of a point: each axis's value (or choice index if not
        numeric), in axis order. For the cost model."""
        knobs = dict(schedule)
        out = []
        for name, axis in self.axes.items():
            v = knobs[name]
            out.append(float(v) if isinstance(v, (int, float)) else float(axis.index(v)))
        return np.array(out, dtype=np.float64)

    def suggest(self, trial: Any) -> Schedule | None:
        """Map onto an Optuna trial, define-by-run: one categorical per axis. Returns
        None (and records why on the trial) when the point is infeasible."""
        knobs = {name: trial.suggest_categorical(name, list(axis.choices))
                 for name, axis in self.axes.items()}
        problems = self.validate(knobs)
        if problems:
            trial.set_user_attr("invalid", problems)
            return None
        return Schedule(knobs)

    def describe(self) -> str:
        lines = [f"{self.workload.describe()} on {self.target.name}: {self.size()} valid "
                 f"points ({self.raw_size():,} raw)"]
        for a in self.axes.values():
            lines.append(f"  {a.name:<10} {_short(a.choices):<40} {a.doc}")
        return "\n".join(lines)


def _short(choices: Sequence[Any]) -> str:
    items = list(choices)
    if len(items) <= 8:
        return str(items)
    return f"[{items[0]}, {items[1]}, ..., {items[-1]}] ({len(items)})"


def _rng(rng: Any) -> random.Random:
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, np.random.Generator):
        return random.Random(int(rng.integers(2**63)))
    return random.Random(rng)
