"""The SQL behind claims (``ScheduleStore.claim`` and friends), inside one transaction.

A claim is a row of ``pypto_claims``, unique per (workload, target, schedule, model version)
as records are. ``claim`` runs in a write transaction that is exclusive per task: SQLite's
``BEGIN IMMEDIATE`` serializes writers already; PostgreSQL takes a transaction-scoped
advisory lock on the (workload, target) pair. Counting then inserting is therefore atomic,
which is what keeps ``measured + in flight <= budget`` exact across processes and machines.
The counts come from one statement, so they are one snapshot even under READ COMMITTED.

Times are the workers' clocks (``time.time()``): ``stale_after`` (tens of seconds) dwarfs
the skew of machines kept by NTP.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from pypto.db import models as m
from pypto.db import queries as qs
from pypto.db.records import Claim, ClaimOutcome, ClaimResult, TaskProgress, WorkerInfo
from pypto.errors import DatabaseError
from pypto.schedule_space.schedule import Schedule

c, r = m.ClaimRow, m.RecordRow
CLAIM_COLUMNS = (c.schedule, c.worker, c.host, c.pid, c.heartbeat, c.study, c.trial,
                 c.model_version, m.WorkloadRow.key, m.TargetRow.key)


def joined(q: Any) -> Any:
    return (q.select_from(c).join(m.WorkloadRow, c.workload_id == m.WorkloadRow.id)
            .join(m.TargetRow, c.target_id == m.TargetRow.id))


# The statements of ``claim``, built once (it runs once per trial of every worker).
_TASK = (c.workload_id == bindparam("wid"), c.target_id == bindparam("tid"),
         c.model_version == bindparam("mv"))
_RTASK = (r.workload_id == bindparam("wid"), r.target_id == bindparam("tid"),
          r.model_version == bindparam("mv"))
IDS = select(select(m.WorkloadRow.id).where(m.WorkloadRow.key == bindparam("wk"))
             .scalar_subquery(),
             select(m.TargetRow.id).where(m.TargetRow.key == bindparam("tk")).scalar_subquery())
# Rows about to be deleted are read FOR UPDATE (PostgreSQL; SQLite serializes writers
# anyway): under READ COMMITTED two transactions could otherwise both read a dead worker's
# claims, both delete them, and both re-queue its schedules. Locked, the second one waits
# and reads nothing.
STALE = (joined(select(*CLAIM_COLUMNS)).where(*_TASK, c.heartbeat < bindparam("cutoff"))
         .with_for_update(of=c))
DELETE_STALE = delete(c).where(*_TASK, c.heartbeat < bindparam("cutoff"))
BEAT = update(c).where(c.worker == bindparam("me")).values(heartbeat=bindparam("now"))
RECORD = qs.joined(select(*qs.RECORD_COLUMNS)).where(*_RTASK,
                                                     r.schedule_key == bindparam("key"))
HOLDER = select(c.worker).where(*_TASK, c.schedule_key == bindparam("key"))
BEST = select(r.id, r.cycles).where(*_RTASK, r.status == "ok").order_by(r.cycles, r.id).limit(1)
COUNTS = select(
    select(func.count()).select_from(r).where(*_RTASK, r.status != "invalid").scalar_subquery(),
    select(func.count()).select_from(c).where(
        *_TASK, c.heartbeat >= bindparam("cutoff")).scalar_subquery(),
    select(func.count()).select_from(r).where(
        *_RTASK, r.status != "invalid", r.id > bindparam("best_id")).scalar_subquery())


def task_ids(conn: Connection, workload_key: str, target_key: str) -> tuple[int, int]:
    wid, tid = conn.execute(IDS, {"wk": workload_key, "tk": target_key}).one()
    if wid is None or tid is None:
        kind, key = ("workload", workload_key) if wid is None else ("target", target_key)
        raise DatabaseError(f"cannot claim a schedule of an unknown {kind} ({key[:12]}...): "
                            "register it first (start_run or add_records)")
    return int(wid), int(tid)


def lock_task(conn: Connection, dialect: str, workload_key: str, target_key: str) -> None:
    """Serialize claims of one task (SQLite: the write transaction already does)."""
    if dialect == "postgresql":
        digest = hashlib.sha256(f"claims:{workload_key}:{target_key}".encode()).digest()
        conn.execute(select(func.pg_advisory_xact_lock(int.from_bytes(digest[:8], "big",
                                                                     signed=True))))


def progress(conn: Connection, wid: int, tid: int, mv: str, cutoff: float) -> TaskProgress:
    """One snapshot: the counts come from one statement (consistent under READ COMMITTED)."""
    task = {"wid": wid, "tid": tid, "mv": mv}
    best = conn.execute(BEST, task).first()
    measured, in_flight, since_best = conn.execute(COUNTS, {
        **task, "cutoff": cutoff, "best_id": best[0] if best else 0}).one()
    return TaskProgress(int(measured), int(in_flight),
                        int(best[1]) if best and best[1] is not None else None, int(since_best))


def claim(conn: Connection, dialect: str, workload_key: str, target_key: str,
          schedule: Schedule, *, worker: WorkerInfo, budget: int | None, study: str,
          trial: int | None, stale_after: float, mv: str) -> ClaimResult:
    """``ScheduleStore.claim`` inside the caller's write transaction (see the module doc)."""
    lock_task(conn, dialect, workload_key, target_key)
    wid, tid = task_ids(conn, workload_key, target_key)
    now = time.time()
    cutoff = now - stale_after
    task = {"wid": wid, "tid": tid, "mv": mv}
    stale = conn.execute(STALE, {**task, "cutoff": cutoff}).all()
    if stale:
        conn.execute(DELETE_STALE, {**task, "cutoff": cutoff})
    reaped = tuple(to_claim(row) for row in stale)
    conn.execute(BEAT, {"me": worker.id, "now": now})

    key = schedule.key
    row = conn.execute(RECORD, {**task, "key": key}).first()
    if row is not None:
        return ClaimResult(ClaimOutcome.MEASURED, progress(conn, wid, tid, mv, cutoff),
                           qs.to_record(row), reaped)
    holder = conn.execute(HOLDER, {**task, "key": key}).scalar()
    if holder is not None:
        return ClaimResult(ClaimOutcome.CLAIMED if holder == worker.id else ClaimOutcome.BUSY,
                           progress(conn, wid, tid, mv, cutoff), None, reaped)
    before = progress(conn, wid, tid, mv, cutoff)
    if budget is not None and before.measured + before.in_flight >= budget:
        return ClaimResult(ClaimOutcome.FULL, before, None, reaped)
    conn.execute(insert(c), {
        "workload_id": wid, "target_id": tid, "schedule": schedule.to_json(),
        "schedule_key": key, "model_version": mv, "worker": worker.id, "host": worker.host,
        "pid": worker.pid, "study": study, "trial": trial, "heartbeat": now,
        "created_at": m.utcnow()})
    return ClaimResult(ClaimOutcome.CLAIMED,
                       dataclasses.replace(before, in_flight=before.in_flight + 1), None,
                       reaped)


