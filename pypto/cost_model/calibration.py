"""How far a cost model's pick may be trusted over the default schedule, measured on
workloads it did not see (DESIGN §9, the lookup chain's ``model`` step).

A ranking model's scores order the schedules of one workload; they do not say how wrong
the top of that order can be on a shape the model never saw. A compile that has no
record of its workload cannot measure, so the pick departs from the default schedule
(the documented heuristic, a safe baseline) only when the model prefers a candidate by
at least a *departure margin*, calibrated here by cross-validation over workloads:

1. the workloads are split into ``folds`` groups (round robin in the given order); for
   each group a model is trained on the others;
2. for each held-out workload, what the pick rule would have done among its measured
   schedules: take the best-scored one, its margin ``score - score(default)``, and its
   gain ``default cycles / its cycles`` (below 1: slower than the default);
3. the margin is just above the largest margin of a held-out pick that lost more than
   ``loss`` (5%) to the default: on every held-out workload, a pick with at least that
   margin was within 5% of the default or better. Picks that lost nothing set no bound
   (margin 0: any candidate the model prefers to the default). With fewer than
   ``MIN_HELD_OUT`` held-out picks the margin is infinite: the default stays.

The rule is a bound learned from the held-out picks, not a probability; with few
workloads it is only as good as their variety, which is why the benchmark
``benchmarks/compile_pick.py`` re-measures it leave-one-workload-out. A workload whose
default was not measured tells nothing about departing from it and is left out.

Example:
    >>> import numpy as np
    >>> from pypto.cost_model.calibration import departure_margin
    >>> margin_of = lambda picks: departure_margin(picks, loss=0.05, min_picks=2)
    >>> margin_of([(0.5, 1.2), (0.3, 0.99), (0.8, 0.7), (0.1, 0.5)]) > 0.8
    True
    >>> margin_of([(0.5, 1.2), (0.3, 0.99)])
    0.0
    >>> departure_margin([(0.5, 1.2)])          # one held-out workload: no evidence
    inf
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

#: the loss to the default a held-out pick may have and still count as safe
LOSS = 0.05
#: cross-validation folds over workloads (fewer workloads: leave one out)
FOLDS = 5
#: held-out picks needed before any departure is allowed (one workload per fold): a bound
#: from fewer is no evidence (with the suite's four vector workloads, three held-out picks
#: set a margin that the fourth's pick cleared while 11% slower than its default)
MIN_HELD_OUT = FOLDS
#: added to the largest unsafe margin: a pick must beat it, not tie it
EPS = 1e-6


@dataclass(frozen=True)
class HeldOut:
    """One workload's data for calibration: feature rows, measured cycles, and the row of
    its default schedule (None: not measured)."""

    x: np.ndarray
    cycles: np.ndarray
    default_row: int | None


def departure_margin(picks: Sequence[tuple[float, float]], loss: float = LOSS,
                     min_picks: int = MIN_HELD_OUT) -> float:
    """The margin above every unsafe held-out pick: ``picks`` are (margin over the
    default, gain over the default) of each held-out workload's best-scored schedule; an
    unsafe pick has a gain below ``1 - loss``. 0.0 when none is unsafe; infinite (never
    depart) with fewer than ``min_picks`` picks."""
    if len(picks) < min_picks:
        return float("inf")
    unsafe = [m for m, g in picks if g < 1.0 - loss]
    return float(max(0.0, max(unsafe) + EPS)) if unsafe else 0.0


def held_out_picks(data: Sequence[HeldOut], fit: Callable[[list[tuple[np.ndarray, np.ndarray]]],
                                                           Callable[[np.ndarray], np.ndarray]],
                   folds: int = FOLDS) -> list[tuple[float, float]]:
    """(margin, gain) of each held-out workload's best-scored measured schedule, by a
    model ``fit`` on the workloads of the other folds (``fit`` returns a scoring
    function). Workloads without a measured default are not held out (but train)."""
    n = len(data)
    usable = [i for i, d in enumerate(data) if d.default_row is not None and len(d.cycles) >= 2]
    if n < 2 or not usable:
        return []
    k = min(folds, n)
    out: list[tuple[float, float]] = []
    for f in range(k):
        test = [i for i in usable if i % k == f]
        if not test:
            continue
        train = [(data[i].x, data[i].cycles) for i in range(n) if i % k != f]
        if not any(len(c) >= 2 for _, c in train):
            continue
        score = fit(train)
        for i in test:
            d = data[i]
            s = score(d.x)
            best = int(np.argmax(s))
            row = d.default_row
            assert row is not None
            out.append((float(s[best] - s[row]), float(d.cycles[row] / d.cycles[best])))
    return out
