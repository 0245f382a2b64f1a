"""Engines for the schedule database: SQLite tuned for concurrent writers, PostgreSQL
through psycopg 3; the schema check; database failures as ``DatabaseError``.

SQLite follows SQLAlchemy's documented recipe: the driver's own transaction handling is
switched off and ``BEGIN`` is ours, ``BEGIN IMMEDIATE`` for writes, so a second writer
waits (busy timeout) instead of failing when it upgrades a read lock; WAL lets readers
run beside the writer.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from sqlalchemy import URL, Connection, Engine, create_engine, event, inspect, make_url, select

from pypto.db import models as m
from pypto.db.location import read_only_uri, sqlite_path
from pypto.errors import DatabaseError

BUSY_TIMEOUT_MS = 60_000
ADVISORY_LOCK = 0x7079_7074_6F  # "pypto": serializes schema creation on PostgreSQL


def schema_state(conn: Connection, display: str) -> str:
    """``ready`` (our schema, this revision), ``missing`` (none of our tables), or a
    ``DatabaseError`` saying what is wrong."""
    names = {n for n in inspect(conn).get_table_names() if n.startswith(m.PREFIX)}
    if not names:
        return "missing"
    if m.VERSION_TABLE not in names:
        raise DatabaseError(f"database {display} has PyPTO tables ({', '.join(sorted(names))}) "
                            f"but no {m.VERSION_TABLE}: it was not made by PyPTO; PyPTO will "
                            "not touch it (use another database, or move it away)")
    versions = conn.execute(select(m.Base.metadata.tables[m.VERSION_TABLE].c.version_num)
                            ).scalars().all()
    if versions != [m.SCHEMA_REVISION]:
        found = ", ".join(versions) or "none"
        raise DatabaseError(f"database {display} has schema revision {found}; this PyPTO uses "
                            f"revision {m.SCHEMA_REVISION}. Run `pypto db upgrade` if it is "
                            "older, or upgrade PyPTO if it is newer")
    missing = sorted(set(m.Base.metadata.tables) - names)
    if missing:
        raise DatabaseError(f"database {display} lacks the tables {', '.join(missing)} of "
                            f"schema revision {m.SCHEMA_REVISION}; it is damaged")
    return "ready"


def server_url(url: str) -> URL:
    """``url`` parsed, with a password that holds an unescaped ``@`` given whole: SQLAlchemy
    takes what follows the first ``@`` for the host, and the driver's errors would then
    print the password's tail as a host name it cannot resolve."""
    parsed = make_url(url)
    host = parsed.host or ""
    if "@" in host and parsed.password is not None:
        tail, _, real_host = host.rpartition("@")
        parsed = parsed.set(password=f"{parsed.password}@{tail}", host=real_host)
    return parsed


def make_engine(url: str, dialect: str) -> Engine:
    if dialect == "postgresql":
        return create_engine(server_url(url), pool_pre_ping=True,
                             connect_args={"connect_timeout": 10})
    path = sqlite_path(url)
    uri = read_only_uri(path) if path is not None else None
    if uri is not None:   # a file we may only read: read it as such (writes fail, named)
        engine = create_engine("sqlite://", creator=lambda: sqlite3.connect(
            uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False))
    else:
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        # Switch off the driver's own BEGIN handling; ``_begin`` issues ours.
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys = ON")
        if sqlite_path(url) is not None:
            # WAL is a property of the file, set once when PyPTO creates its schema
            # (``use_wal``): connecting must not change another program's database.
            cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("pypto_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def use_wal(engine: Engine) -> None:
    """Switch a SQLite file PyPTO has just made to write-ahead logging (readers beside a
    writer). Outside any transaction, as SQLite requires."""
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()
    finally:
        raw.close()


#: Optuna's RDB storage tables: a study may share the database with our records.
OPTUNA_TABLES = frozenset({
    "alembic_version", "studies", "study_directions", "study_user_attributes",
    "study_system_attributes", "trials", "trial_params", "trial_values",
    "trial_intermediate_values", "trial_user_attributes", "trial_system_attributes",
    "trial_heartbeats", "version_info"})


def other_tables(conn: Connection) -> list[str]:
    """The tables of a database that are neither PyPTO's nor an Optuna study's (SQLite's
    own excluded): another program's."""
    return sorted(n for n in inspect(conn).get_table_names()
                  if not n.startswith((m.PREFIX, "sqlite_")) and n not in OPTUNA_TABLES)


def database_error(display: str, e: BaseException) -> DatabaseError:
    orig = getattr(e, "orig", None) or e
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    low = text.lower()
    if "file is not a database" in low or "malformed" in low:
        return DatabaseError(f"{display} is not a PyPTO database (SQLite says: {text}); PyPTO "
                             "will not overwrite it: move it away, or choose another database "
                             "with --db or PYPTO_DB")
    if "readonly database" in low:
        return DatabaseError(f"database {display} is read-only for PyPTO here (SQLite says: "
                             f"{text}): it can be read (pypto db stats/list/show, lookup when "
                             "kernels compile) but not written; tune or import into another "
                             "database with --db or PYPTO_DB")
    if "unable to open database file" in low:
        return DatabaseError(f"cannot open database {display} (SQLite says: {text}); check the "
                             "path and its permissions")
    if "connection" in low or "could not translate host" in low or "timeout expired" in low:
        return DatabaseError(f"cannot connect to database {display}: {text}")
    if "locked" in low:
        return DatabaseError(f"database {display} stayed locked by another process for "
                             f"{BUSY_TIMEOUT_MS // 1000} s: {text}")
    return DatabaseError(f"database {display}: {type(orig).__name__}: {text}")