def release(conn: Connection, worker_id: str, schedule_keys: Iterable[str] | None) -> list[Claim]:
    where = [c.worker == worker_id]
    if schedule_keys is not None:
        keys = list(schedule_keys)
        if not keys:
            return []
        where.append(c.schedule_key.in_(keys))
    rows = conn.execute(joined(select(*CLAIM_COLUMNS)).where(*where)
                        .with_for_update(of=c)).all()
    if rows:
        conn.execute(delete(c).where(*where))
    return [to_claim(row) for row in rows]


def heartbeat(conn: Connection, worker_id: str) -> int:
    return int(conn.execute(update(c).where(c.worker == worker_id)
                            .values(heartbeat=time.time())).rowcount)


def listing(conn: Connection, workload_key: str | None, target_key: str | None,
            mv: str) -> list[Claim]:
    q = joined(select(*CLAIM_COLUMNS)).where(c.model_version == mv)
    if workload_key is not None:
        q = q.where(m.WorkloadRow.key == workload_key)
    if target_key is not None:
        q = q.where(m.TargetRow.key == target_key)
    return [to_claim(row) for row in conn.execute(q.order_by(c.id))]


def end_claims_of(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """A record landed: the claim on its schedule (whoever held it) is over."""
    if not rows or conn.execute(select(c.id).limit(1)).first() is None:
        return
    keys = {(row["workload_id"], row["target_id"], row["schedule_key"], row["model_version"])
            for row in rows}
    for wid, tid, key, mv in keys:
        conn.execute(delete(c).where(c.workload_id == wid, c.target_id == tid,
                                     c.schedule_key == key, c.model_version == mv))



def to_claim(row: Any) -> Claim:
    return Claim(workload_key=row[8], target_key=row[9], schedule=Schedule.from_json(row[0]),
                 worker=row[1], host=row[2], pid=int(row[3]), heartbeat=float(row[4]),
                 study=row[5], trial=row[6], model_version=row[7])
