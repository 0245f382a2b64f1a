"""Search strategies, each a small module looked up by name.

A strategy module defines ``Strategy`` (a subclass of ``base.Strategy``): it builds the
Optuna sampler and proposes the next point as an Optuna trial (ask), so every measured
point is an Optuna trial whatever picked it; the base class is the loop's whole interface
to Optuna (propose, tell, fail, enqueue). A new strategy (e.g. the cost model's) is a new
module plus one line in ``STRATEGIES``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from pypto.tuner import TuneError

if TYPE_CHECKING:
    from pypto.tuner.strategies.base import Strategy

#: name -> module under ``pypto.tuner.strategies``
STRATEGIES = {
    "random": "random_search",
    "tpe": "tpe",
    "grid": "grid",
    "gp": "gp",
    "cmaes": "cmaes",
    "model": "model",
}


def names() -> list[str]:
    return list(STRATEGIES)


def get_strategy(name: str, seed: int | None = None) -> Strategy:
    """The strategy called ``name``, seeded.

    Raises:
        TuneError: unknown name, or its optional dependencies are not installed.
    """
    module = STRATEGIES.get(name)
    if module is None:
        raise TuneError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    mod = importlib.import_module(f"pypto.tuner.strategies.{module}")
    return mod.Strategy(seed)
