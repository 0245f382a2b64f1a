"""``SQLStore``: the ``ScheduleStore`` over SQLAlchemy 2 (SQLite and PostgreSQL).

SQLAlchemy stays in this package. One transaction context (``_tx``) turns every database
failure into ``DatabaseError``; rows become frozen values before they leave. Upserts use
each dialect's ``INSERT ... ON CONFLICT``. Engines (WAL and ``BEGIN IMMEDIATE`` on
SQLite) and the schema check are in ``pypto.db.engine``; the hot statements in
``pypto.db.queries``. On PostgreSQL, schema creation is serialized by an advisory lock.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import time
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    case,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from pypto.db import claims as cl
from pypto.db import models as m
from pypto.db import queries as qs
from pypto.db.engine import (
    ADVISORY_LOCK,
    database_error,
    make_engine,
    other_tables,
    schema_state,
    use_wal,
)
from pypto.db.location import display_url, mask_urls, sqlite_path
from pypto.db.records import (
    RUN_STATUSES,
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
from pypto.db.rows import nearest_of
from pypto.db.store import ScheduleStore, note_records_written
from pypto.errors import DatabaseError
from pypto.schedule_space.schedule import Schedule
from pypto.sim import MODEL_VERSION

CHUNK = 500  # keys per IN (...) list
_live: weakref.WeakSet[SQLStore] = weakref.WeakSet()

class SQLStore(ScheduleStore):
    """A ``ScheduleStore`` at a SQLAlchemy URL (``sqlite:///path``, ``postgresql+psycopg://``).

    Opening is lazy: nothing is touched until the first read or write. Reads of a SQLite
    file that does not exist return nothing and do not create it.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.display = display_url(url)
        try:
            parsed = make_url(url)
        except ArgumentError:
            raise DatabaseError(f"{self.display!r} is not a database URL; use e.g. "
                                "sqlite:///tuning_logs/pypto.db or "
                                "postgresql+psycopg://user@host/db") from None
        self.dialect = parsed.get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise DatabaseError(f"database {self.display}: PyPTO stores schedules in SQLite or "
                                f"PostgreSQL, not {self.dialect}")
        self._path = sqlite_path(url)
        self._engine: Engine | None = None
        self._ready = False
        _live.add(self)

    def __repr__(self) -> str:
        return f"SQLStore({self.display!r})"

    # -- connections ----------------------------------------------------------------------
    def _get_engine(self) -> Engine:
        if self._engine is None:
            self._engine = make_engine(self.url, self.dialect)
        return self._engine

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[Connection]:
        """One transaction; database failures become ``DatabaseError``."""
        try:
            with self._get_engine().connect() as conn:
                if write:
                    conn.execution_options(pypto_write=True)
                with conn.begin():
                    yield conn
        except (SQLAlchemyError, sqlite3.Error) as e:
            raise database_error(self.display, e) from None

    def _exists(self, *, write: bool) -> bool:
        """Is the schema there (checked once)? A write creates it; a read of a database
        without it says False without creating anything."""
        if self._ready:
            return True
        if not write and self._path is not None and not self._path.exists():
            return False
        if write and self._path is not None:
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise DatabaseError(f"cannot create the directory of database {self.display}: "
                                    f"{e.strerror or e}") from None
        with self._tx(write=write) as conn:
            if write and self.dialect == "postgresql":
                conn.execute(select(func.pg_advisory_xact_lock(ADVISORY_LOCK)))
            state = schema_state(conn, self.display)
            if state == "missing" and write:
                foreign = other_tables(conn) if self._path is not None else []
                if foreign:
                    raise DatabaseError(
                        f"{self.display} is another program's SQLite database (tables "
                        f"{', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}): "
                        "PyPTO will not add its tables to it; choose another file with "
                        "--db or PYPTO_DB")
                m.Base.metadata.create_all(conn)
                conn.execute(m.Base.metadata.tables[m.VERSION_TABLE].insert(),
                             {"version_num": m.SCHEMA_REVISION})
                state = "created"
        if state == "created":
            logging.getLogger(__name__).info("created PyPTO's tables in %s", self.display)
        if state == "created" and self._path is not None:
            use_wal(self._get_engine())
        self._ready = state in ("ready", "created")
        return self._ready

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()
        self._engine, self._ready = None, False

    def _dispose_after_fork(self) -> None:
        if self._engine is not None:
            self._engine.dispose(close=False)

    # -- records --------------------------------------------------------------------------
    def add_records(self, records: Iterable[Record], *, workloads: Iterable[WorkloadInfo] = (),
                    targets: Iterable[TargetInfo] = (), replace: bool = False) -> int:
        unique: dict[tuple[str, str, str, str], tuple[Record, str]] = {}
        encoded: dict[int, tuple[str, str]] = {}  # a schedule shared by records: JSON once
        for r in records:
            text, key = encoded.get(id(r.schedule)) or encoded.setdefault(
                id(r.schedule), (r.schedule.to_json(), r.schedule_key))
            unique[(r.workload_key, r.target_key, key, r.model_version)] = (r, text)
        workloads, targets = list(workloads), list(targets)
        if not unique and not workloads and not targets:
            return 0
        self._exists(write=True)
        with self._tx(write=True) as conn:
            self._put_workloads(conn, workloads)
            self._put_targets(conn, targets)
            wids = self._ids(conn, m.WorkloadRow, {k[0] for k in unique})
            tids = self._ids(conn, m.TargetRow, {k[1] for k in unique})
            for kind, want, have in (("workload", {k[0] for k in unique}, wids),
                                     ("target", {k[1] for k in unique}, tids)):
                missing = sorted(want - set(have))
                if missing:
                    raise DatabaseError(f"{len(missing)} record(s) name an unknown {kind} "
                                        f"({missing[0][:12]}...): pass it in {kind}s=")
            now = datetime.now(UTC)
            rows = [{"workload_id": wids[wk], "target_id": tids[tk], "schedule": text,
                     "schedule_key": sk, "status": r.status, "cycles": r.cycles,
                     "error": r.error, "model_version": mv, "pypto_version": r.pypto_version,
                     "source": r.source, "run_id": r.run_id,
                     "created_at": r.created_at or now, "updated_at": now,
                     "model_score": r.model_score}
                    for (wk, tk, sk, mv), (r, text) in unique.items()]
            if not rows:
                return 0
            stmt = self._insert(m.RecordRow)
            conflict = ["workload_id", "target_id", "schedule_key", "model_version"]
            if replace:
                stmt = stmt.on_conflict_do_update(index_elements=conflict, set_={
                    c: stmt.excluded[c] for c in ("schedule", "status", "cycles", "error",
                                                  "pypto_version", "source", "run_id",
                                                  "updated_at", "model_score")})
            else:
                stmt = stmt.on_conflict_do_nothing(index_elements=conflict)
            result = conn.execute(stmt.returning(m.RecordRow.id), rows)
            written = len(result.all())
            cl.end_claims_of(conn, rows)
        _records_changed()
        return written

    def best(self, workload_key: str, target_key: str,
             model_version: str = MODEL_VERSION) -> Record | None:
        if not self._exists(write=False):
            return None
        with self._tx(write=False) as conn:
            row = conn.execute(qs.BEST, {"wk": workload_key, "tk": target_key,
                                       "mv": model_version}).first()
        return qs.to_record(row) if row is not None else None

    def iter_records(self, *, workload_key: str | None = None, target_key: str | None = None,
                     model_version: str | None = None, status: str | None = None,
                     limit: int | None = None) -> Iterator[Record]:
        if not self._exists(write=False):
            return
        q = qs.joined(select(*qs.RECORD_COLUMNS))
        for column, value in ((m.WorkloadRow.key, workload_key), (m.TargetRow.key, target_key),
                              (m.RecordRow.model_version, model_version),
                              (m.RecordRow.status, status)):
            if value is not None:
                q = q.where(column == value)
        q = q.order_by(m.WorkloadRow.key, m.TargetRow.key, m.RecordRow.model_version,
                       case((m.RecordRow.status == "ok", 0), else_=1), m.RecordRow.cycles,
                       m.RecordRow.schedule_key)
        if limit is not None:
            q = q.limit(limit)
        with self._tx(write=False) as conn:
            for row in conn.execution_options(yield_per=2000).execute(q):
                yield qs.to_record(row)

    def nearest(self, family_key: str, target_key: str, sizes: Sequence[int], *,
                model_version: str = MODEL_VERSION, limit: int = 3,
                exclude: str | None = None) -> list[Neighbor]:
        if not self._exists(write=False):
            return []
        with self._tx(write=False) as conn:
            family = [tuple(row) for row in conn.execute(qs.FAMILY, {"fk": family_key}).all()]
            return nearest_of(family, sizes, limit, exclude, lambda key: conn.execute(
                qs.NEIGHBOR, {"wk": key, "tk": target_key, "mv": model_version}).first())

    def workloads(self, prefix: str = "") -> list[WorkloadInfo]:
        if not self._exists(write=False):
            return []
        q = select(*qs.WORKLOAD_COLUMNS).order_by(m.WorkloadRow.key)
        if prefix:
            q = q.where(m.WorkloadRow.key.startswith(prefix, autoescape=True))
        with self._tx(write=False) as conn:
            return [qs.to_workload(row) for row in conn.execute(q)]

    def targets(self) -> list[TargetInfo]:
        if not self._exists(write=False):
            return []
        t = m.TargetRow
        with self._tx(write=False) as conn:
            rows = conn.execute(select(t.name, t.key, t.descriptor).order_by(t.name, t.key))
            return [TargetInfo(*row) for row in rows]

    def summary(self) -> list[Summary]:
        if not self._exists(write=False):
            return []
        r, t = m.RecordRow, m.TargetRow
        q = (qs.joined(select(*qs.WORKLOAD_COLUMNS, t.name, t.key, r.model_version, func.count(),
                            func.sum(case((r.status == "ok", 1), else_=0)), func.min(r.cycles)))
             .group_by(m.WorkloadRow.id, t.id, r.model_version)
             .order_by(m.WorkloadRow.key, t.name, r.model_version))
        with self._tx(write=False) as conn:
            return [Summary(qs.to_workload(row[:6]), row[6], row[7], row[8], int(row[9]),
                            int(row[10] or 0), row[11]) for row in conn.execute(q)]

    def prune_stale(self, model_version: str = MODEL_VERSION) -> int:
        if not self._exists(write=False):
            return 0
        with self._tx(write=True) as conn:
            result = conn.execute(delete(m.RecordRow)
                                  .where(m.RecordRow.model_version != model_version))
            count = result.rowcount
        _records_changed()
        return count

    # -- runs -----------------------------------------------------------------------------
    def start_run(self, *, strategy: str, trials_asked: int, command: str = "", host: str = "",
                  workload: WorkloadInfo | None = None, target: TargetInfo | None = None,
                  pid: int | None = None) -> int:
        self._exists(write=True)
        with self._tx(write=True) as conn:
            self._put_workloads(conn, [workload] if workload else [])
            self._put_targets(conn, [target] if target else [])
            wid = self._ids(conn, m.WorkloadRow, {workload.key}).get(workload.key) \
                if workload else None
            tid = self._ids(conn, m.TargetRow, {target.key}).get(target.key) if target else None
            return int(conn.execute(insert(m.RunRow).returning(m.RunRow.id), {
                "strategy": strategy, "status": "running", "trials_asked": trials_asked,
                "trials_done": 0, "command": mask_urls(command), "host": host, "workload_id": wid,
                "target_id": tid, "started_at": datetime.now(UTC), "pid": pid,
                "heartbeat": time.time()}).scalar_one())

    def update_run(self, run_id: int, *, trials_done: int | None = None,
                   best_cycles: int | None = None, status: str | None = None) -> None:
        if status is not None and status not in RUN_STATUSES:
            raise DatabaseError(f"run status {status!r} must be one of {RUN_STATUSES}")
        values: dict[str, Any] = {"heartbeat": time.time()}
        if trials_done is not None:
            values["trials_done"] = trials_done
        if best_cycles is not None:
            values["best_cycles"] = best_cycles
        if status is not None:
            values["status"] = status
            if status != "running":
                values["finished_at"] = datetime.now(UTC)
        self._exists(write=True)
        with self._tx(write=True) as conn:
            found = conn.execute(update(m.RunRow).where(m.RunRow.id == run_id).values(**values))
            if found.rowcount == 0:
                raise DatabaseError(f"no run with id {run_id} in {self.display}")

    def runs(self, limit: int | None = None) -> list[Run]:
        if not self._exists(write=False):
            return []
        run, w, t = m.RunRow, m.WorkloadRow, m.TargetRow
        q = (select(run.id, run.strategy, run.status, run.trials_asked, run.trials_done,
                    run.best_cycles, run.command, run.host, w.key, t.key, run.started_at,
                    run.finished_at, run.pid, run.heartbeat)
             .outerjoin(w, run.workload_id == w.id).outerjoin(t, run.target_id == t.id)
             .order_by(run.id.desc()))
        if limit is not None:
            q = q.limit(limit)
        with self._tx(write=False) as conn:
            return [Run(*row[:10], qs.utc(row[10]), qs.utc(row[11]), row[12], row[13])
                    for row in conn.execute(q)]

    def add_runs(self, runs: Sequence[Run]) -> list[int]:
        if not runs:
            return []
        for r in runs:
            if r.status not in RUN_STATUSES:
                raise DatabaseError(f"run status {r.status!r} must be one of {RUN_STATUSES}")
        self._exists(write=True)

        def same(r: Run) -> tuple[Any, ...]:
            return (r.strategy, mask_urls(r.command), r.host, r.started_at, r.workload_key,
                    r.target_key)

        here = {same(r): r.id for r in self.runs()}
        out: list[int] = []
        with self._tx(write=True) as conn:
            wids = self._ids(conn, m.WorkloadRow, {r.workload_key for r in runs
                                                   if r.workload_key})
            tids = self._ids(conn, m.TargetRow, {r.target_key for r in runs if r.target_key})
            for r in runs:
                key = same(r)
                if key not in here:
                    here[key] = int(conn.execute(insert(m.RunRow).returning(m.RunRow.id), {
                        "strategy": r.strategy, "status": r.status,
                        "trials_asked": r.trials_asked, "trials_done": r.trials_done,
                        "best_cycles": r.best_cycles, "command": mask_urls(r.command),
                        "host": r.host, "workload_id": wids.get(r.workload_key or ""),
                        "target_id": tids.get(r.target_key or ""),
                        "started_at": r.started_at or datetime.now(UTC),
                        "finished_at": r.finished_at}).scalar_one())
                out.append(here[key])
        return out

    # -- claims ---------------------------------------------------------------------------
    def claim(self, workload_key: str, target_key: str, schedule: Schedule, *,
              worker: WorkerInfo, budget: int | None = None, study: str = "",
              trial: int | None = None, stale_after: float = STALE_AFTER,
              model_version: str = MODEL_VERSION) -> ClaimResult:
        self._exists(write=True)
        with self._tx(write=True) as conn:
            return cl.claim(conn, self.dialect, workload_key, target_key, schedule,
                            worker=worker, budget=budget, study=study, trial=trial,
                            stale_after=stale_after, mv=model_version)

    def release(self, worker_id: str, schedule_keys: Iterable[str] | None = None) -> list[Claim]:
        if not self._exists(write=False):
            return []
        with self._tx(write=True) as conn:
            return cl.release(conn, worker_id, schedule_keys)

    def heartbeat(self, worker_id: str) -> int:
        if not self._exists(write=False):
            return 0
        with self._tx(write=True) as conn:
            return cl.heartbeat(conn, worker_id)

    def claims(self, workload_key: str | None = None, target_key: str | None = None,
               model_version: str = MODEL_VERSION) -> list[Claim]:
        if not self._exists(write=False):
            return []
        with self._tx(write=False) as conn:
            return cl.listing(conn, workload_key, target_key, model_version)

    def progress(self, workload_key: str, target_key: str, *, stale_after: float = STALE_AFTER,
                 model_version: str = MODEL_VERSION) -> TaskProgress:
        if not self._exists(write=False):
            return TaskProgress()
        with self._tx(write=False) as conn:
            ids = self._ids(conn, m.WorkloadRow, {workload_key}), \
                self._ids(conn, m.TargetRow, {target_key})
            if workload_key not in ids[0] or target_key not in ids[1]:
                return TaskProgress()
            return cl.progress(conn, ids[0][workload_key], ids[1][target_key], model_version,
                               time.time() - stale_after)

    # -- cost models ----------------------------------------------------------------------
    def save_cost_model(self, model: CostModelBlob, target: TargetInfo) -> None:
        if model.target_key != target.key:
            raise DatabaseError(f"cost model is for target {model.target_key[:12]}... but "
                                f"target= is {target.key[:12]}...")
        self._exists(write=True)
        with self._tx(write=True) as conn:
            self._put_targets(conn, [target])
            tid = self._ids(conn, m.TargetRow, {target.key})[target.key]
            stmt = self._insert(m.CostModelRow).values(
                target_id=tid, family=model.family, model_version=model.model_version,
                format=model.format, blob=model.blob, metrics=model.metrics,
                samples=model.samples, updated_at=datetime.now(UTC))
            conn.execute(stmt.on_conflict_do_update(
                index_elements=["target_id", "family", "model_version"],
                set_={c: stmt.excluded[c] for c in ("format", "blob", "metrics", "samples",
                                                    "updated_at")}))
        _records_changed()  # compile-time picks made with the old model are stale too

    def load_cost_model(self, target_key: str, family: str,
                        model_version: str = MODEL_VERSION) -> CostModelBlob | None:
        if not self._exists(write=False):
            return None
        c = m.CostModelRow
        q = (select(c.family, c.blob, c.format, c.metrics, c.samples, c.model_version,
                    c.updated_at).join(m.TargetRow, c.target_id == m.TargetRow.id)
             .where(m.TargetRow.key == target_key, c.family == family,
                    c.model_version == model_version))
        with self._tx(write=False) as conn:
            row = conn.execute(q).first()
        if row is None:
            return None
        return CostModelBlob(target_key, row[0], bytes(row[1]), row[2], row[3], row[4], row[5],
                             qs.utc(row[6]))

    # -- the database itself --------------------------------------------------------------
    def stats(self) -> Stats:
        if not self._exists(write=False):
            return Stats(self.display, exists=False)
        r = m.RecordRow
        with self._tx(write=False) as conn:
            def count(row_type: Any) -> int:
                return int(conn.execute(select(func.count()).select_from(row_type)).scalar_one())

            counts = [count(t) for t in (m.WorkloadRow, m.TargetRow, r, m.RunRow,
                                         m.CostModelRow)]
            by_status = conn.execute(select(r.status, func.count()).group_by(r.status)
                                     .order_by(r.status)).all()
            by_version = conn.execute(select(r.model_version, func.count())
                                      .group_by(r.model_version).order_by(r.model_version)).all()
        workloads, targets, records, runs, cost_models = counts
        return Stats(self.display, True, workloads, targets, records, runs, cost_models,
                     by_status=tuple((s, int(n)) for s, n in by_status),
                     by_model_version=tuple((v, int(n)) for v, n in by_version))

    def get_meta(self, key: str) -> str | None:
        if not self._exists(write=False):
            return None
        with self._tx(write=False) as conn:
            return conn.execute(select(m.MetaRow.value).where(m.MetaRow.key == key)).scalar()

    def set_meta(self, key: str, value: str) -> None:
        self._exists(write=True)
        with self._tx(write=True) as conn:
            stmt = self._insert(m.MetaRow).values(key=key, value=value)
            conn.execute(stmt.on_conflict_do_update(index_elements=["key"],
                                                    set_={"value": stmt.excluded.value}))

    # -- helpers --------------------------------------------------------------------------
    def _insert(self, row_type: Any) -> Any:
        """INSERT with the dialect's ON CONFLICT clauses."""
        from sqlalchemy.dialects import postgresql, sqlite

        return (sqlite if self.dialect == "sqlite" else postgresql).insert(row_type)

    def _put_workloads(self, conn: Connection, infos: Iterable[WorkloadInfo]) -> None:
        rows = {w.key: {"key": w.key, "family_key": w.family_key, "family": w.family,
                        "spec": w.spec, "sizes": json.dumps(list(w.sizes)), "flops": w.flops,
                        "created_at": datetime.now(UTC)} for w in infos}
        if rows:
            conn.execute(self._insert(m.WorkloadRow).on_conflict_do_nothing(
                index_elements=["key"]), list(rows.values()))

    def _put_targets(self, conn: Connection, infos: Iterable[TargetInfo]) -> None:
        rows = {t.key: {"name": t.name, "key": t.key, "descriptor": t.descriptor,
                        "created_at": datetime.now(UTC)} for t in infos}
        if not rows:
            return
        stmt = self._insert(m.TargetRow)
        # A descriptor learnt later (an imported target seen locally) fills in a missing one.
        conn.execute(stmt.on_conflict_do_update(index_elements=["key"], set_={
            "descriptor": func.coalesce(m.TargetRow.descriptor, stmt.excluded.descriptor)}),
            list(rows.values()))

    @staticmethod
    def _ids(conn: Connection, row_type: Any, keys: set[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        ordered = sorted(keys)
        for i in range(0, len(ordered), CHUNK):
            chunk = ordered[i:i + CHUNK]
            out.update(conn.execute(select(row_type.key, row_type.id)
                                    .where(row_type.key.in_(chunk))).all())
        return out


def _records_changed() -> None:
    note_records_written()


def _after_fork() -> None:
    for store in list(_live):
        store._dispose_after_fork()


os.register_at_fork(after_in_child=_after_fork)
