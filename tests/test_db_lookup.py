"""Compile-time lookup: a kernel uses the best measured schedule, the nearest tuned shape,
or the default, says which, warns once, and never fails because of the database."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

import pypto
from pypto.compile import resolver as lookup
from pypto.db import Record, open_store
from pypto.db.logs import sync_tuning_logs
from pypto.errors import ScheduleFallbackWarning
from pypto.schedule_space import Schedule, space_for, validate
from pypto.schedule_space.adapt import adapt

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def fresh_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Each test: its own database file, and no lookup state from earlier tests."""
    monkeypatch.setenv("PYPTO_DB", str(tmp_path / "kernels.db"))
    lookup.reset()
    yield
    lookup.reset()


def gemm() -> pypto.Kernel:
    """A new kernel object each time (a kernel caches its compiled signatures)."""
    return pypto.kernel(lambda a, b: pypto.matmul(a, b))


def specs(m: int, k: int, n: int) -> tuple[object, object]:
    return pypto.spec((m, k), "float16"), pypto.spec((k, n), "float16")


def measure(compiled: pypto.compile.compiled.Compiled, schedules: list[Schedule]) -> list[Record]:
    wl, target = compiled.workloads[0], compiled.target
    return [Record.measured(wl, target, s, cycles=compiled.with_schedule(0, s).simulate().cycles)
            for s in schedules]


def fallbacks(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ScheduleFallbackWarning)]


