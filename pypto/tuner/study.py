"""The Optuna study a tuning worker asks: in memory, in a journal file, or in the database.

The schedule database is the truth (what was measured, what is being measured); the study
is the samplers' memory of it. Where it lives:

- in memory, for one process on a SQLite file or an in-memory database: no I/O per ask or
  tell, warm-started from the database and kept up to date with the trials other
  processes record (``pypto.tuner.loop``);
- a journal file next to a SQLite database (``pypto.db.optuna-journal``: Optuna's
  ``JournalStorage`` over ``JournalFileBackend``), shared by the ``--workers`` of a run
  and by any other ``--workers`` run on the same file;
- the database itself on PostgreSQL (Optuna's ``RDBStorage``), shared by every process
  on every machine that tunes with it. Optuna's tables carry no prefix, ours ``pypto_``;
  its Alembic revision is in ``alembic_version``, ours in ``pypto_alembic_version``.

A study is per (workload, target, timing-model version, parameter encoding), so strategies
that encode schedules alike (``tpe``, ``gp``, ``cmaes``; ``random``, ``grid``, ``model``)
share one. In a storage it is named ``matmul 1024x1024x1024 f16 ascend910b (sampler,
feasible-2)`` and found by its identity (``pypto.tuner.study_names``); its objective is
``cycles``, a trial it measured names its schedule (``schedule_key``, and ``schedule``,
the real values, where the parameters are encoded) and a failed one says why (``reason``).
What people open is the study of records beside it (``pypto.tuner.record_study``), which
every run writes, in memory or not.
A trial whose worker died is failed and re-queued with Optuna's
``RetryHeartbeatStaleTrialCallback`` (its parameters come back as a waiting trial that the
next ``ask`` of any worker takes); Optuna's own heartbeat is not used, because the
journal storage has none in Optuna 5: the liveness of workers is the heartbeat of their
claims in the schedule database (``pypto.tuner.liveness``).
"""

from __future__ import annotations

import copy
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pypto.tuner import TuneError
from pypto.tuner.strategies.base import REASON_ATTR

if TYPE_CHECKING:
    import optuna

    from pypto.db import Claim, Record
    from pypto.tuner.strategies.base import Strategy
    from pypto.tuner.tasks import Task

JOURNAL_SUFFIX = ".optuna-journal"
#: a schedule re-queued this many times (its workers kept dying) is given up
MAX_RETRY = 2
#: the user attribute that names a trial's schedule (warm starts skip what is there)
SCHEDULE_ATTR = "schedule_key"
#: the storages opened by this process, by journal path or server URL (a journal is read
#: whole when opened, a server's tables are checked)
_STORAGES: dict[str, Any] = {}


def journal_path(db_file: Path) -> Path:
    """The Optuna journal of the SQLite database ``db_file``: beside it."""
    return db_file.with_name(db_file.name + JOURNAL_SUFFIX)


def shared_by_default(url: str) -> bool:
    """A server database is for sharing: its runs always use the shared study."""
    return url.startswith("postgresql")


def open_storage(url: str) -> optuna.storages.BaseStorage:
    """The shared Optuna storage for the schedule database at ``url``.

    Raises:
        TuneError: an in-memory database (nothing to share), a journal that cannot be
            read, or a server whose Optuna tables cannot be opened.
    """
    storage = storage_for(url)
    if storage is None:
        raise TuneError("parallel tuning needs a database file or server for the workers "
                        "to share; give --db a SQLite file or a postgresql:// URL")
    return storage


