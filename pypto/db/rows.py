"""Rows to frozen values, and the nearest-shape walk, shared by the SQLAlchemy store
(``pypto.db.sql``) and the stdlib reader of compile-time lookups (``pypto.db.reader``).

No SQLAlchemy here: the reader must not import it. A record row has the columns of
``pypto.db.queries.RECORD_COLUMNS`` in that order, a workload row those of
``WORKLOAD_COLUMNS``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from pypto.db.records import Neighbor, Record, WorkloadInfo, log_distances
from pypto.schedule_space.schedule import Schedule

#: columns of a record row (``queries.RECORD_COLUMNS``), then of a workload row
RECORD_WIDTH = 15


def to_record(row: Any) -> Record:
    return Record(workload_key=row[11], target_key=row[12],
                  schedule=Schedule.from_json(row[1]), cycles=row[2], status=row[3],
                  error=row[4], model_version=row[5], source=row[6], pypto_version=row[7],
                  target_name=row[13], run_id=row[8], created_at=utc(row[9]),
                  updated_at=utc(row[10]), model_score=row[14])


def to_workload(row: Any) -> WorkloadInfo:
    return WorkloadInfo(row[0], row[1], row[2], row[3], int(row[4]),
                        tuple(json.loads(row[5])))


def utc(value: datetime | str | None) -> datetime | None:
    """A stored time as an aware UTC datetime (SQLite keeps the text SQLAlchemy wrote,
    without a zone: it is UTC)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


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


def nearest_of(family: list[tuple[str, str]], sizes: Sequence[int], limit: int,
               exclude: str | None, best_of: Callable[[str], Any]) -> list[Neighbor]:
    """``ScheduleStore.nearest`` over the (key, sizes JSON) rows of a family: rank every
    shape, then ask ``best_of(key)`` (a record row followed by its workload's columns, or
    None) for the closest until ``limit`` have one: cheaper than asking which of them are
    tuned first."""
    rows = [(key, text) for key, text in family if key != exclude]
    far = distances(sizes, [text for _, text in rows])
    out: list[Neighbor] = []
    for i in sorted(range(len(rows)), key=far.__getitem__):
        if len(out) == limit or far[i] == float("inf"):
            break
        best = best_of(rows[i][0])
        if best is not None:
            out.append(Neighbor(float(far[i]), to_workload(best[RECORD_WIDTH:]),
                                to_record(best)))
    return out
