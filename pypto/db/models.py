"""SQLAlchemy 2 typed ORM models of the schedule database (tables prefixed ``pypto_``).

The prefix keeps our tables apart from Optuna's, which may share the database; our
Alembic migrations keep their revision in ``pypto_alembic_version`` for the same reason.
JSON is stored as text: canonical JSON is compared and hashed byte for byte.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from pypto.db.revision import PREFIX, VERSION_TABLE
from pypto.db.revision import SCHEMA_REVISION as SCHEMA_REVISION  # the models' revision

KEY = String(64)  # sha256 hex digests
# Integer primary keys auto-increment in SQLite only as INTEGER; BIGINT elsewhere.
BIG_ID = BigInteger().with_variant(Integer(), "sqlite")


def managed(name: str | None, type_: str) -> bool:
    """Is this schema object one that our migrations manage? Only ``pypto_`` tables, and
    not the version table (Alembic's own)."""
    if type_ != "table":
        return True
    return bool(name) and name.startswith(PREFIX) and name != VERSION_TABLE  # type: ignore[union-attr]


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    })


class WorkloadRow(Base):
    __tablename__ = "pypto_workloads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(KEY, unique=True)
    family_key: Mapped[str] = mapped_column(KEY, index=True)
    family: Mapped[str] = mapped_column(String(32))
    spec: Mapped[str] = mapped_column(Text)          # Workload.canonical_json()
    sizes: Mapped[str] = mapped_column(Text)         # JSON list of ints
    flops: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class TargetRow(Base):
    __tablename__ = "pypto_targets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(KEY, unique=True)
    descriptor: Mapped[str | None] = mapped_column(Text)  # canonical JSON; None if imported
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RunRow(Base):
    __tablename__ = "pypto_runs"
    __table_args__ = (
        CheckConstraint("status IN ('running', 'done', 'failed', 'interrupted')",
                        name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    strategy: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(16), default="running")
    trials_asked: Mapped[int] = mapped_column(Integer)
    trials_done: Mapped[int] = mapped_column(Integer, default=0)
    best_cycles: Mapped[int | None] = mapped_column(BigInteger)
    command: Mapped[str] = mapped_column(Text, default="")
    host: Mapped[str] = mapped_column(String(255), default="")
    workload_id: Mapped[int | None] = mapped_column(
        ForeignKey("pypto_workloads.id", ondelete="SET NULL"))
    target_id: Mapped[int | None] = mapped_column(
        ForeignKey("pypto_targets.id", ondelete="SET NULL"))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # the process running it on ``host`` and when it last said so (epoch seconds), so a
    # run whose process died without ending it can be told apart (revision 0004)
    pid: Mapped[int | None] = mapped_column(Integer)
    heartbeat: Mapped[float | None] = mapped_column(Float)


class RecordRow(Base):
    __tablename__ = "pypto_records"
    __table_args__ = (
        UniqueConstraint("workload_id", "target_id", "schedule_key", "model_version"),
        # "The best ok record of (workload, target, model version)" is one seek on this
        # index and the first entry after it; ``id`` breaks ties in the index order.
        Index("ix_pypto_records_best", "workload_id", "target_id", "model_version", "status",
              "cycles", "id"),
        CheckConstraint("status IN ('ok', 'invalid', 'error', 'timeout')", name="status"),
        CheckConstraint("source IN ('tune', 'import', 'manual')", name="source"),
        CheckConstraint("(status = 'ok') = (cycles IS NOT NULL)", name="cycles_iff_ok"),
    )

    id: Mapped[int] = mapped_column(BIG_ID, primary_key=True)
    workload_id: Mapped[int] = mapped_column(
        ForeignKey("pypto_workloads.id", ondelete="CASCADE"))
    target_id: Mapped[int] = mapped_column(ForeignKey("pypto_targets.id", ondelete="CASCADE"))
    schedule: Mapped[str] = mapped_column(Text)       # Schedule.to_json()
    schedule_key: Mapped[str] = mapped_column(KEY)
    status: Mapped[str] = mapped_column(String(16))
    cycles: Mapped[int | None] = mapped_column(BigInteger)
    error: Mapped[str | None] = mapped_column(Text)
    model_version: Mapped[str] = mapped_column(String(64))
    pypto_version: Mapped[str] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(String(16))
    run_id: Mapped[int | None] = mapped_column(
        ForeignKey("pypto_runs.id", ondelete="SET NULL"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    # the cost model's score when the ``model`` strategy proposed the schedule (revision 0003)
    model_score: Mapped[float | None] = mapped_column(Float)


class ClaimRow(Base):
    """A schedule a live worker is measuring (``ScheduleStore.claim``): at most one per
    (workload, target, schedule, model version), like records, so two workers never measure
    the same schedule. Deleted when its record lands or its worker gives it back; a claim
    whose ``heartbeat`` (epoch seconds) went stale belonged to a dead worker."""

    __tablename__ = "pypto_claims"
    __table_args__ = (
        UniqueConstraint("workload_id", "target_id", "schedule_key", "model_version"),
    )

    id: Mapped[int] = mapped_column(BIG_ID, primary_key=True)
    workload_id: Mapped[int] = mapped_column(
        ForeignKey("pypto_workloads.id", ondelete="CASCADE"))
    target_id: Mapped[int] = mapped_column(ForeignKey("pypto_targets.id", ondelete="CASCADE"))
    schedule: Mapped[str] = mapped_column(Text)       # Schedule.to_json()
    schedule_key: Mapped[str] = mapped_column(KEY)
    model_version: Mapped[str] = mapped_column(String(64))
    worker: Mapped[str] = mapped_column(String(128), index=True)
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    study: Mapped[str] = mapped_column(String(512), default="")
    trial: Mapped[int | None] = mapped_column(Integer)
    heartbeat: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class CostModelRow(Base):
    __tablename__ = "pypto_cost_models"
    __table_args__ = (
        UniqueConstraint("target_id", "family", "model_version"),
        CheckConstraint("format IN ('json', 'ubj')", name="format"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("pypto_targets.id", ondelete="CASCADE"))
    family: Mapped[str] = mapped_column(String(32))
    model_version: Mapped[str] = mapped_column(String(64))
    format: Mapped[str] = mapped_column(String(8))
    blob: Mapped[bytes] = mapped_column(LargeBinary)
    metrics: Mapped[str] = mapped_column(Text, default="{}")
    samples: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class MetaRow(Base):
    """Small bookkeeping values, e.g. which ``tuning_logs/*.jsonl`` were imported."""

    __tablename__ = "pypto_meta"

    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


# Alembic's own table under our name, declared here so that ``create_all`` makes a fresh
# database complete (then stamped with ``SCHEMA_REVISION``, as ``alembic stamp`` does).
version_table = Table(VERSION_TABLE, Base.metadata,
                      Column("version_num", String(32), nullable=False),
                      PrimaryKeyConstraint("version_num", name=f"{VERSION_TABLE}_pkc"))
