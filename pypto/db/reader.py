"""Compile-time lookups in a SQLite database through the standard library's ``sqlite3``.

A kernel's first compile in a process looks its workloads up; through SQLAlchemy that
costs importing it (about 0.4 s) before the first query. ``SQLiteReader`` answers the
reads of the lookup chain (``best``, ``iter_records``, ``nearest``, ``load_cost_model``,
``get_meta``) on a read-only connection instead, with the statements of
``pypto.db.queries`` written out for SQLite; ``tests/test_reader.py`` checks that it
answers as ``SQLStore`` does on the same files. Everything else (writes, PostgreSQL, a
file it does not recognise) goes through ``SQLStore``, which also says what is wrong
with a file ``open_reader`` declines.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from pypto.db.location import display_url, sqlite_path
from pypto.db.records import CostModelBlob, Neighbor, Record
from pypto.db.revision import SCHEMA_REVISION, VERSION_TABLE
from pypto.db.rows import nearest_of, to_record, utc
from pypto.sim import MODEL_VERSION

#: The tables a lookup reads: a file without one of them goes to ``SQLStore``.
TABLES = ("pypto_workloads", "pypto_targets", "pypto_records", "pypto_cost_models",
          "pypto_meta", VERSION_TABLE)

_RECORD = """SELECT r.id, r.schedule, r.cycles, r.status, r.error, r.model_version,
  r.source, r.pypto_version, r.run_id, r.created_at, r.updated_at, w.key, t.key, t.name,
  r.model_score{extra}
FROM pypto_records AS r JOIN pypto_workloads AS w ON r.workload_id = w.id
  JOIN pypto_targets AS t ON r.target_id = t.id"""
# queries.best_query: the ids from unique-key seeks, then one seek of ix_pypto_records_best
_BEST = _RECORD + """
WHERE r.workload_id = (SELECT id FROM pypto_workloads WHERE key = :wk)
  AND r.target_id = (SELECT id FROM pypto_targets WHERE key = :tk)
  AND r.model_version = :mv AND r.status = 'ok'
ORDER BY r.cycles, r.id LIMIT 1"""
BEST = _BEST.format(extra="")
NEIGHBOR = _BEST.format(extra=", w.key, w.family_key, w.family, w.spec, w.flops, w.sizes")
FAMILY = "SELECT key, sizes FROM pypto_workloads WHERE family_key = :fk"
# SQLStore.iter_records's order
RECORDS_ORDER = (" ORDER BY w.key, t.key, r.model_version, CASE WHEN r.status = 'ok' THEN 0 "
                 "ELSE 1 END, r.cycles, r.schedule_key")
COST_MODEL = """SELECT c.family, c.blob, c.format, c.metrics, c.samples, c.model_version,
  c.updated_at
