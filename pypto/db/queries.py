"""The statements the SQL store runs most, built once, and rows to frozen values."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import bindparam, select

from pypto.db import models as m
from pypto.db.records import Record, WorkloadInfo, log_distances
from pypto.schedule_space.schedule import Schedule

RECORD_COLUMNS = (m.RecordRow.id, m.RecordRow.schedule, m.RecordRow.cycles, m.RecordRow.status,
                   m.RecordRow.error, m.RecordRow.model_version, m.RecordRow.source,
                   m.RecordRow.pypto_version, m.RecordRow.run_id, m.RecordRow.created_at,
                   m.RecordRow.updated_at, m.WorkloadRow.key, m.TargetRow.key, m.TargetRow.name,
                   m.RecordRow.model_score)


WORKLOAD_COLUMNS = (m.WorkloadRow.key, m.WorkloadRow.family_key, m.WorkloadRow.family,
                     m.WorkloadRow.spec, m.WorkloadRow.flops, m.WorkloadRow.sizes)


def joined(q: Any) -> Any:
    return (q.select_from(m.RecordRow)
            .join(m.WorkloadRow, m.RecordRow.workload_id == m.WorkloadRow.id)
            .join(m.TargetRow, m.RecordRow.target_id == m.TargetRow.id))


def distances(sizes: Sequence[int], texts: list[str]) -> list[float]:
    """``log_distance`` from ``sizes`` to every JSON list of ``texts``. Within a family
    every list has the same length: parsed in one C call (a family of 1,000 shapes costs
    about 0.3 ms, not the 2 ms of ``json.loads`` per list)."""
    import numpy as np

    n = len(sizes)
    if n and texts and all(t.count(",") == n - 1 for t in texts):
        flat = np.fromstring(",".join(t[1:-1] for t in texts), dtype=np.float64, sep=",")
        if flat.size == n * len(texts):
            return log_distances(sizes, flat.reshape(len(texts), n))
    return log_distances(sizes, [json.loads(t) for t in texts])


def best_query(*extra: Any) -> Any:
    """The best ok record of (workload key, target key, model version): the same query
    for ``best`` and ``nearest``, built once (``extra``: more columns).

    The ids come from scalar subqueries (unique-key seeks), so every column of
    ``ix_pypto_records_best`` up to ``status`` is an equality on a known value and the
    first entry after them in index order is the answer: one seek, no sort, on SQLite
    and PostgreSQL alike.
    """
    r, w, t = m.RecordRow, m.WorkloadRow, m.TargetRow
    workload_id = select(w.id).where(w.key == bindparam("wk")).scalar_subquery()
    target_id = select(t.id).where(t.key == bindparam("tk")).scalar_subquery()
    return (joined(select(*RECORD_COLUMNS, *extra))
            .where(r.workload_id == workload_id, r.target_id == target_id,
                   r.model_version == bindparam("mv"), r.status == "ok")
            .order_by(r.cycles, r.id).limit(1))


BEST = best_query()
NEIGHBOR = best_query(*WORKLOAD_COLUMNS)
FAMILY = select(m.WorkloadRow.key, m.WorkloadRow.sizes).where(
    m.WorkloadRow.family_key == bindparam("fk"))


def to_record(row: Any) -> Record:
    return Record(workload_key=row[11], target_key=row[12],
                  schedule=Schedule.from_json(row[1]), cycles=row[2], status=row[3],
                  error=row[4], model_version=row[5], source=row[6], pypto_version=row[7],
                  target_name=row[13], run_id=row[8], created_at=utc(row[9]),
                  updated_at=utc(row[10]), model_score=row[14])


def to_workload(row: Any) -> WorkloadInfo:
    return WorkloadInfo(row[0], row[1], row[2], row[3], int(row[4]),
                        tuple(json.loads(row[5])))


def utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