def storage_for(url: str) -> optuna.storages.BaseStorage | None:
    """Optuna's storage beside the schedule database at ``url`` (None: an in-memory
    database, which has none): the journal file of a SQLite file, Optuna's tables on
    PostgreSQL; one per file or server and process.

    Raises:
        TuneError: a journal that cannot be read, or Optuna's tables that cannot be opened.
    """
    import optuna

    from pypto.db.location import display_url, sqlite_path

    path = sqlite_path(url)
    if path is not None:
        journal = journal_path(path).resolve()
        cached = _STORAGES.get(str(journal))
        if cached is not None and journal.is_file():
            return cached
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            storage = optuna.storages.JournalStorage(_journal_file(journal))
        except (OSError, ValueError) as e:
            raise TuneError(f"cannot read the Optuna journal {journal} ({e}); it holds only "
                            "the samplers' memory and a view of the records (results are "
                            "in the database): move it away and run again") from None
        _STORAGES[str(journal)] = storage
        return storage
    if url.startswith("postgresql"):
        if url in _STORAGES:
            return _STORAGES[url]
        rdb_url = _without_commit_wait(url)
        # Several processes may create Optuna's tables at once; the loser retries.
        for attempt in range(5):
            try:
                storage = optuna.storages.RDBStorage(rdb_url,
                                                     engine_kwargs={"pool_pre_ping": True})
                _STORAGES[url] = storage
                return storage
            except Exception as e:  # noqa: BLE001 - a lost creation race, or the server
                if attempt == 4:
                    text = str(e).strip().splitlines()[0] if str(e).strip() else \
                        type(e).__name__
                    raise TuneError(f"cannot open Optuna's tables in {display_url(url)}: "
                                    f"{text}") from None
                time.sleep(0.2 * (attempt + 1))
    return None


