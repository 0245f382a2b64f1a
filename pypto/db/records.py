"""The plain values the schedule database stores and returns (no SQLAlchemy here).

Rows never leave a store as ORM objects: they become these frozen dataclasses first, so
callers can keep, compare and pass them across processes freely.
"""

from __future__ import annotations

import enum
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pypto.ir.workload import Workload, workload_from_json
from pypto.schedule_space.schedule import Schedule
from pypto.sim import MODEL_VERSION

if TYPE_CHECKING:
    from pypto.targets import Target

#: What became of one measurement. Only ``ok`` records carry cycles and are used for lookup.
STATUSES = ("ok", "invalid", "error", "timeout")
#: How a record got into the database.
SOURCES = ("tune", "import", "manual")
#: Run states.
RUN_STATUSES = ("running", "done", "failed", "interrupted")


def pypto_version() -> str:
    from pypto.version import __version__

    return __version__


@dataclass(frozen=True)
class WorkloadInfo:
    """A workload as the database keeps it: its key, family key and canonical spec."""

    key: str
    family_key: str
    family: str
    spec: str                      # Workload.canonical_json(): the key is its sha256
    flops: int
    sizes: tuple[int, ...]         # every node's shape, flattened (nearest-shape distance)

    @staticmethod
    def of(wl: Workload) -> WorkloadInfo:
        return WorkloadInfo(wl.key, wl.family_key, wl.family, wl.canonical_json(), wl.flops,
                            workload_sizes(wl))

    @staticmethod
    def from_spec(spec: str | dict[str, Any], key: str | None = None) -> WorkloadInfo:
        """Rebuild from a spec (JSON text or its dict); checks it hashes to ``key``.

        Raises:
            ValueError: the spec is not a workload, or does not hash to ``key``.
        """
        wl = workload_from_json(spec)
        if key is not None and wl.key != key:
            raise ValueError(f"workload key {key[:12]}... does not match its spec (which hashes "
                             f"to {wl.key[:12]}...)")
        return WorkloadInfo.of(wl)

    def workload(self) -> Workload:
        return workload_from_json(self.spec)

    def describe(self) -> str:
        return self.workload().describe()


@dataclass(frozen=True)
class TargetInfo:
    """A target as the database keeps it: name, descriptor key, descriptor JSON if known."""

    name: str
    key: str
    descriptor: str | None = None

    @staticmethod
    def of(target: Target) -> TargetInfo:
        blob = json.dumps(target.to_dict(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True, allow_nan=False)
        return TargetInfo(target.name, target.key, blob)


@dataclass(frozen=True)
class Record:
    """One measured (or failed) schedule of a workload on a target.

    ``cycles`` is set exactly when ``status`` is ``ok``; ``error`` says what went wrong
    otherwise. ``model_version`` is the timing model that measured it: records of another
    version are stale (kept, never used for lookup).

    Example:
        >>> from pypto.db import Record
        >>> from pypto.schedule_space import Schedule
        >>> r = Record("ab" * 32, "cd" * 32, Schedule(m1=128), cycles=1000)
        >>> r.status, r.source
        ('ok', 'tune')
    """

    workload_key: str
    target_key: str
    schedule: Schedule
    cycles: int | None = None
    status: str = "ok"
    error: str | None = None
    model_version: str = MODEL_VERSION
    source: str = "tune"
    pypto_version: str = field(default_factory=pypto_version)
    target_name: str = ""
    run_id: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: the cost model's score for the schedule when the ``model`` strategy proposed it
    #: (higher: predicted faster; comparable within one workload), None otherwise
    model_score: float | None = None

    def __post_init__(self) -> None:
        score = self.model_score
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                                  or not math.isfinite(score)):
            raise ValueError(f"a record's model_score must be a finite number or None, got "
                             f"{self.model_score!r}")
        if not isinstance(self.schedule, Schedule):
            object.__setattr__(self, "schedule", Schedule(self.schedule))
        if self.status not in STATUSES:
            raise ValueError(f"record status {self.status!r} must be one of {STATUSES}")
        if self.source not in SOURCES:
            raise ValueError(f"record source {self.source!r} must be one of {SOURCES}")
        if self.status == "ok":
            if isinstance(self.cycles, bool) or not isinstance(self.cycles, int) \
                    or self.cycles <= 0:
                raise ValueError(f"an ok record needs cycles as a positive int, got "
                                 f"{self.cycles!r}")
        elif self.cycles is not None:
            raise ValueError(f"a {self.status} record has no cycles (got {self.cycles!r})")

    @property
    def schedule_key(self) -> str:
        return self.schedule.key

    @staticmethod
    def measured(wl: Workload, target: Target, schedule: Schedule, *, cycles: int | None = None,
                 status: str = "ok", error: str | None = None, source: str = "tune",
                 run_id: int | None = None, model_version: str = MODEL_VERSION,
                 model_score: float | None = None) -> Record:
        """A record for ``schedule`` of ``wl`` on ``target`` (current model version)."""
        return Record(wl.key, target.key, schedule, cycles, status, error, model_version,
                      source, pypto_version(), target.name, run_id, model_score=model_score)


@dataclass(frozen=True)
class Neighbor:
    """The best record of a tuned workload of the same family, and how far its shape is."""

    distance: float
    workload: WorkloadInfo
    record: Record


@dataclass(frozen=True)
class Run:
    """One tuning run (a ``pypto tune`` invocation, or one workload of it)."""

    id: int
    strategy: str
    status: str
    trials_asked: int
    trials_done: int
    best_cycles: int | None
    command: str
    host: str
    workload_key: str | None
    target_key: str | None
    started_at: datetime | None
    finished_at: datetime | None
    pid: int | None = None          # the process running it on ``host`` (None: not known)
    heartbeat: float | None = None  # when that process last said it runs (epoch seconds)


