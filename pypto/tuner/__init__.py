"""``pypto tune``: search a workload's schedule space on the simulated NPU (DESIGN §7).

Modules load on use (Optuna only inside the strategies and the loop):

- ``tasks``: the workloads a script runs, deduplicated, each with its space and default;
- ``measure``: lower + simulate one schedule, a status instead of an exception;
- ``strategies``: search strategies, small modules looked up by name;
- ``loop``: the ask/tell loop, resumable from the database, committing as it goes;
- ``cli``: the ``pypto tune`` command's body (progress bars, tables).

Not yet: ``--workers`` (several processes, Optuna JournalStorage) and PostgreSQL-shared
studies; a single process tunes one workload at a time with an in-memory Optuna study.
"""

from __future__ import annotations

from pypto.errors import PyptoError


class TuneError(PyptoError):
    """A tuning run that cannot start: unknown strategy, missing dependency, bad option."""
