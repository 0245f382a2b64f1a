"""Parallel and shared tuning: ``--workers N``, independent processes on one database
(SQLite, and the real PostgreSQL when ``PYPTO_TEST_PG_URL`` is set), SIGKILLed workers.

The tuning runs are real processes (``python -m pypto.cli tune``); the claims behind them
are tested directly over both backends first.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pypto.cli import app
from pypto.db import Record, TargetInfo, WorkerInfo, WorkloadInfo, open_store
from pypto.schedule_space import Schedule

ROOT = Path(__file__).resolve().parent.parent
PG_ENV = "PYPTO_TEST_PG_URL"
runner = CliRunner()


def gemm(n: int) -> str:
    return textwrap.dedent(f"""
        import numpy as np, pypto

        @pypto.kernel
        def gemm{n}(a, b):
            return pypto.matmul(a, b)

        a = pypto.tensor(np.ones(({n}, {n})), dtype="float16")
        b = pypto.tensor(np.ones(({n}, {n})), dtype="float16")
        gemm{n}(a, b)
    """)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    p = tmp_path / "gemm128.py"
    p.write_text(gemm(128))
    return p


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema (ours and Optuna's tables go
    there; dropped afterwards)."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"the PostgreSQL tests need {PG_ENV} (e.g. "
                    "postgresql+psycopg://postgres@127.0.0.1:5432/test)")
    schema = f"pypto_par_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        yield make_url(base).update_query_dict(
            {"options": f"-csearch_path={schema}"}).render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'claims.db'}"
    return str(request.getfixturevalue("pg_url"))


def tune_cmd(script: Path, url: str, trials: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "pypto.cli", "tune", str(script), "--trials", str(trials),
            "--db", url, "--strategy", "random", *extra]


def run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # a wide console: the progress line ("24/24 trials ...") is not cut to 80 columns
    # when its rate grows a digit
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          check=False, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    return done


def records(url: str) -> list[Record]:
    with open_store(url) as store:
        return store.records()


def tuned_us(stdout: str) -> str:
    """The 'tuned µs' cell of the summary table."""
    row = [line for line in stdout.splitlines() if re.match(r"^│ gemm\d+\[0\]", line)][-1]
    return [cell.strip() for cell in row.split("│")][3]


def measured_here(stderr: str) -> int:
    """How many trials a run says it measured itself."""
    if "nothing to do" in stderr:
        return 0
    found = re.search(r"\]: [a-z-]+: (\d+) measured", stderr)
    assert found, stderr
    return int(found.group(1))


def assert_exact(url: str, trials: int) -> list[str]:
    keys = [r.schedule_key for r in records(url)]
    assert len(keys) == trials
    assert len(set(keys)) == trials, "a schedule was measured twice"
    with open_store(url) as store:
        assert store.claims() == [], "claims outlived the run"
    return keys


# -- claims, over SQLite and PostgreSQL ------------------------------------------------------


def test_claims_are_exclusive_and_count_against_the_budget(url: str) -> None:
    store = open_store(url)
    wl = WorkloadInfo("a" * 64, "b" * 64, "matmul", "{}", 1, (1,))
    tgt = TargetInfo("t", "c" * 64)
    store.start_run(strategy="random", trials_asked=3, workload=wl, target=tgt)
    a, b = WorkerInfo("A", "h", 1), WorkerInfo("B", "h", 2)
    s = [Schedule(m1=16 * (i + 1)) for i in range(5)]

    def claim(sched: Schedule, who: WorkerInfo, **kw: object) -> str:
        return store.claim(wl.key, tgt.key, sched, worker=who, budget=3, **kw).status  # type: ignore[arg-type]

    assert claim(s[0], a) == "claimed"
    assert claim(s[0], b) == "busy"               # another live worker measures it
    assert claim(s[0], a) == "claimed"            # renewing one's own claim
    assert claim(s[1], b) == "claimed" and claim(s[2], b) == "claimed"
    assert claim(s[3], a) == "full"               # 3 in flight: the budget is held
    assert store.add_records([Record(wl.key, tgt.key, s[0], cycles=90)]) == 1
    assert [c.schedule_key for c in store.claims()] == [s[1].key, s[2].key]
    got = store.claim(wl.key, tgt.key, s[0], worker=b, budget=3)
    assert got.status == "measured" and got.record is not None and got.record.cycles == 90
    assert got.progress.measured == 1 and got.progress.in_flight == 2
    assert got.progress.best_cycles == 90
    assert [c.schedule_key for c in store.release("B", [s[1].key])] == [s[1].key]
    assert claim(s[3], a) == "claimed"            # a released claim frees its slot
    # B stops beating: after stale_after its claim is removed by the next claim
    time.sleep(0.3)
    store.heartbeat("A")
    late = store.claim(wl.key, tgt.key, s[4], worker=a, budget=4, stale_after=0.2)
    assert late.status == "claimed" and [c.schedule_key for c in late.reaped] == [s[2].key]
    assert late.reaped[0].worker == "B"
    assert store.progress(wl.key, tgt.key).in_flight == 2
    store.close()


def test_heartbeats_keep_claims_alive_and_dead_processes_here_lose_them(tmp_path: Path
                                                                       ) -> None:
    from pypto.tuner.liveness import dead_here, heartbeat, pid_alive

    store = open_store(f"sqlite:///{tmp_path / 'live.db'}")
    wl = WorkloadInfo("a" * 64, "b" * 64, "matmul", "{}", 1, (1,))
    tgt = TargetInfo("t", "c" * 64)
    store.start_run(strategy="random", trials_asked=3, workload=wl, target=tgt)
    me = WorkerInfo.current()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not pid_alive(gone.pid) and pid_alive(os.getpid())
    ghost = WorkerInfo("ghost", me.host, gone.pid)
    assert store.claim(wl.key, tgt.key, Schedule(m1=16), worker=me).status == "claimed"
    assert store.claim(wl.key, tgt.key, Schedule(m1=32), worker=ghost).status == "claimed"
    first = {c.worker: c.heartbeat for c in store.claims()}
    with heartbeat(store, me, interval=0.05):
        time.sleep(0.3)
    beats = {c.worker: c.heartbeat for c in store.claims()}
    assert beats[me.id] > first[me.id] and beats["ghost"] == first["ghost"]
    (freed,) = dead_here(store, wl.key, tgt.key, me)
    assert freed.worker == "ghost" and [c.worker for c in store.claims()] == [me.id]
    store.close()


def test_a_database_of_revision_0001_upgrades_to_claims(url: str) -> None:
    """Claims came with schema revision 0002: an older database is reported until
    ``pypto db upgrade``, which adds them and nothing else."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from pypto.db import DatabaseError, migrate, models
    from pypto.db.sql import SQLStore

    if url.startswith("sqlite"):
        Path(url.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
    assert migrate.upgrade(url, "0001") == (None, "0001")
    with pytest.raises(DatabaseError, match="revision 0001.*pypto db upgrade"):
        open_store(url).claims()
    assert migrate.upgrade(url) == ("0001", models.SCHEMA_REVISION)
    s = SQLStore(url)
    with s._get_engine().connect() as conn:
        ctx = MigrationContext.configure(conn, opts={
            "include_name": lambda name, type_, _: models.managed(name, type_),
            "include_object": lambda _, name, type_, *a: models.managed(name, type_)})
        assert compare_metadata(ctx, models.Base.metadata) == []
    assert s.claims() == []
    s.close()


# -- processes ---------------------------------------------------------------------------------


def test_workers_on_sqlite_add_up_exactly(script: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    done = run(tune_cmd(script, url, 24, "--workers", "2", "--strategy", "tpe"))
    assert "2 worker processes" in " ".join(done.stderr.split())
    assert re.search(r"24/24 trials", done.stderr), done.stderr
    assert_exact(url, 24)
    assert (tmp_path / "w.db.optuna-journal").is_file()     # the shared study
    with open_store(url) as store:
        (run_row,) = store.runs()
        assert (run_row.status, run_row.trials_done) == ("done", 24)
    again = run(tune_cmd(script, url, 24, "--workers", "2"))
    assert "nothing to do" in again.stderr
    assert_exact(url, 24)


def _two_processes(script: Path, url: str, trials: int, first: tuple[str, ...] = (),
                   second: tuple[str, ...] = ()) -> None:
    procs = [subprocess.Popen(tune_cmd(script, url, trials, *extra), cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for extra in (first, second)]
    outs = [p.communicate(timeout=180) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert_exact(url, trials)
    with open_store(url) as store:
        best = store.records(status="ok")[0]
        assert store.best(best.workload_key, best.target_key) == best
    us = {tuned_us(out) for out, _ in outs}
    assert len(us) == 1, f"the two runs print different bests: {us}"
    assert sum(measured_here(err) for _, err in outs) == trials


def test_two_processes_share_a_sqlite_database(script: Path, tmp_path: Path) -> None:
    _two_processes(script, f"sqlite:///{tmp_path / 'two.db'}", 30)


def test_two_processes_share_postgresql(script: Path, pg_url: str) -> None:
    """On PostgreSQL the study itself is shared (Optuna's RDB storage in the same schema,
    its tables apart from ours): one process with two workers and one alone. Beside the
    samplers' study, the study of records has every trial once."""
    import optuna

    _two_processes(script, pg_url, 24, first=("--workers", "2"))
    from sqlalchemy import create_engine, inspect

    engine = create_engine(pg_url)
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
    engine.dispose()
    assert {"studies", "trials", "pypto_records", "pypto_claims"} <= tables
    storage = optuna.storages.RDBStorage(pg_url)
    summaries = optuna.get_all_study_summaries(storage)
    # one of each: a twin sampler study would split the trials between the processes
    assert sorted(s.user_attrs["pypto"] for s in summaries) == ["records", "sampler"]
    studies = {s.user_attrs["pypto"]: s for s in summaries}
    assert studies["records"].study_name == "matmul 128x128x128 f16 ascend910b"
    sampler = optuna.load_study(study_name=studies["sampler"].study_name, storage=storage)
    told = [t for t in sampler.trials if t.state == optuna.trial.TrialState.COMPLETE]
    states = [(t.state.name, t.user_attrs.get("reason", "")) for t in sampler.trials]
    assert len(told) >= 23, states      # every trial but the default's
    kept = optuna.load_study(study_name=studies["records"].study_name, storage=storage)
    keys = [t.user_attrs["schedule_key"] for t in kept.trials]
    assert sorted(keys) == sorted(r.schedule_key for r in records(pg_url))
    assert kept.metric_names == ["cycles"]
    storage.engine.dispose()


def test_a_study_being_created_elsewhere_is_found_not_twinned() -> None:
    """The race behind a flaky PostgreSQL run: a process finds the study name taken while
    its creator is still writing the identity. It must wait for the whole identity and use
    that study, not compare half of it and create a twin (``name #digest``), which split
    the trials of two processes between two samplers' studies."""
    import threading

    import optuna

    from pypto.tuner.study_names import named_study

    storage = optuna.storages.InMemoryStorage()
    ident = {"pypto": "sampler", "workload_key": "w" * 8, "target_key": "t" * 8,
             "model_version": "m", "encoding": "feasible-2"}
    slow = storage.set_study_user_attr

    def slowly(study_id: int, key: str, value: object) -> None:
        if threading.current_thread().name == "creator":
            time.sleep(0.2)
        slow(study_id, key, value)

    storage.set_study_user_attr = slowly  # type: ignore[method-assign]
    found: dict[str, int] = {}

    def creator() -> None:
        found["creator"] = named_study(storage, "matmul 8x8x8", ident)._study_id

    thread = threading.Thread(target=creator, name="creator")
    thread.start()
    _wait_for(lambda: bool(storage.get_all_studies()), timeout=30)
    found["other"] = named_study(storage, "matmul 8x8x8", ident)._study_id
    thread.join()
    assert found["creator"] == found["other"]
    assert len(storage.get_all_studies()) == 1


def _wait_for(predicate: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _count(url: str) -> int:
    try:
        return len(records(url))
    except Exception:  # noqa: BLE001 - the schema may be half-created
        return 0


def test_sigkill_of_a_worker_run_then_rerun(script: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    cmd = tune_cmd(script, url, 30, "--workers", "2")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(lambda: _count(url) >= 6 or proc.poll() is not None)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    with open_store(url) as store:
        workers = {c.pid for c in store.claims()}
    from pypto.tuner.liveness import pid_alive

    _wait_for(lambda: not any(pid_alive(p) for p in workers), timeout=10)   # died with it
    kept = {r.schedule_key for r in records(url)}
    assert 6 <= len(kept) < 30
    from pypto.tuner.liveness import run_lost

    with open_store(url) as store:
        killed = store.runs()
    assert [r.status for r in killed] == ["running"] and run_lost(killed[0])
    assert killed[0].pid == proc.pid
    done = run(cmd)
    assert "30/30" in done.stderr
    keys = assert_exact(url, 30)
    assert kept <= set(keys)
    with open_store(url) as store:   # the rerun ended the killed run's row
        after = {r.id: r for r in store.runs()}
    assert after[killed[0].id].status == "interrupted"
    assert after[killed[0].id].finished_at is not None
    assert [r.status for i, r in after.items() if i != killed[0].id] == ["done"]


def test_a_killed_worker_is_replaced_and_its_schedule_requeued(tmp_path: Path) -> None:
    """SIGKILL one worker while it measures: the other frees its claim (its process is
    gone), fails its Optuna trial and re-queues the schedule, and the run still reaches its
    trial count exactly. (The re-queued trial is measured if budget is left for it, else
    it waits in the study for the next run.)"""
    import optuna

    from pypto.tuner.study import journal_path

    # A measurement of a 1024^3 GEMM takes long enough for a claim to be seen while it is
    # held (with 512^3 the run could finish between two looks on a loaded machine).
    script = tmp_path / "gemm1024.py"
    script.write_text(gemm(1024))
    url = f"sqlite:///{tmp_path / 'r.db'}"
    proc = subprocess.Popen(tune_cmd(script, url, 16, "--workers", "2"), cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    victim = None
    watcher = None
    try:
        def measuring() -> bool:
            """A worker's claim on a trial of the study (not the default's), seen while
            the run goes on; one store, looked at every few milliseconds."""
            nonlocal victim, watcher
            if proc.poll() is not None:
                return True
            if watcher is None:
                if _count(url) < 1:
                    return False
                watcher = open_store(url)
            victim = next((c for c in watcher.claims() if c.trial is not None), None)
            return victim is not None

        _wait_for(measuring, timeout=150)
        assert proc.poll() is None, "the run ended before a worker was seen measuring"
        assert victim is not None
        os.kill(victim.pid, signal.SIGKILL)
        interrupted = victim.schedule_key not in {r.schedule_key for r in records(url)}
        out, err = proc.communicate(timeout=300)
    finally:
        if watcher is not None:
            watcher.close()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert f"(pid {victim.pid}) died: killed by signal 9" in err
    keys = assert_exact(url, 16)
    if not interrupted:
        return      # it recorded just before the kill
    assert "re-queued" in " ".join(err.split())
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(journal_path(tmp_path / "r.db"))))
    (summary,) = [s for s in optuna.get_all_study_summaries(storage)
                  if s.user_attrs["pypto"] == "sampler"]
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
    assert trials[victim.trial].state == optuna.trial.TrialState.FAIL
    assert trials[victim.trial].user_attrs["reason"] == f"its worker {victim.worker} died"
    (retry,) = [t for t in trials if t.system_attrs.get("failed_trial") == victim.trial]
    assert retry.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.WAITING)
    assert (retry.state == optuna.trial.TrialState.COMPLETE) == (victim.schedule_key in keys)


def _dead_pid() -> int:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    return gone.pid


def test_a_requeued_schedule_is_not_lost_when_the_budget_fills(url: str) -> None:
    """The interleaving behind the flaky test above, step by step: a peer records a trial
    while this worker measures (so the count it keeps lags one behind the database) and a
    worker dies holding a claim that fills the budget. Asking first, this worker used to
    free the claim only when its claim found the budget full, measure a new point in the
    freed slot, then ask once more, pop the re-queued trial and fail it: budget full. It
    now waits for room before it asks, so the dead worker's schedule is measured."""
    import warnings

    import optuna

    import pypto
    from pypto.tuner.loop import TuneOptions, tune_task
    from pypto.tuner.strategies import get_strategy
    from pypto.tuner.study import open_storage, open_study
    from pypto.tuner.tasks import extract_tasks

    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (task,) = extract_tasks([k.lower(pypto.spec((128, 128), "float16"),
                                         pypto.spec((128, 128), "float16"))])
    store = open_store(url)
    study = open_study(task, get_strategy("random", 1), open_storage(url), [])
    me = WorkerInfo.current()
    ghost = WorkerInfo("ghost", me.host, _dead_pid())
    dead: list[tuple[int, Schedule]] = []
    ghost_strategy = get_strategy("random", 9)
    ghost_strategy.bind(task, study)

    def meanwhile(_: object) -> None:
        if dead:
            return
        import random

        peer = task.space.sample(random.Random(5))
        store.add_records([Record.measured(task.workload, task.target, peer, cycles=10**9)])
        proposal = ghost_strategy.propose()
        sched = proposal.schedule
        assert sched is not None
        assert store.claim(task.workload.key, task.target.key, sched, worker=ghost,
                           study=study.study_name, trial=proposal.number).status == "claimed"
        dead.append((proposal.number, sched))

    res = tune_task(task, store, TuneOptions("random", 4, seed=3, shared=True), worker=me,
                    on_progress=meanwhile)
    assert res.requeued == 1 and len(dead) == 1
    (number, sched), fail = dead[0], optuna.trial.TrialState.FAIL
    keys = [r.schedule_key for r in store.records()]
    assert len(keys) == len(set(keys)) == 4 and store.claims() == []
    trials = study.get_trials(deepcopy=False)
    assert trials[number].state == fail
    (retry,) = [t for t in trials if t.system_attrs.get("failed_trial") == number]
    assert retry.state == optuna.trial.TrialState.COMPLETE and sched.key in keys
    store.close()


def test_a_requeued_trial_asked_when_the_budget_is_full_is_queued_again() -> None:
    """Live workers racing for the last slot: the loser's claim finds the budget full.
    If its trial was a dead worker's schedule, ``give_back`` queues it again unchanged
    (same parameters, same retry history); any other trial is just failed."""
    import warnings

    import optuna
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    from pypto.tuner.study import give_back

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    dead = study.ask()
    dead.suggest_categorical("m1", [16, 32, 64])
    study.tell(dead, state=optuna.trial.TrialState.FAIL)
    failed = study.get_trials()[dead.number]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        RetryHeartbeatStaleTrialCallback(max_retry=2)(study, failed)
    popped = study.ask()
    assert popped.suggest_categorical("m1", [16, 32, 64]) == dead.params["m1"]
    assert give_back(study, popped)
    again = study.ask()
    assert again.suggest_categorical("m1", [16, 32, 64]) == dead.params["m1"]
    frozen = study.get_trials()
    assert frozen[popped.number].state == optuna.trial.TrialState.FAIL
    assert frozen[again.number].system_attrs["retry_history"] == [dead.number]
    fresh = study.ask()
    fresh.suggest_categorical("m1", [16, 32, 64])
    assert not give_back(study, fresh)
    assert [t.state for t in study.get_trials()].count(optuna.trial.TrialState.WAITING) == 0


def test_a_dead_workers_claims_are_freed_once(url: str) -> None:
    """Two peers free a dead worker's claims at the same moment: one gets them (and
    re-queues the schedules), the other nothing, on PostgreSQL's READ COMMITTED too."""
    import threading

    from pypto.db import claims as cl

    wl = WorkloadInfo("a" * 64, "b" * 64, "matmul", "{}", 1, (1,))
    tgt = TargetInfo("t", "c" * 64)
    first, second = open_store(url), open_store(url)
    first.start_run(strategy="random", trials_asked=3, workload=wl, target=tgt)
    ghost = WorkerInfo("ghost", "h", 1)
    assert first.claim(wl.key, tgt.key, Schedule(m1=16), worker=ghost).status == "claimed"
    got: list[list[object]] = []
    with first._tx(write=True) as conn:
        assert len(cl.release(conn, "ghost", None)) == 1
        peer = threading.Thread(target=lambda: got.append(second.release("ghost")))
        peer.start()
        peer.join(0.5)
        assert peer.is_alive()      # it waits for this transaction
    peer.join(30)
    assert got == [[]] and first.claims() == []
    first.close()
    second.close()


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize("extra, message", [
    (["--workers", "0"], "--workers must be at least 1, got 0"),
    (["--workers", "-2"], "--workers must be at least 1, got -2"),
    (["--workers", "2", "--db", "sqlite://"], "needs a database the worker processes can "
                                              "share"),
])
def test_bad_workers(extra: list[str], message: str, script: Path, tmp_path: Path) -> None:
    args = ["tune", str(script), *extra]
    if "--db" not in extra:
        args += ["--db", f"sqlite:///{tmp_path / 'b.db'}"]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    assert message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1
