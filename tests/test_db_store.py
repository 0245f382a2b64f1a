"""``ScheduleStore`` conformance: one test class, run over SQLite and the real PostgreSQL.

PostgreSQL runs when ``PYPTO_TEST_PG_URL`` is set (``.ci/run`` sets it); each test gets
its own schema, dropped afterwards, so concurrent runs and Optuna's tables in the same
database are never touched.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import uuid
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from multiprocessing import get_context
from pathlib import Path

import pytest

import pypto
from pypto.db import (
    CostModelBlob,
    DatabaseError,
    Record,
    TargetInfo,
    WorkloadInfo,
    open_store,
)
from pypto.db.records import log_distance
from pypto.errors import LogFormatError
from pypto.schedule_space import Schedule
from pypto.sim import MODEL_VERSION
from pypto.targets import load_target

PG_ENV = "PYPTO_TEST_PG_URL"
TARGET = load_target("ascend910b")
OTHER_TARGET = load_target("ascend310")


def _workload(m: int, k: int, n: int, relu: bool = False) -> WorkloadInfo:
    fn = (lambda a, b: pypto.relu(pypto.matmul(a, b))) if relu else pypto.matmul
    compiled = pypto.kernel(fn).lower(pypto.spec((m, k), "float16"),
                                      pypto.spec((k, n), "float16"))
    return WorkloadInfo.of(compiled.workloads[0])


@pytest.fixture(scope="module")
def wls() -> dict[str, WorkloadInfo]:
    return {"small": _workload(64, 64, 64), "mid": _workload(128, 128, 128),
            "big": _workload(512, 512, 512), "relu": _workload(128, 128, 128, relu=True)}


def rec(wl: WorkloadInfo, cycles: int | None, tag: int, *, status: str = "ok",
        target: TargetInfo | None = None, version: str = MODEL_VERSION, **kw: object) -> Record:
    t = target or TargetInfo.of(TARGET)
    return Record(wl.key, t.key, Schedule(m1=16 * (tag + 1), tag=tag), cycles=cycles,
                  status=status, error=None if status == "ok" else f"{status} #{tag}",
                  model_version=version, target_name=t.name, **kw)  # type: ignore[arg-type]


def real_rec(wl: WorkloadInfo, cycles: int | None, tag: int, *, status: str = "ok",
             target: TargetInfo | None = None) -> Record:
    """A record an import accepts: a schedule of the workload's own space (sample ``tag``)
    and cycles above its roofline bound (``cycles`` on top of the bound)."""
    from pypto.schedule_space import space_for
    from pypto.sim.roofline import workload_bound

    t = target or TargetInfo.of(TARGET)
    real_target, workload = load_target(t.name), wl.workload()
    schedule = space_for(workload, real_target).sample(tag)
    bound = workload_bound(workload, real_target)
    return Record(wl.key, t.key, schedule, cycles=None if cycles is None else bound + cycles,
                  status=status, error=None if status == "ok" else f"{status} #{tag}",
                  target_name=t.name)


def must(record: Record | None) -> Record:
    assert record is not None
    return record


# -- backends ------------------------------------------------------------------------------


def _pg_base() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"the PostgreSQL backend needs {PG_ENV} (e.g. "
                    "postgresql+psycopg://postgres@127.0.0.1:5432/test); CI sets it")
    return url


@pytest.fixture
def pg_url() -> object:
    """A PostgreSQL URL whose search_path is a fresh schema (dropped afterwards)."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    base = _pg_base()
    schema = f"pypto_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    url = make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        from pypto.compile import resolver as lookup

        lookup.reset()
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'logs' / 'store.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def store(url: str):
    s = open_store(url)
    yield s
    s.close()


def _add(store, wl: WorkloadInfo, records: list[Record], target=None, **kw):
    return store.add_records(records, workloads=[wl], targets=[target or TargetInfo.of(TARGET)],
                             **kw)


# -- the conformance suite -----------------------------------------------------------------


