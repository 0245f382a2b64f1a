"""``TuneOptions``: how to tune, as one frozen value.

The same value goes to ``tune_task`` (one worker, one task) and to the worker pool of
``--workers N`` (``pypto.tuner.workers``), which pickles it into each worker process.
What a caller observes or interrupts a run with (``on_start``, ``on_progress``,
``should_stop``) stays out of it: those are callables of one process, not settings.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TuneOptions:
    """Settings of a tuning run.

    Attributes:
        strategy: the strategy's name (``pypto.tuner.strategies.names()``).
        trials: measured trials each task should have in the database, whoever measures
            them (this worker, its peers, earlier runs).
        seed: seeds the strategy; a seeded single-process run is reproducible.
        early_stopping: stop a task after this many trials in a row without a better one,
            counted once a schedule has beaten the default.
        deadline: a ``time.perf_counter()`` value after which no trial starts.
        time_limit: seconds one measurement may take (it then counts as a ``timeout``).
        commit_every: records held back before one commit (1: each as it is measured).
        command: the command line, kept with the run in the database.
        host: the host name, kept with the run in the database.
        shared: ask the study in the shared Optuna storage of the database rather than
            one in memory; ``None``: only on PostgreSQL.
        warm: add the records a study lacks to it before the first ask.
        transfer: queue the best schedules of the nearest tuned shapes of the same family,
            adapted to this shape (``pypto.tuner.transfer``), as the first trials after
            the default.

    Example:
        >>> from dataclasses import replace
        >>> options = TuneOptions("tpe", 60, seed=0)
        >>> replace(options, early_stopping=10).early_stopping
        10
    """

    strategy: str
    trials: int
    seed: int | None = None
    early_stopping: int | None = None
    deadline: float | None = None
    time_limit: float | None = None
    commit_every: int = 1
    command: str = ""
    host: str = ""
    shared: bool | None = None
    warm: bool = True
    transfer: bool = True
