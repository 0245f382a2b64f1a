"""The studies Optuna's tools open (issue 14, item 4): every run of ``pypto tune`` leaves
a study of its records where ``optuna.load_study`` finds it, with the schedules' real values,
the objective named ``cycles``, a short readable name and the reason of each failure."""

from __future__ import annotations

import subprocess
import sys
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pypto.db import Record, open_store

ROOT = Path(__file__).resolve().parents[1]
GEMM = "matmul 1024x1024x1024 f16 ascend910b"


def journal(db: Path) -> Any:
    """Optuna's own reading of the journal beside ``db`` (no PyPTO code involved)."""
    import optuna

    return optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(db) + ".optuna-journal"))


def tune(db: Path, trials: int, *extra: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "pypto.cli", "tune", "examples/gemm.py",
                           "--trials", str(trials), "--db", f"sqlite:///{db}", "--seed", "0",
                           *extra], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done


def assert_study_of_records(db: Path, trials: int) -> None:
    """The study named for the GEMM holds every record of the database once, with the
    schedule's real values as parameters and the cycles as the value."""
    import optuna

    from pypto.schedule_space import space_for

    study = optuna.load_study(study_name=GEMM, storage=journal(db))
    assert study.metric_names == ["cycles"]
    with open_store(f"sqlite:///{db}") as store:
        recs = {r.schedule_key: r for r in store.records()}
        (info,) = store.workloads()
        (target,) = store.targets()
    assert study.user_attrs["workload_key"] == info.key
    assert study.user_attrs["target_key"] == target.key
    assert len(recs) == trials
    assert sorted(t.user_attrs["schedule_key"] for t in study.trials) == sorted(recs)
    from pypto.targets import load_target

    space = space_for(info.workload(), load_target("ascend910b"))
    for t in study.trials:
        r = recs[t.user_attrs["schedule_key"]]
        assert t.params == dict(r.schedule)
        assert all(t.params[k] in space.axes[k].choices for k in space.axes)
        if r.status == "ok":
            assert t.state == optuna.trial.TrialState.COMPLETE and t.value == r.cycles
        else:
            assert t.state == optuna.trial.TrialState.FAIL and r.status in t.user_attrs["reason"]
    assert study.best_value == min(r.cycles for r in recs.values() if r.cycles)


def test_a_single_process_run_leaves_a_study_optuna_opens(tmp_path: Path) -> None:
    """The acceptance of issue 14: ``pypto tune`` (one process, a real subprocess) writes a
    study that ``optuna.load_study`` opens, with real schedule values and the named
    objective; a second run adds only its own trials."""
    db = tmp_path / "t.db"
    tune(db, 8)
    assert_study_of_records(db, 8)
    tune(db, 12, "--strategy", "tpe")
    assert_study_of_records(db, 12)
    import optuna

    names = [s.study_name for s in optuna.get_all_study_summaries(journal(db))]
    assert names == [GEMM]      # a single process keeps its sampler in memory


def test_workers_leave_the_same_study_and_a_sampler_study_with_real_values(
        tmp_path: Path) -> None:
    import optuna

    db = tmp_path / "w.db"
    tune(db, 12, "--workers", "2", "--strategy", "tpe")
    assert_study_of_records(db, 12)
    studies = {s.user_attrs["pypto"]: s for s in optuna.get_all_study_summaries(journal(db))}
    assert set(studies) == {"records", "sampler"}
    sampler = optuna.load_study(study_name=studies["sampler"].study_name, storage=journal(db))
    assert sampler.study_name == f"{GEMM} (sampler, feasible-2)"
    assert sampler.metric_names == ["cycles"]
    with open_store(f"sqlite:///{db}") as store:
        schedules = {r.schedule_key: dict(r.schedule) for r in store.records()}
    labelled = [t for t in sampler.trials if "schedule" in t.user_attrs]
    assert labelled
    for t in labelled:      # the encoded floats, and beside them the real values
        assert t.user_attrs["schedule"] == schedules[t.user_attrs["schedule_key"]]
    for t in sampler.trials:
        if t.state == optuna.trial.TrialState.FAIL:
            assert t.user_attrs["reason"]