@dataclass(frozen=True)
class CostModelBlob:
    """A saved cost model: XGBoost's own JSON or UBJ bytes (never a pickle), per target,
    op family and timing-model version."""

    target_key: str
    family: str
    blob: bytes
    format: str                # "json" or "ubj"
    metrics: str               # JSON text
    samples: int
    model_version: str = MODEL_VERSION
    updated_at: datetime | None = None


#: A claim whose heartbeat is older than this many seconds belongs to a dead worker.
STALE_AFTER = 30.0


class ClaimOutcome(enum.StrEnum):
    """What ``ScheduleStore.claim`` answered. A ``str``: each compares equal to its value
    (``ClaimOutcome.FULL == "full"``), so code and data that use the strings still work."""

    #: the schedule is this worker's to measure: the claim ends when its record is added,
    #: or with ``release``
    CLAIMED = "claimed"
    #: a record of the schedule exists (``ClaimResult.record``)
    MEASURED = "measured"
    #: a live worker is measuring it
    BUSY = "busy"
    #: measured plus in-flight trials reached the budget
    FULL = "full"


@dataclass(frozen=True)
class WorkerInfo:
    """A tuning worker: one process, named uniquely, with the host and pid that let a peer on
    the same host tell at once that it died (``os.kill(pid, 0)``)."""

    id: str
    host: str
    pid: int

    @staticmethod
    def current() -> WorkerInfo:
        """A new identity for this process (unique even if the pid is reused later)."""
        import os
        import socket
        import uuid

        return WorkerInfo(f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}",
                          socket.gethostname(), os.getpid())


@dataclass(frozen=True)
class Claim:
    """A worker's claim to be measuring ``schedule`` of a workload on a target right now.

    ``heartbeat`` (seconds since the epoch) is refreshed while the worker lives; ``study``
    and ``trial`` name the Optuna trial that proposed the schedule, so that a peer can fail
    and re-queue it when the worker dies."""

    workload_key: str
    target_key: str
    schedule: Schedule
    worker: str
    host: str
    pid: int
    heartbeat: float
    study: str = ""
    trial: int | None = None
    model_version: str = MODEL_VERSION

    @property
    def schedule_key(self) -> str:
        return self.schedule.key


@dataclass(frozen=True)
class TaskProgress:
    """Where the tuning of one (workload, target, model version) stands, across workers.

    ``measured`` counts records that are trials (every status but ``invalid``);
    ``in_flight`` the live claims; ``since_best`` the trials recorded after the best one."""

    measured: int = 0
    in_flight: int = 0
    best_cycles: int | None = None
    since_best: int = 0


@dataclass(frozen=True)
class ClaimResult:
    """The answer of ``ScheduleStore.claim``.

    ``status``: a ``ClaimOutcome`` (given as its string, it becomes one; another string is a
    ``ValueError``). ``record`` is set when it is ``MEASURED``. ``progress``: the task's
    counts as the claim left them. ``reaped``: the claims of dead workers on this task that
    this call removed, for their schedules to be re-queued."""

    status: ClaimOutcome
    progress: TaskProgress
    record: Record | None = None
    reaped: tuple[Claim, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.status, ClaimOutcome):
            object.__setattr__(self, "status", ClaimOutcome(self.status))


@dataclass(frozen=True)
class Summary:
    """Records of one workload on one target under one model version."""

    workload: WorkloadInfo
    target_name: str
    target_key: str
    model_version: str
    records: int
    ok: int
    best_cycles: int | None


@dataclass(frozen=True)
class Stats:
    url: str
    exists: bool
    workloads: int = 0
    targets: int = 0
    records: int = 0
    runs: int = 0
    cost_models: int = 0
    by_status: tuple[tuple[str, int], ...] = ()
    by_model_version: tuple[tuple[str, int], ...] = ()

    def stale(self, model_version: str = MODEL_VERSION) -> int:
        return sum(n for v, n in self.by_model_version if v != model_version)


# -- workload specs -----------------------------------------------------------------------


def workload_sizes(wl: Workload) -> tuple[int, ...]:
    """Every node's shape, flattened: equal length within a family (same ops, same ranks)."""
    return tuple(int(d) for n in wl.nodes for d in n.shape)


def log_distance(a: tuple[int, ...], b: tuple[int, ...]) -> float:
    """Euclidean distance between two size vectors on a log2 scale (inf if they differ in
    length): 1000 is closer to 1024 than 512 is."""
    if len(a) != len(b):
        return math.inf
    return math.sqrt(sum((math.log2(max(x, 1)) - math.log2(max(y, 1))) ** 2
                         for x, y in zip(a, b)))


def log_distances(query: Sequence[int], candidates: Any) -> list[float]:
    """``log_distance`` from ``query`` to each candidate (a list of size lists, or a 2-D
    array of them), vectorized."""
    import numpy as np

    q = np.log2(np.maximum(np.asarray(query, dtype=np.float64), 1.0))
    if isinstance(candidates, np.ndarray) and candidates.ndim == 2 \
            and candidates.shape[1] == len(query):
        c = np.log2(np.maximum(candidates, 1.0))
        return np.sqrt(((c - q) ** 2).sum(axis=1)).tolist()
    out = [math.inf] * len(candidates)
    same = [i for i, c in enumerate(candidates) if len(c) == len(query)]
    if same:
        c = np.log2(np.maximum(np.asarray([candidates[i] for i in same], dtype=np.float64), 1.0))
        for i, d in zip(same, np.sqrt(((c - q) ** 2).sum(axis=1)).tolist()):
            out[i] = d
    return out


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
