"""The stdlib reader of compile-time lookups (``pypto.db.reader``) answers as the
SQLAlchemy store does on the same file, never changes the file, declines what it does not
recognise, and keeps SQLAlchemy out of a compile (issue 15: cold lookup < 100 ms)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.db import CostModelBlob, Record, TargetInfo, WorkloadInfo, open_store
from pypto.db.reader import SQLiteReader, open_reader
from pypto.db.rows import RECORD_WIDTH
from pypto.schedule_space import Schedule
from pypto.sim import MODEL_VERSION
from pypto.targets import load_target

ROOT = Path(__file__).resolve().parents[1]
TARGETS = [TargetInfo.of(load_target("ascend910b")), TargetInfo.of(load_target("ascend310"))]
SHAPES = [(64, 64, 64), (128, 64, 64), (128, 128, 128), (512, 256, 128), (96, 64, 32)]


def _workload(m: int, k: int, n: int) -> WorkloadInfo:
    compiled = pypto.kernel(pypto.matmul).lower(pypto.spec((m, k), "float16"),
                                                pypto.spec((k, n), "float16"))
    return WorkloadInfo.of(compiled.workloads[0])


WORKLOADS = [_workload(*s) for s in SHAPES]

record_spec = st.tuples(
    st.integers(0, len(WORKLOADS) - 1), st.integers(0, 1), st.integers(0, 40),
    st.sampled_from(["ok", "ok", "ok", "invalid", "error", "timeout"]),
    st.integers(1_000, 9_000), st.sampled_from([MODEL_VERSION, "sim-old"]),
    st.none() | st.floats(-5, 5, allow_nan=False))


def _records(specs: list[tuple]) -> list[Record]:
    out = []
    for w, t, tag, status, cycles, version, score in specs:
        out.append(Record(WORKLOADS[w].key, TARGETS[t].key, Schedule(m1=16 * (tag % 8 + 1),
                                                                      tag=tag),
                          cycles=cycles if status == "ok" else None, status=status,
                          error=None if status == "ok" else f"{status} {tag}",
                          model_version=version, target_name=TARGETS[t].name,
                          model_score=score))
    return out


def test_a_record_row_has_the_columns_the_reader_expects() -> None:
    from pypto.db import queries

    assert len(queries.RECORD_COLUMNS) == RECORD_WIDTH


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(record_spec, min_size=1, max_size=60))
def test_the_reader_answers_as_the_store_does(tmp_path_factory: pytest.TempPathFactory,
                                              specs: list[tuple]) -> None:
    path = tmp_path_factory.mktemp("reader") / "pypto.db"
    url = f"sqlite:///{path}"
    with open_store(url) as store:
        store.add_records(_records(specs), workloads=WORKLOADS, targets=TARGETS)
        store.set_meta("imported:x.jsonl", "abc")
        store.save_cost_model(CostModelBlob(TARGETS[0].key, "matmul", b"\x00\x01ubj", "ubj",
                                            '{"n": 1}', 7), TARGETS[0])
        reader = open_reader(url)
        assert isinstance(reader, SQLiteReader)
        for wl in WORKLOADS:
            for t in TARGETS:
                for version in (MODEL_VERSION, "sim-old"):
                    assert reader.best(wl.key, t.key, version) == store.best(wl.key, t.key,
                                                                             version)
                    assert reader.nearest(wl.family_key, t.key, wl.sizes, model_version=version,
                                          exclude=wl.key) == \
                        store.nearest(wl.family_key, t.key, wl.sizes, model_version=version,
                                      exclude=wl.key)
                for status in (None, "ok"):
                    for limit in (None, 3):
                        assert list(reader.iter_records(
                            workload_key=wl.key, target_key=t.key, model_version=MODEL_VERSION,
                            status=status, limit=limit)) == list(store.iter_records(
                                workload_key=wl.key, target_key=t.key,
                                model_version=MODEL_VERSION, status=status, limit=limit))
        assert list(reader.iter_records()) == list(store.iter_records())
        assert reader.load_cost_model(TARGETS[0].key, "matmul") == \
            store.load_cost_model(TARGETS[0].key, "matmul")
        assert reader.load_cost_model(TARGETS[1].key, "matmul") is None
        assert reader.get_meta("imported:x.jsonl") == "abc" and reader.get_meta("y") is None
        reader.close()


def test_reading_changes_nothing_in_the_file(tmp_path: Path) -> None:
    """Read-only: a file in rollback-journal mode stays so, its bytes unchanged."""
    path = tmp_path / "pypto.db"
    with open_store(f"sqlite:///{path}") as store:
        store.add_records(_records([(0, 0, 1, "ok", 5000, MODEL_VERSION, None)]),
                          workloads=WORKLOADS, targets=TARGETS)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    before = path.read_bytes()
    reader = open_reader(f"sqlite:///{path}")
    assert reader is not None
    assert reader.best(WORKLOADS[0].key, TARGETS[0].key) is not None
    with pytest.raises(pypto.PyptoError):  # no write reaches the file through it
        reader._rows("DELETE FROM pypto_records", {})
    reader.close()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pypto.db"]


def test_what_the_reader_does_not_recognise_goes_to_the_store(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    assert open_reader(f"sqlite:///{missing}") is None and not missing.exists()
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database\n" * 50)
    assert open_reader(f"sqlite:///{garbage}") is None
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE notes (x)").connection.commit()
    assert open_reader(f"sqlite:///{foreign}") is None
    old = tmp_path / "old.db"
    with open_store(f"sqlite:///{old}") as store:
        store.set_meta("k", "v")
    conn = sqlite3.connect(old)
    conn.execute("UPDATE pypto_alembic_version SET version_num = '0001'")
    conn.commit()
    conn.close()
    assert open_reader(f"sqlite:///{old}") is None  # the store says: pypto db upgrade
    assert open_reader("sqlite://") is None
    assert open_reader("postgresql+psycopg://u@h/db") is None


def test_a_fresh_process_finds_its_tuned_schedule_without_sqlalchemy(tmp_path: Path) -> None:
    db = tmp_path / "tuned.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYPTO_DB": str(db)}
    subprocess.run([sys.executable, "-m", "pypto.cli", "db", "import",
                    str(ROOT / "tuning_logs" / "gemm.jsonl"), "--db", str(db)],
                   env=env, check=True, capture_output=True, timeout=300)
    probe = textwrap.dedent("""
        import sys, warnings
        import pypto
        warnings.simplefilter("error")  # a tuned schedule: no fallback warning
        k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
        c = k.lower(pypto.spec((1024, 1024), "float16"), pypto.spec((1024, 1024), "float16"),
                    target="ascend910b")
        print(c.sources[0], "sqlalchemy" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    assert out.stdout.split() == ["tuned", "False"]
