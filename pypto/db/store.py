"""``ScheduleStore``: the one interface to the schedule database.

The abstract methods are the whole contract a backend implements; everything else
(``add``, ``export_jsonl``, ``import_jsonl``) is built on them. ``SQLStore`` in
``pypto.db.sql`` implements it over SQLAlchemy (SQLite, PostgreSQL); the conformance
tests in ``tests/test_db_store.py`` run unchanged over both.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pypto.db.records import (
    STALE_AFTER,
    Claim,
    ClaimResult,
    CostModelBlob,
    Neighbor,
    Record,
    Run,
    Stats,
    Summary,
    TargetInfo,
    TaskProgress,
    WorkerInfo,
    WorkloadInfo,
)
from pypto.sim import MODEL_VERSION

if TYPE_CHECKING:
    from pypto.db.jsonl import ImportReport
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Schedule
    from pypto.targets import Target


_records_written = 0


def note_records_written() -> None:
    """Count a write of records by any store of this process (see ``write_epoch``)."""
    global _records_written
    _records_written += 1


def write_epoch() -> int:
    """How many times stores of this process have written records: a cache of lookups
    made over a store is valid while this number stays the same."""
    return _records_written


class ScheduleStore(abc.ABC):
    """Measured schedules per (workload, target, timing-model version), plus tuning runs
    and saved cost models.

    Contract, for every implementation:

    - Records are unique on (workload key, target key, schedule key, model version).
      ``add_records`` inserts a batch in one transaction: all of it or none of it. A
      record already present is left alone (``replace=False``: importing twice adds
      nothing) or overwritten (``replace=True``: a re-measurement).
    - Reads return frozen values (``Record``, ``WorkloadInfo``, ...), never live rows.
    - A store that does not exist yet reads as empty and is created by the first write.
      A store that exists but is not a PyPTO database, or has another schema version, is
      reported (``DatabaseError``) and never modified.
    - Every failure of the underlying database becomes ``DatabaseError``.
    - Safe for several processes writing at once (they wait, they do not fail).
    - Claims make parallel tuning exact: ``claim`` is atomic per (workload, target), so
      two workers never measure one schedule and measured plus in-flight trials never pass
      the budget. A record that lands ends the claim on its schedule. A claim whose
      heartbeat is older than ``stale_after`` seconds belongs to a dead worker: it neither
      counts nor blocks, and the next ``claim`` on the task removes it and reports it.

    Example:
        >>> import pypto
        >>> from pypto.db import Record, open_store
        >>> k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
        >>> c = k.lower(pypto.spec((64, 64), "float16"), pypto.spec((64, 64), "float16"))
        >>> store = open_store("sqlite://")          # in memory
        >>> wl, tgt = c.workloads[0], c.target
        >>> store.add(wl, tgt, [Record.measured(wl, tgt, c.schedules[0], cycles=900)])
        1
        >>> store.best(wl.key, tgt.key).cycles
        900
    """

    url: str

    # -- records ------------------------------------------------------------------------
    @abc.abstractmethod
    def add_records(self, records: Iterable[Record], *, workloads: Iterable[WorkloadInfo] = (),
                    targets: Iterable[TargetInfo] = (), replace: bool = False) -> int:
        """Store ``records`` (registering ``workloads`` and ``targets`` first); return how
        many were new. Every record's workload and target must be registered (now or
        before), else ``DatabaseError`` and nothing is stored."""

    @abc.abstractmethod
    def best(self, workload_key: str, target_key: str,
             model_version: str = MODEL_VERSION) -> Record | None:
        """The ``ok`` record with the fewest cycles (ties: the earliest), or None."""

    @abc.abstractmethod
    def iter_records(self, *, workload_key: str | None = None, target_key: str | None = None,
                     model_version: str | None = None, status: str | None = None,
                     limit: int | None = None) -> Iterator[Record]:
        """Records matching every given filter, fewest cycles first (failures last)."""

    @abc.abstractmethod
    def nearest(self, family_key: str, target_key: str, sizes: Sequence[int], *,
                model_version: str = MODEL_VERSION, limit: int = 3,
                exclude: str | None = None) -> list[Neighbor]:
        """Up to ``limit`` tuned workloads of family ``family_key`` with an ``ok`` record
        on ``target_key``, closest in ``log_distance`` to ``sizes`` first, each with its
        best record. ``exclude``: a workload key to leave out."""

    @abc.abstractmethod
    def workloads(self, prefix: str = "") -> list[WorkloadInfo]:
        """Registered workloads whose key starts with ``prefix``, by key."""

    @abc.abstractmethod
    def targets(self) -> list[TargetInfo]:
        """Registered targets, by name."""

    @abc.abstractmethod
    def summary(self) -> list[Summary]:
        """Per (workload, target, model version): record counts and best cycles."""

    @abc.abstractmethod
    def prune_stale(self, model_version: str = MODEL_VERSION) -> int:
        """Delete records measured under another timing-model version; return how many."""

    # -- runs ---------------------------------------------------------------------------
    @abc.abstractmethod
    def start_run(self, *, strategy: str, trials_asked: int, command: str = "", host: str = "",
                  workload: WorkloadInfo | None = None, target: TargetInfo | None = None,
                  pid: int | None = None) -> int:
        """Record that a tuning run started (``pid``: the process running it on ``host``;
        its heartbeat starts now); return its id (for ``Record.run_id``)."""

    @abc.abstractmethod
    def update_run(self, run_id: int, *, trials_done: int | None = None,
                   best_cycles: int | None = None, status: str | None = None) -> None:
        """Update a run's progress and heartbeat (with nothing else given, only the
        heartbeat); a status other than ``running`` also stamps its end."""

    @abc.abstractmethod
    def runs(self, limit: int | None = None) -> list[Run]:
        """Runs, most recent first."""

    @abc.abstractmethod
    def add_runs(self, runs: Sequence[Run]) -> list[int]:
        """The id here of each of ``runs``, from another database (their ``id`` is not
        used): one equal to a run here (strategy, command, host, start time, workload and
        target) is that run; any other is added as it is (status, counts, best cycles,
        start and end). The workloads and targets they name must be registered, else the
        run names none."""

    # -- claims (parallel tuning) -----------------------------------------------------------
    @abc.abstractmethod
    def claim(self, workload_key: str, target_key: str, schedule: Schedule, *,
              worker: WorkerInfo, budget: int | None = None, study: str = "",
              trial: int | None = None, stale_after: float = STALE_AFTER,
              model_version: str = MODEL_VERSION) -> ClaimResult:
        """Claim ``schedule`` for ``worker`` to measure, in one atomic step; the answer's
        ``ClaimOutcome`` is ``MEASURED`` if a record exists, ``BUSY`` if a live claim of
        another worker exists (a claim of the same worker is renewed: ``CLAIMED``), ``FULL``
        if ``budget`` trials are measured or in flight, else ``CLAIMED``. Also refreshes
        every claim of ``worker`` and removes the stale claims of the task
        (``ClaimResult.reaped``). The workload and target must be registered
        (``start_run`` or ``add_records``), else ``DatabaseError``."""

    @abc.abstractmethod
    def release(self, worker_id: str, schedule_keys: Iterable[str] | None = None) -> list[Claim]:
        """Remove the claims of ``worker_id`` (those on ``schedule_keys``, or all); return
        them."""

    @abc.abstractmethod
    def heartbeat(self, worker_id: str) -> int:
        """Mark every claim of ``worker_id`` alive now; return how many it holds."""

    @abc.abstractmethod
    def claims(self, workload_key: str | None = None, target_key: str | None = None,
               model_version: str = MODEL_VERSION) -> list[Claim]:
        """Current claims (stale ones included), oldest first."""

    @abc.abstractmethod
    def progress(self, workload_key: str, target_key: str, *,
                 stale_after: float = STALE_AFTER,
                 model_version: str = MODEL_VERSION) -> TaskProgress:
        """Measured and in-flight trials of (workload, target, model version), and the best;
        a snapshot of one moment."""

    # -- cost models --------------------------------------------------------------------
    @abc.abstractmethod
    def save_cost_model(self, model: CostModelBlob, target: TargetInfo) -> None:
        """Store (or replace) the cost model of (target, family, model version)."""

    @abc.abstractmethod
    def load_cost_model(self, target_key: str, family: str,
                        model_version: str = MODEL_VERSION) -> CostModelBlob | None:
        """The saved cost model of (target, family, model version), or None."""

    # -- the database itself ------------------------------------------------------------
    @abc.abstractmethod
    def stats(self) -> Stats:
        """Counts of everything (a store that does not exist yet: all zero)."""

    @abc.abstractmethod
    def get_meta(self, key: str) -> str | None:
        """A small bookkeeping value (e.g. which log files were imported), or None."""

    @abc.abstractmethod
    def set_meta(self, key: str, value: str) -> None:
        """Set a bookkeeping value."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections (the store can be used again afterwards)."""

    # -- conveniences built on the above -------------------------------------------------
    def add(self, workload: Workload, target: Target, records: Iterable[Record], *,
            replace: bool = False) -> int:
        """``add_records`` for records of one workload on one target."""
        return self.add_records(records, workloads=[WorkloadInfo.of(workload)],
                                targets=[TargetInfo.of(target)], replace=replace)

    def records(self, **filters: object) -> list[Record]:
        """``iter_records`` as a list."""
        return list(self.iter_records(**filters))  # type: ignore[arg-type]

    def workload(self, key_or_prefix: str) -> WorkloadInfo:
        """The one workload whose key starts with ``key_or_prefix``.

        Raises:
            DatabaseError: none, or several (it lists them).
        """
        from pypto.db.location import display_url
        from pypto.errors import DatabaseError

        where = display_url(self.url)
        prefix = key_or_prefix.strip().lower()
        found = self.workloads(prefix)
        if len(found) == 1:
            return found[0]
        if not found:
            raise DatabaseError(f"no workload with key {key_or_prefix!r} in {where} "
                                "(`pypto db list` shows the keys)")
        keys = ", ".join(w.key[:16] for w in found[:5])
        raise DatabaseError(f"workload key prefix {key_or_prefix!r} is ambiguous in {where}: "
                            f"{len(found)} workloads match ({keys}...); give more characters")

    def export_jsonl(self, path: str | Path) -> int:
        """Write every record as one JSON line (see ``pypto.db.jsonl``); return the count."""
        from pypto.db.jsonl import export_records

        return export_records(self, Path(path))

    def import_jsonl(self, path: str | Path, *, skip_bad: bool = False) -> ImportReport:
        """Read records written by ``export_jsonl``. A malformed line rejects the whole file
        (``DatabaseError`` naming every bad line) unless ``skip_bad``, which imports the
        good lines and reports the bad ones. Importing a file twice adds nothing."""
        from pypto.db.jsonl import import_records

        return import_records(self, Path(path), skip_bad=skip_bad)

    def __enter__(self) -> ScheduleStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
