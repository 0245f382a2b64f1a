"""Proposals made while the previous schedule is measured.

A model-based sampler (TPE over hundreds of trials) takes about as long to propose a
point as the simulator takes to measure one, and the measurement runs in compiled code
that releases the GIL. So once the loop has decided to measure a schedule, the next
proposal is computed on a second thread, as tuners that keep a device busy do (the
sampler then sees the schedule being measured as a running trial, as with parallel
workers). For a seeded run to stay reproducible the proposal always sees the same
study: the loop joins it before it tells the measured result.

Only a worker's own in-memory study is asked ahead: a shared study (``--workers``,
PostgreSQL) has its parallelism in its workers, and a trial asked ahead there would be one
more running trial that the others see, and one to give back when the budget is spent.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

P = TypeVar("P")   # what ``propose`` returns (in the loop: a strategy's ``Proposal``)


class Proposer(Generic[P]):
    """``next()`` is the next proposal: the one computed ahead by ``ahead()`` if any,
    else one computed now. ``close()`` returns a proposal made ahead but never taken."""

    def __init__(self, propose: Callable[[], P], enabled: bool = True) -> None:
        self._propose, self.enabled = propose, enabled
        self._pool: ThreadPoolExecutor | None = None
        self._ahead: Future[P] | None = None

    def ahead(self) -> None:
        """Start computing the next proposal on the proposer's thread."""
        if self.enabled and self._ahead is None:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="pypto-propose")
            self._ahead = self._pool.submit(self._propose)

    def wait(self) -> None:
        """Let the proposal made ahead finish (before the study changes)."""
        if self._ahead is not None:
            self._ahead.exception()

    def next(self) -> P:
        """The proposal made ahead, else a new one (made here, now)."""
        if self._ahead is None:
            return self._propose()
        ahead, self._ahead = self._ahead, None
        return ahead.result()

    def close(self) -> P | None:
        """Stop; the proposal made ahead and not taken, if any (its trial is to be
        told as not measured)."""
        left = None
        if self._ahead is not None:
            ahead, self._ahead = self._ahead, None
            left = ahead.result() if ahead.exception() is None else None
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        return left