def test_every_failed_trial_of_a_sampler_study_says_why(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Duplicates, infeasible points and given-back proposals: each ``FAIL`` trial of
    the samplers' study has a ``reason``."""
    from test_tuner import _tune_relu_16

    res, trials = _tune_relu_16("tpe", 60, f"sqlite:///{tmp_path / 'd.db'}", monkeypatch)
    assert res.duplicates > 0
    reasons = Counter(dict(t[4]).get("reason", "")
                      for t in trials if t[1] == "FAIL")
    assert reasons and "" not in reasons
    assert reasons["duplicate: measured already"] >= 1


def _task() -> Any:
    import pypto
    from pypto.tuner.tasks import extract_tasks

    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (task,) = extract_tasks([k.lower(pypto.spec((64, 64), "float16"),
                                         pypto.spec((64, 32), "float16"))])
    return task


def test_a_failed_record_is_a_failed_trial_with_its_reason_and_foreign_schedules_stay(
        ) -> None:
    import optuna

    from pypto.schedule_space import Schedule
    from pypto.tuner.record_study import trial_of

    task = _task()
    default = task.space.default()
    wl, tg = task.workload.key, task.target.key
    failed = trial_of(Record(wl, tg, default, status="error", error="lowering: boom",
                             run_id=3), task.space)
    assert failed.state == optuna.trial.TrialState.FAIL and failed.value is None
    assert failed.user_attrs == {"schedule_key": default.key, "run_id": 3,
                                 "reason": "error: lowering: boom"}
    assert failed.params == dict(default)
    odd = Schedule({**dict(default), "m1": 12345})       # not a point of this space
    kept = trial_of(Record(wl, tg, odd, cycles=99), task.space)
    assert kept.params == {} and kept.user_attrs["schedule"] == dict(odd)
    assert kept.value == 99.0


def test_names_are_short_and_a_taken_name_gets_a_digest() -> None:
    """Two workloads that read alike (same ops, shape, dtype and target; e.g. an input in
    another layout) get two studies: the second named with a digest of its identity; each
    is found again by its identity."""
    import optuna

    from pypto.tuner.study_names import identity, named_study, short_name

    a = _task()
    assert short_name(a.workload, "ascend910b") == "matmul 64x64x32 f16 ascend910b"
    storage = optuna.storages.InMemoryStorage()
    ident_a = identity(a, "records")
    ident_b = {**identity(a, "records"), "workload_key": "f" * 64}   # another workload
    first = named_study(storage, "matmul 64x64x32 f16 ascend910b", ident_a)
    second = named_study(storage, "matmul 64x64x32 f16 ascend910b", ident_b)
    assert first.study_name == "matmul 64x64x32 f16 ascend910b"
    assert second.study_name.startswith("matmul 64x64x32 f16 ascend910b #")
    assert len(second.study_name) < 45
    again = named_study(storage, "matmul 64x64x32 f16 ascend910b", ident_b)
    assert again.study_name == second.study_name
    assert second.user_attrs["workload_key"] == "f" * 64
    assert second.metric_names == ["cycles"]


def test_a_run_adds_the_records_its_study_lacks_once(tmp_path: Path) -> None:
    """Records imported (or measured before the study existed) join the study at the next
    run; a rerun adds nothing twice; records of a run still running are left to it."""
    import optuna

    from pypto.db import TargetInfo, WorkloadInfo
    from pypto.tuner.loop import TuneOptions, tune_task

    task = _task()
    url = f"sqlite:///{tmp_path / 'c.db'}"
    rng = __import__("random").Random(0)
    with open_store(url) as store:
        run = store.start_run(strategy="random", trials_asked=3)
        live = store.start_run(strategy="random", trials_asked=3)
        samples = list({s.key: s for s in (task.space.sample(rng) for _ in range(20))}.values())
        store.add_records([Record(task.workload.key, task.target.key, s, cycles=1000 + i,
                                  run_id=run if i < 3 else live if i == 3 else None)
                           for i, s in enumerate(samples[:5])],
                          workloads=[WorkloadInfo.of(task.workload)],
                          targets=[TargetInfo.of(task.target)])
        store.update_run(run, status="done")
        tune_task(task, store, TuneOptions("random", 8, seed=1))
        tune_task(task, store, TuneOptions("random", 10, seed=2))
        keys = {r.schedule_key for r in store.records()}
    storage = journal(tmp_path / "c.db")
    (summary,) = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
    got = [t.user_attrs["schedule_key"] for t in trials]
    assert len(got) == len(set(got)) == len(keys) - 1
    assert set(got) == keys - {samples[3].key}      # the live run's record: its own to add


def test_an_in_memory_database_keeps_no_study() -> None:
    from pypto.tuner.record_study import RecordStudy

    assert RecordStudy.open("sqlite://", _task()) is None


# -- pypto dashboard ----------------------------------------------------------------------


def test_dashboard_without_the_package_names_the_install_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from pypto.cli import app

    monkeypatch.setitem(sys.modules, "optuna_dashboard", None)    # not installed
    out = CliRunner().invoke(app, ["dashboard", "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    assert out.exit_code == 1
    assert "pip install optuna-dashboard" in out.output
    assert "Traceback" not in out.output


def test_dashboard_on_an_in_memory_or_missing_database_says_so(tmp_path: Path) -> None:
    pytest.importorskip("optuna_dashboard")
    from typer.testing import CliRunner

    from pypto.cli import app

    out = CliRunner().invoke(app, ["dashboard", "--db", f"sqlite:///{tmp_path / 'none.db'}"])
    assert out.exit_code == 1 and "no schedule database" in out.output
    out = CliRunner().invoke(app, ["dashboard", "--db", "sqlite://"])
    assert out.exit_code == 1 and "no schedule database" in out.output


def test_publish_all_brings_imported_records_into_their_study(tmp_path: Path) -> None:
    """Records that no run wrote to a study (imported logs) join it before the dashboard
    starts."""
    import optuna

    from pypto.db import TargetInfo, WorkloadInfo
    from pypto.tuner.dashboard import publish_all

    task = _task()
    url = f"sqlite:///{tmp_path / 'i.db'}"
    rng = __import__("random").Random(3)
    samples = list({s.key: s for s in (task.space.sample(rng) for _ in range(9))}.values())
    with open_store(url) as store:
        store.add_records([Record(task.workload.key, task.target.key, s, cycles=500 + i,
                                  source="import") for i, s in enumerate(samples)],
                          workloads=[WorkloadInfo.of(task.workload)],
                          targets=[TargetInfo.of(task.target)])
        assert publish_all(store) == 1
        assert publish_all(store) == 1      # nothing added twice
    study = optuna.load_study(study_name="matmul 64x64x32 f16 ascend910b",
                              storage=journal(tmp_path / "i.db"))
    assert sorted(t.value for t in study.trials) == [500.0 + i for i in range(len(samples))]


def test_dashboard_serves_the_studies(tmp_path: Path) -> None:
    """With optuna-dashboard installed, ``pypto dashboard`` serves the study of records
    (its API lists it, and its trials have the real values)."""
    pytest.importorskip("optuna_dashboard")
    import json
    import socket
    import time
    import urllib.request

    db = tmp_path / "d.db"
    tune(db, 4)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "pypto.cli", "dashboard", "--db",
                             f"sqlite:///{db}", "--port", str(port)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline, studies = time.time() + 60, None
        while studies is None and time.time() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies",
                                            timeout=5) as r:
                    studies = json.load(r)["study_summaries"]
            except OSError:
                time.sleep(0.2)
        assert studies is not None, proc.stdout.read() if proc.poll() is not None else ""
        (study,) = studies
        assert study["study_name"] == GEMM
        with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/api/studies/{study['study_id']}?after=0",
                timeout=10) as r:
            detail = json.load(r)
        assert len(detail["trials"]) == 4
        assert {p["name"] for p in detail["trials"][0]["params"]} >= {"m1", "n1", "k1"}
        assert detail["objective_names"] == ["cycles"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_study_that_cannot_be_written_warns_and_tuning_goes_on(tmp_path: Path) -> None:
    from pypto.tuner.loop import TuneOptions, tune_task

    (tmp_path / "w.db.optuna-journal").mkdir()       # no file can be written there
    with open_store(f"sqlite:///{tmp_path / 'w.db'}") as store:
        with pytest.warns(RuntimeWarning, match="Optuna study of the tuning records"):
            res = tune_task(_task(), store, TuneOptions("random", 4, seed=0))
        assert res.status == "done" and len(store.records()) == 4