class TestScheduleStore:
    """The contract of ``ScheduleStore`` (see its docstring), on every backend."""

    def test_empty_store_reads_empty_and_creates_nothing(self, store, url, wls):
        small = wls["small"]
        assert store.stats().exists is False and store.stats().records == 0
        assert store.best(small.key, TARGET.key) is None
        assert store.records() == [] and store.workloads() == [] and store.targets() == []
        assert store.nearest(small.family_key, TARGET.key, small.sizes) == []
        assert store.runs() == [] and store.summary() == [] and store.prune_stale() == 0
        assert store.load_cost_model(TARGET.key, "matmul") is None
        assert store.get_meta("x") is None
        if url.startswith("sqlite"):
            assert not Path(url.split("///", 1)[1]).parent.exists()

    def test_best_is_fewest_ok_cycles_of_this_target_and_model_version(self, store, wls):
        small, other = wls["small"], TargetInfo.of(OTHER_TARGET)
        records = [rec(small, 900, 0), rec(small, 700, 1), rec(small, 800, 2),
                   rec(small, None, 3, status="error"), rec(small, None, 4, status="invalid"),
                   rec(small, None, 5, status="timeout"),
                   rec(small, 100, 6, version="sim-0.old"), rec(small, 50, 7, target=other)]
        assert store.add_records(records, workloads=[small],
                                 targets=[TargetInfo.of(TARGET), other]) == 8
        best = store.best(small.key, TARGET.key)
        assert best is not None and best.cycles == 700 and best.schedule["tag"] == 1
        assert best.source == "tune" and best.target_name == "ascend910b"
        assert best.created_at is not None and best.created_at.tzinfo is not None
        assert store.best(small.key, other.key).cycles == 50
        assert store.best(small.key, TARGET.key, "sim-0.old").cycles == 100
        assert store.best(small.key, TARGET.key, "sim-9.none") is None
        assert store.best(wls["mid"].key, TARGET.key) is None
        with pytest.raises(dataclasses.FrozenInstanceError):
            best.cycles = 1

    def test_ties_go_to_the_earliest(self, store, wls):
        _add(store, wls["small"], [rec(wls["small"], 500, 0)])
        _add(store, wls["small"], [rec(wls["small"], 500, 1)])
        assert store.best(wls["small"].key, TARGET.key).schedule["tag"] == 0

    def test_adding_twice_adds_nothing_and_replace_overwrites(self, store, wls):
        small = wls["small"]
        batch = [rec(small, 900, 0), rec(small, 800, 1)]
        assert _add(store, small, batch) == 2
        assert _add(store, small, batch) == 0
        assert _add(store, small, batch + [rec(small, 800, 1)]) == 0  # duplicates in a batch
        assert len(store.records()) == 2
        assert _add(store, small, [rec(small, 600, 0)], replace=True) == 1
        assert store.best(small.key, TARGET.key).cycles == 600
        assert len(store.records()) == 2

    def test_a_batch_is_all_or_nothing(self, store, wls):
        small, mid = wls["small"], wls["mid"]
        _add(store, small, [rec(small, 900, 0)])
        with pytest.raises(DatabaseError, match="unknown workload"):
            _add(store, small, [rec(small, 100, 1), rec(mid, 100, 2)])  # mid not registered
        assert [r.cycles for r in store.records()] == [900]

    def test_records_filter_and_order(self, store, wls):
        small, mid = wls["small"], wls["mid"]
        _add(store, small, [rec(small, 900, 0), rec(small, None, 1, status="error"),
                            rec(small, 300, 2)])
        _add(store, mid, [rec(mid, 500, 0)])
        got = store.records(workload_key=small.key)
        assert [(r.status, r.cycles) for r in got] == [("ok", 300), ("ok", 900), ("error", None)]
        assert got[2].error == "error #1"
        assert len(store.records(status="ok")) == 3
        assert len(store.records(limit=2)) == 2
        assert store.records(target_key=OTHER_TARGET.key) == []
        assert {r.workload_key for r in store.records(model_version=MODEL_VERSION)} == \
            {small.key, mid.key}

    def test_nearest_orders_tuned_shapes_of_the_family_by_log_distance(self, store, wls):
        for name in ("small", "mid", "big", "relu"):
            _add(store, wls[name], [rec(wls[name], 1000 + len(name), 0), rec(wls[name], 900, 1)])
        query = _workload(100, 100, 100)
        found = store.nearest(query.family_key, TARGET.key, query.sizes, limit=5)
        assert [n.workload.key for n in found] == [wls["mid"].key, wls["small"].key,
                                                   wls["big"].key]  # relu: another family
        assert found[0].distance == pytest.approx(log_distance(query.sizes, wls["mid"].sizes))
        assert found[0].record.cycles == 900 and found[0].record.workload_key == wls["mid"].key
        assert len(store.nearest(query.family_key, TARGET.key, query.sizes, limit=1)) == 1
        assert wls["mid"].key not in [n.workload.key for n in store.nearest(
            query.family_key, TARGET.key, query.sizes, exclude=wls["mid"].key)]
        assert store.nearest(query.family_key, OTHER_TARGET.key, query.sizes) == []
        assert store.nearest(query.family_key, TARGET.key, query.sizes,
                             model_version="sim-0.old") == []

    def test_workloads_targets_and_key_prefixes(self, store, wls):
        small, mid = wls["small"], wls["mid"]
        _add(store, small, [rec(small, 900, 0)])
        _add(store, mid, [rec(mid, 900, 0)])
        assert [w.key for w in store.workloads()] == sorted([small.key, mid.key])
        assert store.workload(small.key[:10]) == small
        assert store.workload(small.key).workload().key == small.key
        with pytest.raises(DatabaseError, match="no workload"):
            store.workload("ffff0000")
        with pytest.raises(DatabaseError, match="ambiguous"):
            store.workload("")  # matches both
        [target] = store.targets()
        assert target == TargetInfo.of(TARGET) and target.descriptor

    def test_a_missing_target_descriptor_is_filled_in_later(self, store, wls):
        bare = TargetInfo(TARGET.name, TARGET.key, None)
        small = wls["small"]
        store.add_records([rec(small, 900, 0)], workloads=[small], targets=[bare])
        assert store.targets()[0].descriptor is None
        _add(store, small, [])
        assert store.targets()[0].descriptor == TargetInfo.of(TARGET).descriptor

    def test_summary_and_stats(self, store, wls):
        small = wls["small"]
        _add(store, small, [rec(small, 900, 0), rec(small, 800, 1),
                            rec(small, None, 2, status="error"),
                            rec(small, 100, 3, version="sim-0.old")])
        rows = store.summary()
        assert [(r.model_version, r.records, r.ok, r.best_cycles) for r in rows] == \
            sorted([(MODEL_VERSION, 3, 2, 800), ("sim-0.old", 1, 1, 100)])
        s = store.stats()
        assert (s.exists, s.workloads, s.targets, s.records) == (True, 1, 1, 4)
        assert dict(s.by_status) == {"ok": 3, "error": 1} and s.stale() == 1

    def test_prune_stale_keeps_the_current_model_version(self, store, wls):
        small = wls["small"]
        _add(store, small, [rec(small, 900, 0), rec(small, 100, 1, version="sim-0.old")])
        assert store.prune_stale() == 1
        assert [r.model_version for r in store.records()] == [MODEL_VERSION]

    def test_runs(self, store, wls):
        first = store.start_run(strategy="tpe", trials_asked=50, command="pypto tune g.py",
                                host="h1", workload=wls["small"], target=TargetInfo.of(TARGET))
        second = store.start_run(strategy="random", trials_asked=10)
        _add(store, wls["small"], [rec(wls["small"], 900, 0, run_id=first)])
        assert store.records()[0].run_id == first
        store.update_run(first, trials_done=50, best_cycles=900, status="done")
        store.update_run(second, trials_done=3)
        runs = store.runs()
        assert [r.id for r in runs] == [second, first]
        done = runs[1]
        assert (done.status, done.trials_done, done.best_cycles, done.host) == \
            ("done", 50, 900, "h1")
        assert done.workload_key == wls["small"].key and done.finished_at is not None
        assert runs[0].status == "running" and runs[0].finished_at is None
        assert len(store.runs(limit=1)) == 1
        with pytest.raises(DatabaseError, match="no run"):
            store.update_run(999_999, trials_done=1)
        with pytest.raises(DatabaseError, match="status"):
            store.update_run(first, status="exploded")

    def test_add_runs_finds_an_equal_run_or_adds_it_as_it_is(self, store, wls):
        """Runs from another database: one equal to a run here is that run; others are
        added with their status, counts and times (their ids are not used)."""
        from pypto.db import Run

        here = store.start_run(strategy="tpe", trials_asked=5, host="h", command="c",
                               workload=wls["small"], target=TargetInfo.of(TARGET))
        (mine,) = store.runs()
        t0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
        _add(store, wls["mid"], [rec(wls["mid"], 900, 0)])    # registers the workload
        theirs = Run(77, "model", "interrupted", 9, 4, 1234, "pypto tune x.py", "h2",
                     wls["mid"].key, TARGET.key, t0, t0 + timedelta(seconds=3))
        ids = store.add_runs([dataclasses.replace(mine, id=5), theirs, theirs])
        assert ids[0] == here and ids[1] == ids[2] != here
        added = next(r for r in store.runs() if r.id == ids[1])
        assert dataclasses.replace(added, id=77) == theirs
        assert store.add_runs([theirs]) == [ids[1]]
        assert len(store.runs()) == 2
        with pytest.raises(DatabaseError, match="status"):
            store.add_runs([dataclasses.replace(theirs, status="exploded")])

    def test_a_run_whose_process_died_is_lost_and_the_next_run_ends_it(self, store, wls):
        """A ``running`` run keeps its process and heartbeat: on this host a gone process
        means it was killed (its records are then settled, and the next run ends it as
        interrupted); on another host a heartbeat older than ``RUN_STALE_AFTER`` does."""
        import socket
        import subprocess
        import sys
        import time

        from pypto.tuner.liveness import RUN_STALE_AFTER, end_lost_runs, run_lost
        from pypto.tuner.record_study import settled

        gone = subprocess.Popen([sys.executable, "-c", "pass"])
        gone.wait()
        here, t = socket.gethostname(), TargetInfo.of(TARGET)
        dead = store.start_run(strategy="tpe", trials_asked=5, host=here, workload=wls["small"],
                               target=t, pid=gone.pid)
        live = store.start_run(strategy="tpe", trials_asked=5, host=here, workload=wls["mid"],
                               target=t, pid=os.getpid())
        away = store.start_run(strategy="tpe", trials_asked=5, host="elsewhere",
                               workload=wls["big"], target=t, pid=os.getpid())
        _add(store, wls["small"], [rec(wls["small"], 900, 0, run_id=dead)])
        _add(store, wls["mid"], [rec(wls["mid"], 800, 0, run_id=live)])
        runs = {r.id: r for r in store.runs()}
        assert runs[dead].pid == gone.pid and abs(runs[dead].heartbeat - time.time()) < 60
        assert run_lost(runs[dead]) and not run_lost(runs[live])
        # this host's live process decides, however old its heartbeat
        assert not run_lost(runs[live], now=time.time() + 10 * RUN_STALE_AFTER)
        # another host's run: its heartbeat decides; update_run with nothing else beats
        assert not run_lost(runs[away])
        later = time.time() + RUN_STALE_AFTER + 1
        assert run_lost(runs[away], now=later)
        store.update_run(away)
        assert store.runs()[0].heartbeat >= runs[away].heartbeat
        assert [r.cycles for r in settled(store, store.iter_records())] == [900]
        assert end_lost_runs(store) == [dead]
        runs = {r.id: r for r in store.runs()}
        assert runs[dead].status == "interrupted" and runs[dead].finished_at is not None
        assert runs[live].status == runs[away].status == "running"
        assert sorted(r.cycles for r in settled(store, store.iter_records())) == [900]
        store.update_run(live, status="done")
        assert sorted(r.cycles for r in settled(store, store.iter_records())) == [800, 900]

    def test_cost_models_round_trip_bytes(self, store):
        t = TargetInfo.of(TARGET)
        blob = bytes(range(256)) * 40
        store.save_cost_model(CostModelBlob(t.key, "matmul", blob, "ubj", '{"top1": 0.9}',
                                            1234), t)
        got = store.load_cost_model(t.key, "matmul")
        assert got is not None and got.blob == blob and got.format == "ubj"
        assert (got.metrics, got.samples, got.model_version) == ('{"top1": 0.9}', 1234,
                                                                 MODEL_VERSION)
        store.save_cost_model(CostModelBlob(t.key, "matmul", b"{}", "json", "{}", 5), t)
        assert store.load_cost_model(t.key, "matmul").blob == b"{}"
        assert store.load_cost_model(t.key, "vector") is None
        assert store.load_cost_model(t.key, "matmul", "sim-0.old") is None

    def test_trained_cost_model_round_trip(self, store, wls):
        """train_from_store -> save -> load_from_store predicts identically."""
        import numpy as np

        from pypto.cost_model.features import featurize
        from pypto.db.cost_models import load_from_store, train_from_store
        from pypto.schedule_space import space_for
        from pypto.tuner.measure import Measurer

        for name in ("small", "mid"):
            wl = wls[name].workload()
            space = space_for(wl, TARGET)
            pts = [space.default(), *space.neighbors(space.default())][:8]
            meas = Measurer(wl, TARGET, space=space)
            _add(store, wls[name], [Record.measured(wl, TARGET, s, cycles=meas(s).cycles)
                                    for s in pts])
        model = train_from_store(store, TARGET, "matmul", rounds=10)
        got = load_from_store(store, TARGET, "matmul")
        assert got is not None and (got.samples, got.workloads) == (model.samples, 2)
        blob = store.load_cost_model(TARGET.key, "matmul")
        assert blob.format == "ubj" and blob.samples == model.samples
        assert '"feature_version"' in blob.metrics
        wl = wls["big"].workload()
        x = featurize(wl, [space_for(wl, TARGET).default()], TARGET)
        assert np.array_equal(got.predict(x), model.predict(x))
        assert load_from_store(store, TARGET, "vector") is None

    def test_meta(self, store):
        store.set_meta("imported:a.jsonl", "abc")
        store.set_meta("imported:a.jsonl", "def")
        assert store.get_meta("imported:a.jsonl") == "def"

    def test_export_then_import_into_an_empty_store(self, store, wls, tmp_path):
        small, mid = wls["small"], wls["mid"]
        _add(store, small, [real_rec(small, 900, 0), real_rec(small, None, 1, status="timeout")])
        other = TargetInfo.of(OTHER_TARGET)
        _add(store, mid, [real_rec(mid, 700, 0, target=other)], target=other)
        path = tmp_path / "out" / "log.jsonl"
        assert store.export_jsonl(path) == 3
        with open_store(f"sqlite:///{tmp_path / 'fresh.db'}") as fresh:
            report = fresh.import_jsonl(path)
            assert (report.lines, report.added, report.present) == (3, 3, 0)
            assert fresh.import_jsonl(path).added == 0
            assert must(fresh.best(small.key, TARGET.key)).schedule == \
                must(store.best(small.key, TARGET.key)).schedule
            assert must(fresh.best(mid.key, OTHER_TARGET.key)).cycles == \
                must(store.best(mid.key, OTHER_TARGET.key)).cycles
            # a log keeps each record's source (issue 14)
            assert {r.source for r in fresh.records()} == {r.source for r in store.records()}
            assert [w.spec for w in fresh.workloads()] == [w.spec for w in store.workloads()]
            assert all(t.descriptor for t in fresh.targets())  # known locally: filled in
        # and back into the same store: nothing new
        assert store.import_jsonl(path).added == 0

    def test_a_malformed_log_imports_nothing_unless_skip_bad(self, store, wls, tmp_path):
        small = wls["small"]
        _add(store, small, [real_rec(small, 900, 0), real_rec(small, 800, 1)])
        good = tmp_path / "good.jsonl"
        store.export_jsonl(good)
        lines = good.read_text().splitlines()
        bad = tmp_path / "bad.jsonl"
        bad.write_text("\n".join([lines[0], "{not json", lines[1].replace('"version":1',
                                                                            '"version":7'),
                                  "", '{"version": 1}']) + "\n")
        with open_store(f"sqlite:///{tmp_path / 'fresh.db'}") as fresh:
            with pytest.raises(LogFormatError) as info:
                fresh.import_jsonl(bad)
            assert [n for n, _ in info.value.problems] == [2, 3, 5]
            assert "line 2: not JSON" in str(info.value) and "version 7" in str(info.value)
            assert fresh.stats().records == 0
            report = fresh.import_jsonl(bad, skip_bad=True)
            assert (report.added, [n for n, _ in report.skipped]) == (1, [2, 3, 5])
            assert "skipped 3 bad line(s)" in report.describe()

    def test_an_impossible_record_in_a_log_is_refused(self, store, wls, tmp_path):
        """What ``rec`` makes (a schedule no space has) cannot come in through a log."""
        small = wls["small"]
        _add(store, small, [rec(small, 900, 0), real_rec(small, 800, 1)])
        log = tmp_path / "log.jsonl"
        store.export_jsonl(log)
        with open_store(f"sqlite:///{tmp_path / 'fresh.db'}") as fresh:
            with pytest.raises(LogFormatError, match="not valid for its workload"):
                fresh.import_jsonl(log)
            assert fresh.import_jsonl(log, skip_bad=True).added == 1

    def test_alembic_migrations_build_the_models_schema(self, url):
        """`pypto db upgrade` on an empty database gives exactly the models' schema, the
        store accepts it, and upgrading again is a no-op."""
        from alembic.autogenerate import compare_metadata
        from alembic.runtime.migration import MigrationContext

        from pypto.db import migrate, models
        from pypto.db.sql import SQLStore

        assert migrate.head() == models.SCHEMA_REVISION
        assert migrate.upgrade(url) == (None, models.SCHEMA_REVISION)
        assert migrate.upgrade(url) == (models.SCHEMA_REVISION, models.SCHEMA_REVISION)
        s = SQLStore(url)
        with s._get_engine().connect() as conn:
            ctx = MigrationContext.configure(conn, opts={
                "include_name": lambda name, type_, _: models.managed(name, type_),
                "include_object": lambda _, name, type_, *a: models.managed(name, type_)})
            assert compare_metadata(ctx, models.Base.metadata) == []
        assert s.stats().exists
        s.close()

    def test_schema_revision_mismatch_is_reported(self, store, url, wls):
        from sqlalchemy import create_engine

        _add(store, wls["small"], [rec(wls["small"], 900, 0)])
        store.close()
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql("UPDATE pypto_alembic_version SET version_num = '9999'")
        engine.dispose()
        with pytest.raises(DatabaseError, match="revision 9999.*pypto db upgrade"):
            open_store(url).best(wls["small"].key, TARGET.key)

    def test_other_tables_in_the_database_are_left_alone(self, url, wls):
        """Optuna may share the database: its tables and its alembic_version stay as
        they were."""
        from sqlalchemy import create_engine

        if url.startswith("sqlite"):
            Path(url.split("///", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url)
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32))")
            conn.exec_driver_sql("INSERT INTO alembic_version VALUES ('optuna-v3')")
            conn.exec_driver_sql("CREATE TABLE studies (study_id INTEGER)")
        with open_store(url) as s:
            assert s.stats().exists is False
            _add(s, wls["small"], [rec(wls["small"], 900, 0)])
            assert must(s.best(wls["small"].key, TARGET.key)).cycles == 900
        with engine.begin() as conn:
            assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").all() == \
                [("optuna-v3",)]
        engine.dispose()