def run_and_check(compiled, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(1)
    a = pypto.tensor(rng.random((m, k)) - 0.5, dtype="float16")
    b = pypto.tensor(rng.random((k, n)) - 0.5, dtype="float16")
    got = compiled(a, b).numpy().astype(np.float32)
    want = compiled.run_reference(a, b).numpy().astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    exact = a.numpy().astype(np.float32) @ b.numpy().astype(np.float32)
    np.testing.assert_allclose(got, exact, rtol=2e-2, atol=5e-2)


# -- the chain --------------------------------------------------------------------------------

M, K, N = 384, 512, 256  # a neighbour of the default is faster: a real (small) tuning win


def test_a_kernel_uses_the_best_record_and_export_import_keeps_it(tmp_path, monkeypatch):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        base = gemm().lower(*specs(M, K, N))
    assert base.sources == ["default"]
    [message] = fallbacks(caught)
    assert "default heuristic" in message and "pypto tune" in message

    space = space_for(base.workloads[0], base.target)
    records = measure(base, [space.sample(seed) for seed in range(6)]
                      + space.neighbors(base.schedules[0]))
    best = min(records, key=lambda r: r.cycles or 0)
    default_cycles = base.simulate().cycles
    assert best.cycles is not None and best.cycles < default_cycles
    with open_store() as store:
        store.add(base.workloads[0], base.target, records)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tuned = gemm().lower(*specs(M, K, N))
    assert fallbacks(caught) == []
    assert tuned.sources == ["tuned"] and tuned.schedules[0] == best.schedule
    assert tuned.simulate().cycles == best.cycles
    assert "; schedule (tuned)" in tuned.asm()
    run_and_check(tuned, M, K, N)

    with pypto.Context(device_type="npu"), pypto.Profiler() as prof:
        rng = np.random.default_rng(2)
        gemm()(pypto.tensor(rng.random((M, K)), dtype="float16"),
               pypto.tensor(rng.random((K, N)), dtype="float16"))
    assert prof.calls[0].sources == ["tuned"] and "tuned" in prof.report()

    # export -> a new, empty database -> import: the kernel picks the same schedule
    log = tmp_path / "shared.jsonl"
    with open_store() as store:
        assert store.export_jsonl(log) == len(records)
    monkeypatch.setenv("PYPTO_DB", str(tmp_path / "teammate.db"))
    assert gemm().lower(*specs(M, K, N)).sources == ["default"]
    with open_store() as store:
        assert store.import_jsonl(log).added == len(records)
        assert store.import_jsonl(log).added == 0
    again = gemm().lower(*specs(M, K, N))
    assert again.sources == ["tuned"] and again.schedules[0] == best.schedule


def test_nearest_tuned_shape_is_adapted_validated_and_used():
    tuned_for = gemm().lower(*specs(1024, 1024, 1024))
    space = space_for(tuned_for.workloads[0], tuned_for.target)
    records = measure(tuned_for, [tuned_for.schedules[0]]
                      + space.neighbors(tuned_for.schedules[0])[:3])
    best = min(records, key=lambda r: r.cycles or 0)
    with open_store() as store:
        store.add(tuned_for.workloads[0], tuned_for.target, records)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = gemm().lower(*specs(1000, 1024, 1024))
    assert compiled.sources == ["nearest"]
    [message] = fallbacks(caught)
    assert "nearest shape" in message and "1024, 1024" in message and "pypto tune" in message
    wl, target, chosen = compiled.workloads[0], compiled.target, compiled.schedules[0]
    assert validate(wl, chosen, target) == [] and space_for(wl, target).validate(chosen) == []
    assert chosen == adapt(wl, target, best.schedule)
    run_and_check(compiled, 1000, 1024, 1024)


def test_adapt_moves_knobs_onto_the_smaller_shapes_choices():
    big = gemm().lower(*specs(512, 512, 512))
    small = gemm().lower(*specs(100, 512, 40))
    wl, target = small.workloads[0], small.target
    tuned = big.schedules[0].replace(m1=512, n1=256, cores=24)
    assert validate(wl, tuned, target) != []
    adapted = adapt(wl, target, tuned)
    assert adapted is not None
    space = space_for(wl, target)
    assert space.validate(adapted) == [] and validate(wl, adapted, target) == []
    assert adapted["m1"] == max(space.axes["m1"].choices)  # clamped, not reset
    assert adapted["k1"] == tuned["k1"] and adapted["l1_depth"] == tuned["l1_depth"]


def test_nearest_works_for_vector_workloads():
    softmax = pypto.kernel(pypto.softmax)
    tuned_for = softmax.lower(pypto.spec((64, 1024), "float16"))
    [record] = measure(tuned_for, [space_for(tuned_for.workloads[0], tuned_for.target)
                                   .sample(3)])
    with open_store() as store:
        store.add(tuned_for.workloads[0], tuned_for.target, [record])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = pypto.kernel(pypto.softmax).lower(pypto.spec((60, 1000), "float16"))
    assert compiled.sources == ["nearest"]
    x = pypto.tensor(np.random.default_rng(3).random((60, 1000)), dtype="float16")
    np.testing.assert_allclose(compiled(x).numpy().astype(np.float32),
                               compiled.run_reference(x).numpy().astype(np.float32),
                               rtol=2e-2, atol=2e-3)


def test_stale_and_invalid_records_are_not_used():
    base = gemm().lower(*specs(128, 128, 128))
    wl, target = base.workloads[0], base.target
    stale = Record.measured(wl, target, base.schedules[0].replace(l1_depth=1), cycles=10,
                            model_version="sim-0.old")
    invalid = Record.measured(wl, target, base.schedules[0].replace(m1=17), cycles=5)
    with open_store() as store:
        store.add(wl, target, [stale, invalid])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert gemm().lower(*specs(128, 128, 128)).sources == ["default"]


def test_explicit_schedule_wins_and_does_not_warn():
    base = gemm().lower(*specs(128, 128, 128))
    with open_store() as store:
        store.add(base.workloads[0], base.target,
                  measure(base, [base.schedules[0].replace(l1_depth=1)]))
    mine = base.schedules[0].replace(l0_depth=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = pypto.kernel(lambda a, b: pypto.matmul(a, b), schedule=mine).lower(
            *specs(128, 128, 128))
    assert c.sources == ["explicit"] and c.schedules[0] == mine and fallbacks(caught) == []


def test_a_fallback_warns_once_per_workload():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            gemm().lower(*specs(96, 96, 96))
        gemm().lower(*specs(80, 96, 96))
    assert len(fallbacks(caught)) == 2
    assert caught[0].filename == __file__  # points at the user's code


# -- a database that cannot be used -------------------------------------------------------------


def test_a_garbage_database_file_falls_back_with_one_warning(tmp_path, monkeypatch):
    path = tmp_path / "pypto.db"
    garbage = b"this is not a database\n" * 100
    path.write_bytes(garbage)
    monkeypatch.setenv("PYPTO_DB", str(path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = gemm().lower(*specs(64, 64, 64))
        second = gemm().lower(*specs(64, 128, 64))
    assert first.sources == second.sources == ["default"]
    problems = [m for m in fallbacks(caught) if "cannot use the schedule database" in m]
    assert len(problems) == 1 and "not a PyPTO database" in problems[0]
    assert path.read_bytes() == garbage
    run_and_check(first, 64, 64, 64)


def test_an_unreachable_server_falls_back(monkeypatch):
    monkeypatch.setenv("PYPTO_DB", "postgresql+psycopg://postgres@127.0.0.1:9/nothing")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        c = gemm().lower(*specs(64, 64, 64))
    assert c.sources == ["default"]
    assert any("cannot connect" in m for m in fallbacks(caught))


def test_without_a_database_nothing_is_created_and_sqlalchemy_not_loaded(tmp_path):
    """A read-only lookup with no database file creates none (and stays cheap)."""
    probe = textwrap.dedent("""
        import sys, warnings
        import pypto
        warnings.simplefilter("ignore")
        k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
        c = k.lower(pypto.spec((64, 64), "float16"), pypto.spec((64, 64), "float16"))
        print(c.sources, "sqlalchemy" in sys.modules)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYPTO_DB": str(tmp_path / "none.db")}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["['default']", "False"]
    assert list(tmp_path.iterdir()) == []


def test_tuning_logs_next_to_the_default_database_are_imported_on_first_use(tmp_path,
                                                                            monkeypatch):
    base = gemm().lower(*specs(128, 128, 128))
    records = measure(base, [base.schedules[0].replace(l1_depth=1),
                             base.schedules[0].replace(l0_depth=1)])
    with open_store(str(tmp_path / "elsewhere.db")) as store:
        store.add(base.workloads[0], base.target, records)
        (tmp_path / "project" / "tuning_logs").mkdir(parents=True)
        store.export_jsonl(tmp_path / "project" / "tuning_logs" / "gemm.jsonl")
    monkeypatch.delenv("PYPTO_DB")
    monkeypatch.chdir(tmp_path / "project")
    lookup.reset()
    c = gemm().lower(*specs(128, 128, 128))
    assert c.sources == ["tuned"]
    assert c.schedules[0] == min(records, key=lambda r: r.cycles or 0).schedule
    db = tmp_path / "project" / "tuning_logs" / "pypto.db"
    assert db.exists()
    with open_store() as store:
        assert store.get_meta("imported:gemm.jsonl") is not None
        assert len(store.records()) == 2
        # the same file again is not re-read; a changed file is
        assert sync_tuning_logs(store, db.parent) == []
        log = db.parent / "gemm.jsonl"
        log.write_text(log.read_text() + "\n")
        [report] = sync_tuning_logs(store, db.parent)
        assert report.added == 0 and report.present == 2


# -- speed -------------------------------------------------------------------------------------


def test_a_warm_lookup_is_well_under_a_millisecond():
    c = gemm().lower(*specs(64, 64, 64))
    wl, target = c.workloads[0], c.target
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lookup.choose_schedule(wl, target)
    times = []
    for _ in range(2000):
        t0 = time.perf_counter()
        lookup.choose_schedule(wl, target)
        times.append(time.perf_counter() - t0)
    assert statistics.median(times) < 50e-6