FROM pypto_cost_models AS c JOIN pypto_targets AS t ON c.target_id = t.id
WHERE t.key = :tk AND c.family = :family AND c.model_version = :mv"""


class ScheduleReader(Protocol):
    """What the compile-time lookup chain reads: a ``ScheduleStore`` or a
    ``SQLiteReader``."""

    url: str

    def best(self, workload_key: str, target_key: str,
             model_version: str = MODEL_VERSION) -> Record | None: ...

    def iter_records(self, *, workload_key: str | None = None, target_key: str | None = None,
                     model_version: str | None = None, status: str | None = None,
                     limit: int | None = None) -> Iterator[Record]: ...

    def nearest(self, family_key: str, target_key: str, sizes: Sequence[int], *,
                model_version: str = MODEL_VERSION, limit: int = 3,
                exclude: str | None = None) -> list[Neighbor]: ...

    def load_cost_model(self, target_key: str, family: str,
                        model_version: str = MODEL_VERSION) -> CostModelBlob | None: ...

    def get_meta(self, key: str) -> str | None: ...

    def close(self) -> None: ...


def open_reader(url: str) -> SQLiteReader | None:
    """A reader of the SQLite file at ``url``; None when ``url`` is not a SQLite file that
    exists, cannot be opened read-only, or does not hold PyPTO's schema at this revision
    (``SQLStore`` then says what is wrong)."""
    path = sqlite_path(url)
    if path is None or not path.is_file():
        return None
    reader = SQLiteReader(url, path)
    try:
        if reader.usable():
            return reader
    except sqlite3.Error:
        pass
    reader.close()
    return None


class SQLiteReader:
    """Read-only lookups in one SQLite file of PyPTO's schema (see the module doc). Its
    methods answer as ``ScheduleStore``'s of the same names. Safe across threads (one
    lock) and forks (a child opens its own connection)."""

    def __init__(self, url: str, path: Path) -> None:
        self.url, self.path = url, path
        self.display = display_url(url)
        self._conn: sqlite3.Connection | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SQLiteReader({self.display!r})"

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            # mode=ro: reading never changes the file (nor its journal mode); a file in a
            # read-only directory without its WAL index opens as immutable
            from pypto.db.location import read_only_uri

            uri = read_only_uri(self.path) or f"{self.path.absolute().as_uri()}?mode=ro"
            self._conn = sqlite3.connect(uri, uri=True,
                                         timeout=60, check_same_thread=False,
                                         isolation_level=None)
            self._pid = os.getpid()
        return self._conn

    def _execute(self, sql: str, params: dict[str, Any]) -> list[Any]:
        with self._lock:
            return self._connection().execute(sql, params).fetchall()

    def _rows(self, sql: str, params: dict[str, Any]) -> list[Any]:
        try:
            return self._execute(sql, params)
        except sqlite3.Error as e:
            from pypto.db.engine import database_error  # SQLAlchemy, on this error path only

            raise database_error(self.display, e) from None

    def usable(self) -> bool:
        """Our tables are there, at this code's schema revision. Raises ``sqlite3.Error``
        when the file cannot be read."""
        names = {row[0] for row in self._execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'", {})}
        if not names.issuperset(TABLES):
            return False
        versions = [row[0] for row in self._execute(f"SELECT version_num FROM {VERSION_TABLE}",
                                                    {})]
        return versions == [SCHEMA_REVISION]

    def best(self, workload_key: str, target_key: str,
             model_version: str = MODEL_VERSION) -> Record | None:
        rows = self._rows(BEST, {"wk": workload_key, "tk": target_key, "mv": model_version})
        return to_record(rows[0]) if rows else None

    def iter_records(self, *, workload_key: str | None = None, target_key: str | None = None,
                     model_version: str | None = None, status: str | None = None,
                     limit: int | None = None) -> Iterator[Record]:
        filters = {"w.key": workload_key, "t.key": target_key,
                   "r.model_version": model_version, "r.status": status}
        where = [f"{column} = :p{i}" for i, (column, value) in enumerate(filters.items())
                 if value is not None]
        params = {f"p{i}": value for i, value in enumerate(filters.values())
                  if value is not None}
        sql = _RECORD.format(extra="") + (" WHERE " + " AND ".join(where) if where else "") \
            + RECORDS_ORDER
        if limit is not None:
            sql += " LIMIT :limit"
            params["limit"] = limit
        for row in self._rows(sql, params):
            yield to_record(row)

    def nearest(self, family_key: str, target_key: str, sizes: Sequence[int], *,
                model_version: str = MODEL_VERSION, limit: int = 3,
                exclude: str | None = None) -> list[Neighbor]:
        family = [tuple(row) for row in self._rows(FAMILY, {"fk": family_key})]

        def best_of(key: str) -> Any:
            rows = self._rows(NEIGHBOR, {"wk": key, "tk": target_key, "mv": model_version})
            return rows[0] if rows else None

        return nearest_of(family, sizes, limit, exclude, best_of)

    def load_cost_model(self, target_key: str, family: str,
                        model_version: str = MODEL_VERSION) -> CostModelBlob | None:
        rows = self._rows(COST_MODEL, {"tk": target_key, "family": family,
                                       "mv": model_version})
        if not rows:
            return None
        row = rows[0]
        return CostModelBlob(target_key, row[0], bytes(row[1]), row[2], row[3], row[4], row[5],
                             utc(row[6]))

    def get_meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM pypto_meta WHERE key = :key", {"key": key})
        return rows[0][0] if rows else None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None