# -- SQLite specifics ----------------------------------------------------------------------


def test_sqlite_is_in_wal_mode(tmp_path: Path, wls: dict[str, WorkloadInfo]) -> None:
    path = tmp_path / "w.db"
    with open_store(str(path)) as s:
        _add(s, wls["small"], [rec(wls["small"], 900, 0)])
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_garbage_file_is_reported_and_never_overwritten(tmp_path: Path,
                                                          wls: dict[str, WorkloadInfo]) -> None:
    path = tmp_path / "pypto.db"
    garbage = bytes(range(256)) * 64
    path.write_bytes(garbage)
    s = open_store(str(path))
    with pytest.raises(DatabaseError, match="not a PyPTO database.*will not overwrite"):
        s.best(wls["small"].key, TARGET.key)
    with pytest.raises(DatabaseError, match="not a PyPTO database"):
        _add(s, wls["small"], [rec(wls["small"], 900, 0)])
    s.close()
    assert path.read_bytes() == garbage


def test_a_foreign_pypto_named_table_is_reported(tmp_path: Path,
                                                 wls: dict[str, WorkloadInfo]) -> None:
    path = tmp_path / "foreign.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE pypto_records (x INTEGER)")
    with pytest.raises(DatabaseError, match="not made by PyPTO"):
        open_store(str(path)).best(wls["small"].key, TARGET.key)