def _without_commit_wait(url: str) -> str:
    """``url`` with ``synchronous_commit=off`` for Optuna's sessions only: Optuna writes
    once per suggested parameter, and not waiting for the WAL flush halves the cost of a
    proposal (about 130 ms instead of 260 ms for 18 parameters on the test server). A
    server crash may lose the last trials of the study, never corrupt it, and the results
    are in our tables, which keep the default."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    given = parsed.query.get("options", "")
    given = " ".join(given) if isinstance(given, tuple) else given
    options = f"{given} -c synchronous_commit=off".strip()
    return parsed.update_query_dict({"options": options}).render_as_string(hide_password=False)


def open_study(task: Task, strategy: Strategy, storage: Any,
               records: Iterable[Record], *, warm: bool = True) -> optuna.Study:
    """The study of ``task`` in ``storage`` (None: in memory), created if missing; with
    ``warm``, the ``records`` it lacks are added to it as finished trials.

    In a storage the study is named for people (``matmul 1024x1024x1024 f16 ascend910b
    (sampler, feasible-2)``) and found by its identity (``pypto.tuner.study_names``)."""
    import optuna

    from pypto.tuner.study_names import identity, named_study, short_name

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    name = f"{short_name(task.workload, task.target.name)} (sampler, {strategy.encoding})"
    if storage is None:
        study = optuna.create_study(sampler=strategy.sampler(), study_name=name,
                                    direction="minimize")
    else:
        study = named_study(storage, name, identity(task, "sampler", strategy.encoding),
                            sampler=strategy.sampler(),
                            attrs={"workload": task.workload.describe(),
                                   "target": task.target.name})
    if warm:
        present: set[str] = set()
        if storage is not None:
            present = {t.user_attrs.get(SCHEDULE_ATTR, "")
                       for t in study.get_trials(deepcopy=False)}
        trials = warm_trials(task, strategy, [r for r in records
                                              if r.schedule_key not in present])
        if trials:
            study.add_trials(trials)
    return study


def warm_trials(task: Task, strategy: Strategy, records: Iterable[Record]) -> list[Any]:
    """Finished Optuna trials for the records whose schedule is a point of the space."""
    import optuna

    out = []
    for r in records:
        encoded = strategy.encode(task.space, r.schedule)
        if encoded is None or r.status == "invalid":
            continue
        params, dists = encoded
        attrs = {SCHEDULE_ATTR: r.schedule_key}
        if r.status == "ok":
            out.append(optuna.trial.create_trial(params=params, distributions=dists,
                                                 value=float(r.cycles or 0), user_attrs=attrs))
        else:
            out.append(optuna.trial.create_trial(params=params, distributions=dists,
                                                 state=optuna.trial.TrialState.FAIL,
                                                 user_attrs=attrs))
    return out


def requeue(study: optuna.Study, task: Task, strategy: Strategy,
            claims: Iterable[Claim]) -> int:
    """Fail the trials of dead workers' ``claims`` and queue their schedules again; return
    how many were queued.

    A trial of this study is failed and retried by ``RetryHeartbeatStaleTrialCallback``
    (at most ``MAX_RETRY`` times: a schedule whose workers keep dying is given up); a claim
    from another study (another encoding, or an in-memory one) is queued by its schedule."""
    import optuna
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    name = study.study_name
    queued = 0
    for claim in claims:
        if claim.study == name and claim.trial is not None:
            try:
                running = study.get_trials(deepcopy=False)[claim.trial]
                # Study.tell takes a number but sets no attribute: the storage does
                study._storage.set_trial_user_attr(running._trial_id, REASON_ATTR,
                                                   f"its worker {claim.worker} died")
                study.tell(claim.trial, state=optuna.trial.TrialState.FAIL)
            except (ValueError, KeyError, IndexError, UpdateFinishedTrialError):
                continue        # finished meanwhile, or another worker failed it first
            # a copy: the callback appends to the retry history it is given
            failed = copy.deepcopy(study.get_trials(deepcopy=False)[claim.trial])
            retries = len(failed.system_attrs.get("retry_history", []))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                RetryHeartbeatStaleTrialCallback(max_retry=MAX_RETRY)(study, failed)
            queued += retries < MAX_RETRY
            continue
        encoded = strategy.encode(task.space, claim.schedule)
        if encoded is not None:
            study.enqueue_trial(encoded[0], user_attrs={"requeued_from": claim.worker})
            queued += 1
    return queued


def give_back(study: optuna.Study, trial: optuna.Trial) -> bool:
    """Fail ``trial``, asked but not to be measured (the budget was spent meanwhile, or the
    run stops); if ``ask`` took it from the queue as a dead worker's schedule (``requeue``),
    queue it again as it was, so that the next ask of any worker, in this run or the next,
    measures it. Return whether it was queued again.

    Optuna's study has no way back from RUNNING to WAITING, so the copy is a new waiting trial with
    the same parameters and attributes: its retry history does not grow (nobody died)."""
    import optuna

    states = optuna.trial.TrialState
    frozen = next((t for t in study.get_trials(deepcopy=False, states=(states.RUNNING,))
                   if t.number == trial.number), None)
    requeued = frozen is not None and ("failed_trial" in frozen.system_attrs
                                       or "requeued_from" in frozen.user_attrs)
    if frozen is not None and requeued:     # queued first: a kill in between loses nothing
        study.add_trial(optuna.trial.create_trial(
            state=states.WAITING, params=frozen.params, distributions=frozen.distributions,
            user_attrs=frozen.user_attrs, system_attrs=copy.deepcopy(frozen.system_attrs)))
    trial.set_user_attr(REASON_ATTR, "given back: not measured (the budget was spent "
                        "meanwhile, or the run stopped)")
    study.tell(trial, state=states.FAIL)
    return requeued


def _journal_file(path: Path) -> Any:
    """Optuna's ``JournalFileBackend`` with a lock the kernel frees when its process dies
    (``JournalFlock``), minus the ``fsync`` per append.

    The journal is the samplers' memory, not the record of results (the schedule database
    is), so a line lost to a power cut costs a sampler hint and nothing else; a killed
    process loses nothing written either way. An ``fsync`` per ``suggest`` made a
    proposal of 14 parameters about 30 ms slower on a 2-core VM (5 ms without).
    """
    import json

    from optuna.storages.journal import JournalFileBackend

    class JournalFile(JournalFileBackend):
        def __init__(self, file: str) -> None:
            self.file, self.lock = file, JournalFlock(file)
            super().__init__(file, lock_obj=self.lock)

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            text = "".join(json.dumps(log, separators=(",", ":")) + "\n" for log in logs)
            self.lock.acquire()
            try:
                with open(self.file, "ab") as f:
                    f.write(text.encode())
            finally:
                self.lock.release()

    return JournalFile(str(path))


class JournalFlock:
    """The journal's lock (what Optuna's ``JournalFileBackend`` calls ``acquire`` and
    ``release`` on): an exclusive ``flock`` on ``<journal>.flock``, opened anew by each
    ``acquire`` so that threads of one process exclude each other too.

    Optuna's ``JournalFileSymlinkLock`` is a symbolic link that a process killed while
    appending leaves behind, and the next writer waits out its 30-second grace period
    before breaking it; the kernel frees a ``flock`` the moment its holder dies."""

    def __init__(self, journal: str) -> None:
        self.path = journal + ".flock"
        self.fds: list[int] = []

    def acquire(self) -> bool:
        import fcntl
        import os

        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        self.fds.append(fd)     # after the lock: only its holder touches the list
        return True

    def release(self) -> None:
        import fcntl
        import os

        fd = self.fds.pop()
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
