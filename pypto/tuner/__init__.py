"""``pypto tune``: search a workload's schedule space on the simulated NPU (DESIGN §7).

Modules load on use (Optuna only inside the strategies, the study and the loop):

- ``tasks``: the workloads a script runs, deduplicated, each with its space and default;
- ``measure``: lower + simulate one schedule, a status instead of an exception;
- ``strategies``: search strategies, small modules looked up by name; a strategy is the
  loop's only way to Optuna (propose, tell, fail, enqueue);
- ``options``: ``TuneOptions``, the settings of a run as one frozen value;
- ``loop``: one worker's propose / claim / measure / record / tell loop, resumable from the
  database, exact in its trial count however many workers share the task;
- ``ledger``: what a worker knows of its task's trials; ``result``: ``TaskResult``;
- ``study``: where the Optuna study lives (in memory, a journal file beside a SQLite
  database, or PostgreSQL) and how a dead worker's trial is failed and re-queued;
- ``liveness``: heartbeats of claims, dead processes on this host, dying with the parent;
- ``workers``: ``--workers N`` processes tuning each workload together;
- ``cli``: the ``pypto tune`` command's body (progress bars, tables).
"""

from __future__ import annotations

from pypto.errors import PyptoError


class TuneError(PyptoError):
    """A tuning run that cannot start: unknown strategy, missing dependency, bad option."""