def test_unsupported_urls_are_refused() -> None:
    with pytest.raises(DatabaseError, match="SQLite or PostgreSQL"):
        open_store("mysql://u@h/db")
    with pytest.raises(DatabaseError, match="not a database URL"):
        open_store("::nonsense://")


def test_record_values_are_checked() -> None:
    key = "ab" * 32
    with pytest.raises(ValueError, match="positive int"):
        Record(key, key, Schedule(m1=16), cycles=None)
    with pytest.raises(ValueError, match="no cycles"):
        Record(key, key, Schedule(m1=16), cycles=5, status="error")
    with pytest.raises(ValueError, match="status"):
        Record(key, key, Schedule(m1=16), cycles=5, status="great")
    with pytest.raises(ValueError, match="source"):
        Record(key, key, Schedule(m1=16), cycles=5, source="guess")


def test_workload_spec_round_trips(wls: dict[str, WorkloadInfo]) -> None:
    for info in wls.values():
        assert WorkloadInfo.from_spec(info.spec, info.key) == info
    with pytest.raises(ValueError, match="does not match"):
        WorkloadInfo.from_spec(wls["small"].spec, wls["mid"].key)


# -- concurrency -----------------------------------------------------------------------------

WRITERS, PER_WRITER = 4, 500


def _write_records(url: str, writer: int, spec: str) -> int:
    """One process: PER_WRITER records, one transaction each."""
    info = WorkloadInfo.from_spec(spec)
    target = TargetInfo.of(TARGET)
    store = open_store(url)
    added = 0
    for i in range(PER_WRITER):
        r = Record(info.key, target.key, Schedule(writer=writer, i=i), cycles=1000 + i,
                   target_name=target.name)
        added += store.add_records([r], workloads=[info], targets=[target])
    store.close()
    return added


