"""The schedule database: every measured schedule, looked up when a kernel compiles.

``open_store(url)`` gives a ``ScheduleStore`` (SQLite or PostgreSQL through SQLAlchemy,
which loads only then). ``url`` defaults to ``$PYPTO_DB``, else the database
``pypto.db.location`` finds (the nearest ``tuning_logs/pypto.db``, else the per-user one);
compile-time lookups read SQLite through ``pypto.db.reader``. See ``pypto.db.store``
for the interface, ``pypto.compile.resolver`` for the compile-time chain over it and
``pypto.db.jsonl`` for the shareable JSON-lines logs.

Example:
    >>> from pypto.db import open_store
    >>> store = open_store("sqlite://")   # in memory
    >>> store.stats().records
    0
"""

from __future__ import annotations

from pypto.db.location import default_url, display_url, resolve_url
from pypto.db.records import (
    STALE_AFTER,
    STATUSES,
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
from pypto.db.store import ScheduleStore
from pypto.errors import DatabaseError

__all__ = [
    "STALE_AFTER", "STATUSES", "Claim", "ClaimResult", "CostModelBlob", "DatabaseError",
    "Neighbor", "Record", "Run", "ScheduleStore", "Stats", "Summary", "TargetInfo",
    "TaskProgress", "WorkerInfo", "WorkloadInfo", "default_url", "display_url", "open_store",
    "resolve_url",
]


def open_store(url: str | None = None) -> ScheduleStore:
    """The schedule store at ``url`` (a SQLAlchemy URL or a SQLite file path), else
    ``$PYPTO_DB``, else the database ``pypto.db.location.locate`` finds. Opening touches
    nothing: a read of a database that does not exist returns nothing; the first write
    creates it.

    Raises:
        DatabaseError: ``url`` is not a SQLite or PostgreSQL URL.
    """
    from pypto.db.sql import SQLStore

    return SQLStore(resolve_url(url))
