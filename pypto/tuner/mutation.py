"""Answers to a stuck search: an unmeasured mutation of one of the best schedules so far.

A sampler that proposes a schedule measured already (a converged TPE repeats its best
point) or keeps proposing infeasible ones gets no new information from that proposal. The
loop (``pypto.tuner.loop``) then queues the next trial itself, and what it queues should
keep the search where it is good: a short walk over ``Space.neighbors`` (each step valid by
the space's constraints, the one validity check) from the incumbent or one of the top-k,
ending on a point nobody measured. Only when no unmeasured point lies within the walk's
reach of the top-k is a uniform valid sample taken; the caller counts which it was.

    >>> import random
    >>> from pypto.schedule_space import Schedule
    >>> class Line:                      # a toy space: the integers 0..9
    ...     def neighbors(self, s):
    ...         x = s["x"]
    ...         return [Schedule({"x": y}) for y in (x - 1, x + 1) if 0 <= y <= 9]
    ...     def sample(self, rng):
    ...         return Schedule({"x": rng.randrange(10)})
    >>> best = [Schedule({"x": 5})]
    >>> measured = {Schedule({"x": x}).key for x in (4, 5, 6)}
    >>> m = next_point(Line(), best, measured, random.Random(0))
    >>> m.kind, m.schedule["x"] in (2, 3, 7, 8)
    ('mutated', True)
"""

from __future__ import annotations

import random
from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pypto.schedule_space import Schedule

#: the top-k schedules a mutation starts from
TOP_K = 3
#: the longest walk over ``Space.neighbors`` (steps)
MAX_STEPS = 3
#: random walks tried before the rings around the top-k are searched in full
WALKS = 24
#: uniform samples tried before giving up when the fallback is needed
UNIFORM_TRIES = 200


class NeighborSpace(Protocol):
    """What a mutation needs of a space (``pypto.schedule_space.Space`` is one)."""

    def neighbors(self, schedule: Schedule) -> list[Schedule]: ...

    def sample(self, rng: random.Random) -> Schedule: ...


@dataclass(frozen=True)
class NextPoint:
    """A point to queue: ``kind`` is ``mutated`` (a neighbour walk from one of the best) or
    ``uniform`` (no unmeasured point within reach of them)."""

    schedule: Schedule
    kind: str


def mutate(space: NeighborSpace, elites: Sequence[Schedule], measured: Container[str],
           rng: random.Random, *, max_steps: int = MAX_STEPS,
           walks: int = WALKS) -> Schedule | None:
    """An unmeasured point 1 to ``max_steps`` neighbour steps from one of ``elites`` (best
    first; the first is chosen most often), or None if there is none within that reach.

    First ``walks`` random walks (a start among the elites, a length, a random neighbour at
    each step); if every one ends on a measured point, the rings around the elites are
    searched in full, nearest first, so None means there truly is none."""
    if not elites:
        return None
    weights = [1.0 / (rank + 1) for rank in range(len(elites))]
    for _ in range(walks):
        point = rng.choices(elites, weights)[0]
        for _ in range(rng.randint(1, max_steps)):
            around = space.neighbors(point)
            if not around:
                break
            point = around[rng.randrange(len(around))]
        if point.key not in measured:
            return point
    return _nearest_unmeasured(space, elites, measured, rng, max_steps)


def _nearest_unmeasured(space: NeighborSpace, elites: Sequence[Schedule],
                        measured: Container[str], rng: random.Random,
                        max_steps: int) -> Schedule | None:
    """Breadth first from the elites: a random unmeasured point of the nearest ring that
    has one, or None within ``max_steps``."""
    seen = {e.key for e in elites}
    ring = list(elites)
    for _ in range(max_steps):
        following: list[Schedule] = []
        for point in ring:
            for n in space.neighbors(point):
                if n.key not in seen:
                    seen.add(n.key)
                    following.append(n)
        fresh = [n for n in following if n.key not in measured]
        if fresh:
            return fresh[rng.randrange(len(fresh))]
        ring = following
    return None


def uniform(space: NeighborSpace, measured: Container[str], rng: random.Random,
            tries: int = UNIFORM_TRIES) -> Schedule | None:
    """A uniformly sampled valid point not measured yet (None if none turned up)."""
    for _ in range(tries):
        s = space.sample(rng)
        if s.key not in measured:
            return s
    return None


def next_point(space: NeighborSpace, elites: Sequence[Schedule], measured: Container[str],
               rng: random.Random) -> NextPoint | None:
    """What to queue when the sampler is stuck: a mutation of ``elites`` (best first), else
    a uniform valid sample; None if neither finds an unmeasured point."""
    mutated = mutate(space, elites[:TOP_K], measured, rng)
    if mutated is not None:
        return NextPoint(mutated, "mutated")
    sampled = uniform(space, measured, rng)
    return NextPoint(sampled, "uniform") if sampled is not None else None