def test_concurrent_writers_lose_nothing(tmp_path: Path, wls: dict[str, WorkloadInfo]) -> None:
    """4 processes write 500 records each into one new SQLite file at once."""
    url = f"sqlite:///{tmp_path / 'shared' / 'pypto.db'}"
    with ProcessPoolExecutor(WRITERS, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_write_records, url, w, wls["small"].spec)
                   for w in range(WRITERS)]
        added = [f.result(timeout=120) for f in futures]
    assert added == [PER_WRITER] * WRITERS
    with open_store(url) as s:
        assert s.stats().records == WRITERS * PER_WRITER
        assert len({r.schedule_key for r in s.records()}) == WRITERS * PER_WRITER


def test_vectorized_log_distances_agree_with_the_definition() -> None:
    import json

    from pypto.db.queries import distances
    from pypto.db.records import log_distances

    query = (1000, 1024, 7, 1)
    candidates = [(1024, 1024, 8, 1), (1, 1, 1, 1), (512, 2048, 7, 3), (5, 5)]
    want = [log_distance(query, c) for c in candidates]
    assert want[-1] == float("inf")
    assert log_distances(query, candidates) == pytest.approx(want)
    texts = [json.dumps(list(c)) for c in candidates]
    assert distances(query, texts) == pytest.approx(want)           # mixed lengths
    assert distances(query, texts[:3]) == pytest.approx(want[:3])   # one C parse
