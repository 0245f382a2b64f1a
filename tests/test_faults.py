"""Faults, for real: ``pypto tune`` stopped by SIGKILL, SIGINT and SIGTERM (one process,
``--workers 2``, SQLite and PostgreSQL), a disk that fills up, a database on a read-only
file system, a stale journal lock, an interrupted export (issue 15, defect 8 and the
fault suite). Each stop is checked as ``tests/faults.py`` says: integrity, nothing
finished lost, nothing recorded twice, the clean-stop bookkeeping for SIGINT and SIGTERM,
and a rerun that reaches the count exactly. This is the reduced set that runs in CI;
``scripts/soak.py`` runs hundreds of stops."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.faults import PG_ENV, ROOT, Campaign, gemm_script, pg_schema


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return gemm_script(tmp_path_factory.mktemp("faults"))


def _assert_sound(campaign: Campaign) -> None:
    f = campaign.figures
    assert f.unclean_stops == []
    assert (f.lost, f.duplicated, f.integrity_failures, f.hung) == (0, 0, 0, 0)
    assert f.exact == f.campaigns == 1


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_ends_a_run_cleanly_and_the_rerun_completes(script: Path, tmp_path: Path,
                                                             name: str) -> None:
    """The run row ends ``interrupted``, no claim or RUNNING trial is left, one line says
    what is kept and how to resume, the exit code is 128 + the signal; then the rerun
    brings the count to exactly the trials asked."""
    campaign = Campaign(script, f"sqlite:///{tmp_path / 's.db'}", 40, rng=random.Random(1))
    campaign.run(1, signals=(name,), max_after=2)
    _assert_sound(campaign)
    assert campaign.figures.kills[name] == 1, "the run ended before its signal"


def test_workers_stopped_by_sigterm_to_their_group(script: Path, tmp_path: Path) -> None:
    """As ``kill -TERM -PGID`` (or a service manager) does: every worker gets the signal
    too, ends its trial and gives back its claims; the parent ends the run row."""
    campaign = Campaign(script, f"sqlite:///{tmp_path / 'w.db'}", 12, rng=random.Random(2),
                        workers=2)
    campaign.run(1, signals=("SIGTERM",), max_after=3)
    _assert_sound(campaign)
    assert campaign.figures.kills["SIGTERM"] == 1, "the run ended before its signal"


def test_sigkill_and_sigint_on_postgresql(script: Path) -> None:
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"the PostgreSQL fault test needs {PG_ENV}")
    with pg_schema(base) as url:
        campaign = Campaign(script, url, 12, rng=random.Random(3))
        for name in ("SIGKILL", "SIGINT"):
            campaign.stop_once(name, 2)
        campaign.run(0)
    _assert_sound(campaign)
    assert campaign.figures.trials_seen >= 2
    assert campaign.figures.kills == {"SIGKILL": 1, "SIGINT": 1}


def test_a_run_stopped_during_the_warm_start_ends_interrupted(
        script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A signal while the parent of a ``--workers`` run warm-starts the shared study: no
    worker is started, the run row ends ``interrupted``, the exit code is 130."""
    from pypto.tuner import study

    opened = study.open_study
    # the handler a fresh `pypto tune` process starts with, whatever an earlier test of
    # this process left installed (restored afterwards)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _warm_start_signalled(script, tmp_path, monkeypatch, study, opened)
    finally:
        signal.signal(signal.SIGINT, previous)


def _warm_start_signalled(script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          study: Any, opened: Any) -> None:
    from pypto.cli import _captured
    from pypto.db import open_store
    from pypto.tuner.cli import run_tune

    def signalled(*args, **kwargs):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGINT)     # deferred: the warm start completes
        return opened(*args, **kwargs)

    monkeypatch.setattr(study, "open_study", signalled)
    url = f"sqlite:///{tmp_path / 'warm.db'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = run_tune(script, kernels=None, target=None, trials=10, strategy="random",
                        db=url, timeout=None, early_stopping=None, seed=0,
                        capture=_captured, workers=2)
    assert code == 130
    with open_store(url) as store:
        (run,) = store.runs()
        assert (run.status, store.claims()) == ("interrupted", [])
        assert store.records() == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler   # restored
    from pypto.tuner.interrupt import requested

    assert requested() is None          # the next run in this process is not stopped


