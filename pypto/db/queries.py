"""The statements the SQL store runs most, built once (rows become values in
``pypto.db.rows``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select

from pypto.db import models as m
from pypto.db.rows import distances, to_record, to_workload, utc

__all__ = ["BEST", "FAMILY", "NEIGHBOR", "RECORD_COLUMNS", "WORKLOAD_COLUMNS", "best_query",
           "distances", "joined", "to_record", "to_workload", "utc"]

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