def test_a_single_process_stopped_during_its_warm_start(
        script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pypto
    from pypto.db import open_store
    from pypto.tuner import study
    from pypto.tuner.interrupt import catch_signals
    from pypto.tuner.loop import TuneOptions, tune_task
    from pypto.tuner.tasks import extract_tasks

    opened = study.open_study

    def signalled(*args, **kwargs):  # type: ignore[no-untyped-def]
        os.kill(os.getpid(), signal.SIGTERM)
        return opened(*args, **kwargs)

    monkeypatch.setattr(study, "open_study", signalled)
    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (task,) = extract_tasks([k.lower(pypto.spec((64, 64), "float16"),
                                         pypto.spec((64, 64), "float16"))])
    url = f"sqlite:///{tmp_path / 'one.db'}"
    with open_store(url) as store, catch_signals():
        res = tune_task(task, store, TuneOptions("random", 10, seed=0))
        assert res.status == "interrupted"
        (run,) = store.runs()
        assert (run.status, store.claims()) == ("interrupted", [])
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


# -- the Optuna journal's lock ------------------------------------------------------------
def test_a_lock_held_by_a_killed_process_is_free_at_once(tmp_path: Path) -> None:
    """A process SIGKILLed while it holds the journal lock (mid-append) leaves nothing that
    the next writer must wait out (Optuna's symlink lock made it wait 30 s)."""
    import fcntl

    journal = tmp_path / "x.db.optuna-journal"
    code = ("import sys, time\nfrom pypto.tuner.study import JournalFlock\n"
            f"JournalFlock({str(journal)!r}).acquire()\nprint('held', flush=True)\n"
            "time.sleep(600)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        fd = os.open(f"{journal}.flock", os.O_RDWR)
        with pytest.raises(BlockingIOError):        # held: the lock works
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        holder.kill()
        holder.wait(timeout=30)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)      # free the moment it died
        os.close(fd)
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_stale_symlink_lock_is_not_waited_for(tmp_path: Path) -> None:
    """A ``.lock`` symbolic link left by Optuna's own lock (an older PyPTO killed while
    appending) does not stall a run: the journal is locked with ``flock``."""
    import optuna

    from pypto.tuner.study import storage_for

    db = tmp_path / "s.db"
    journal = tmp_path / "s.db.optuna-journal"
    os.symlink(journal, f"{journal}.lock")      # fresh: Optuna would wait 30 s for it
    done = threading.Event()

    def write() -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(storage=storage_for(f"sqlite:///{db}"))
        study.add_trial(optuna.trial.create_trial(value=1.0))
        done.set()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    assert done.wait(timeout=20), "the journal write waited for the stale lock"


# -- pypto db export ----------------------------------------------------------------------
@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def test_an_export_leaves_no_file_when_interrupted_and_respects_the_umask(
        tmp_path: Path) -> None:
    from pypto.db.atomic import atomic_write

    out = tmp_path / "logs.jsonl"
    with pytest.raises(KeyboardInterrupt), atomic_write(out) as f:
        f.write("half\n")
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    for mask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        out.unlink(missing_ok=True)
        with _umask(mask), atomic_write(out) as f:
            f.write("whole\n")
        assert out.stat().st_mode & 0o777 == mode
    out.chmod(0o640)                            # an existing file keeps its mode
    with _umask(0o022), atomic_write(out) as f:
        f.write("again\n")
    assert (out.stat().st_mode & 0o777, out.read_text()) == (0o640, "again\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs.jsonl"]


@settings(max_examples=40, deadline=None)
@given(mask=st.integers(0, 0o777), existing=st.none() | st.integers(0, 0o777))
def test_an_exported_file_gets_the_mode_any_written_file_gets(mask: int,
                                                             existing: int | None) -> None:
    """As ``open(path, "w")`` would: the mode of the file it replaces, else 0666 less the
    umask."""
    import tempfile

    from pypto.db.atomic import atomic_write

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "logs.jsonl"
        if existing is not None:
            out.write_text("old\n")
            out.chmod(existing)
        with _umask(mask), atomic_write(out) as f:
            f.write("new\n")
        want = existing if existing is not None else 0o666 & ~mask
        assert out.stat().st_mode & 0o777 == want
        assert [p.name for p in Path(tmp).iterdir()] == ["logs.jsonl"]


@pytest.mark.parametrize("name", ["SIGTERM", "SIGKILL"])
def test_an_export_killed_midway_leaves_no_stray_file(tmp_path: Path, name: str) -> None:
    """SIGTERM: the temporary file is removed on the way out (exit 143). SIGKILL cannot be
    cleaned up after, so the next export to the same file removes the dead writer's."""
    from pypto.db.atomic import atomic_write

    out = tmp_path / "logs.jsonl"
    code = ("import os, signal, pathlib\nfrom pypto.db.atomic import atomic_write\n"
            f"with atomic_write(pathlib.Path({str(out)!r})) as f:\n"
            "    f.write('half\\n'); f.flush()\n"
            f"    os.kill(os.getpid(), signal.{name})\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == (143 if name == "SIGTERM" else -signal.SIGKILL), done.stderr
    left = list(tmp_path.iterdir())
    assert not out.exists()
    assert left == [] if name == "SIGTERM" else len(left) == 1
    with atomic_write(out) as f:
        f.write("whole\n")
    assert [p.name for p in tmp_path.iterdir()] == ["logs.jsonl"]


# -- the file system fails ----------------------------------------------------------------
@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a small tmpfs needs root (mount)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(path)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


def _tune(script: Path, url: str, trials: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pypto.cli", "tune", str(script),
                           "--trials", str(trials), "--db", url, "--strategy", "random"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_full_disk_is_an_error_and_loses_nothing(script: Path, tmp_path: Path) -> None:
    with _tmpfs(tmp_path / "small", "400k") as disk:
        url = f"sqlite:///{disk / 'full.db'}"
        full = _tune(script, url, 400)
        assert full.returncode == 1
        assert "Traceback" not in full.stderr
        assert "full" in full.stderr.splitlines()[-1], full.stderr
        with sqlite3.connect(disk / "full.db") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            kept = {k for (k,) in conn.execute("SELECT schedule_key FROM pypto_records")}
        _remount(disk, "size=64m")
        assert _tune(script, url, len(kept) + 4).returncode == 0
        with sqlite3.connect(disk / "full.db") as conn:
            keys = [k for (k,) in conn.execute("SELECT schedule_key FROM pypto_records")]
        assert len(keys) == len(set(keys)) == len(kept) + 4 and kept <= set(keys)


def test_a_database_on_a_read_only_file_system(script: Path, tmp_path: Path) -> None:
    """Tuning more is refused with a message (nothing can be recorded); what is there can
    still be read."""
    with _tmpfs(tmp_path / "ro", "64m") as disk:
        url = f"sqlite:///{disk / 'ro.db'}"
        assert _tune(script, url, 8).returncode == 0
        _remount(disk, "ro")
        more = _tune(script, url, 16)
        assert more.returncode == 1 and "Traceback" not in more.stderr
        assert more.stderr.strip().splitlines()[-1].startswith("error: ")
        stats = subprocess.run([sys.executable, "-m", "pypto.cli", "db", "stats", "--db", url],
                               cwd=ROOT, capture_output=True, text=True, timeout=120,
                               check=False)
        assert stats.returncode == 0, stats.stderr
        assert "8" in stats.stdout
        with sqlite3.connect(f"file:{disk / 'ro.db'}?immutable=1", uri=True) as conn:
            assert conn.execute("SELECT count(*) FROM pypto_records").fetchone()[0] == 8
        lookup = subprocess.run(  # the compile-time lookup reads it too
            [sys.executable, "-c", "import pypto; k = pypto.kernel(lambda a, b: "
             "pypto.matmul(a, b)); print(k.lower(pypto.spec((256, 256), 'float16'), "
             "pypto.spec((256, 256), 'float16')).sources)"],
            cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT), "PYPTO_DB": url})
        assert lookup.stdout.strip() == "['tuned']", lookup.stderr
