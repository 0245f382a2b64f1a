"""Kill and resume ``pypto tune`` for real (processes, signals) and check what survives:
the helpers of ``tests/test_faults.py`` and ``scripts/soak.py``.

A ``Campaign`` tunes one small GEMM to ``trials`` trials in one database, a run at a time,
each stopped by a signal at a random moment (or left to finish). Before each signal it
reads which records are in the database: those trials were finished and committed, so
every one must be there afterwards (``lost`` counts those that are not). After each stop
it checks the database's integrity, that no schedule was recorded twice, and for SIGINT
and SIGTERM the clean stop: exit code 130/143, the run row ``interrupted``, no claim
left, no Optuna trial left RUNNING, the line naming the trials kept and the command that
resumes. The last run must bring the count to exactly ``trials``.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_ENV = "PYPTO_TEST_PG_URL"
SIGNALS = {"SIGKILL": signal.SIGKILL, "SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def gemm_script(directory: Path, n: int = 256) -> Path:
    path = directory / f"gemm{n}.py"
    path.write_text(textwrap.dedent(f"""
        import numpy as np, pypto

        @pypto.kernel
        def gemm{n}(a, b):
            return pypto.matmul(a, b)

        a = pypto.tensor(np.ones(({n}, {n})), dtype="float16")
        b = pypto.tensor(np.ones(({n}, {n})), dtype="float16")
        gemm{n}(a, b)
    """))
    return path


@contextmanager
def pg_schema(base: str) -> Iterator[str]:
    """A URL of the PostgreSQL server ``base`` whose search_path is a fresh schema
    (dropped afterwards)."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    schema = f"pypto_fault_{uuid.uuid4().hex[:12]}"
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


@dataclass
class Figures:
    """What the stops did and what survived them."""

    runs: int = 0
    kills: collections.Counter[str] = field(default_factory=collections.Counter)
    finished_alone: int = 0             # runs that ended before their signal
    trials_seen: int = 0                # finished trials read before signals
    lost: int = 0                       # of those, missing afterwards
    duplicated: int = 0                 # schedules recorded twice
    integrity_failures: int = 0
    unclean_stops: list[str] = field(default_factory=list)   # SIGINT/SIGTERM bookkeeping
    hung: int = 0                       # runs that did not end within the limit
    # Optuna trials a SIGKILLed worker asked for and never claimed, still RUNNING after
    # the last run (a later run fails them once ORPHAN_AFTER_S old)
    orphans: int = 0
    campaigns: int = 0
    exact: int = 0                      # campaigns that ended with exactly their trials

    def add(self, other: Figures) -> None:
        for name in ("runs", "finished_alone", "trials_seen", "lost", "duplicated",
                     "integrity_failures", "hung", "campaigns", "exact", "orphans"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.kills.update(other.kills)
        self.unclean_stops.extend(other.unclean_stops)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.integrity_failures
                    or self.unclean_stops or self.hung) and self.exact == self.campaigns


class Campaign:
    """Tune ``script`` to ``trials`` in the database at ``url`` through stopped runs."""

    def __init__(self, script: Path, url: str, trials: int, *, rng: random.Random,
                 workers: int = 1, strategy: str = "random", limit_s: float = 120) -> None:
        self.script, self.url, self.trials, self.rng = script, url, trials, rng
        self.workers, self.strategy, self.limit_s = workers, strategy, limit_s
        self.figures = Figures()
        self.running_before: set[tuple[int, int]] = set()

    # -- the database, read directly ---------------------------------------------------
    def keys(self) -> list[str]:
        """The schedule keys of every record (one per trial)."""
        from pypto.db import open_store

        try:
            with open_store(self.url) as store:
                return [r.schedule_key for r in store.records()]
        except Exception:  # noqa: BLE001 - not created yet by the first run
            return []

    def integrity(self) -> bool:
        """SQLite's ``integrity_check``; PostgreSQL keeps its own (the rows are read)."""
        from pypto.db.location import sqlite_path

        path = sqlite_path(self.url)
        if path is None:
            self.keys()
            return True
        if not path.exists():
            return True
        with sqlite3.connect(path) as conn:
            return conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"

    def leftovers(self) -> tuple[int, set[tuple[int, int]], list[str]]:
        """(claims left, the Optuna trials left RUNNING, statuses of the run rows)."""
        import optuna

        from pypto.db import open_store
        from pypto.tuner.study import storage_for

        with open_store(self.url) as store:
            claims = len(store.claims())
            statuses = [r.status for r in sorted(store.runs(), key=lambda r: r.id)]
        running: set[tuple[int, int]] = set()
        storage = storage_for(self.url)
        if storage is not None:
            for s in storage.get_all_studies():
                running |= {(s._study_id, t.number) for t in storage.get_all_trials(
                    s._study_id, deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))}
        return claims, running, statuses

    # -- runs ------------------------------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "pypto.cli", "tune", str(self.script), "--trials",
               str(self.trials), "--db", self.url, "--strategy", self.strategy]
        return cmd + (["--workers", str(self.workers)] if self.workers > 1 else [])

    def start(self) -> subprocess.Popen[str]:
        def default_signals() -> None:     # a background parent may ignore SIGINT
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)

        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        return subprocess.Popen(self.command(), cwd=ROOT, text=True, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, preexec_fn=default_signals,
                                start_new_session=True)

    def stop_once(self, name: str, after: int) -> bool:
        """One run, sent ``name`` once ``after`` new trials are in the database (and a
        random moment more); True once the database has all its trials."""
        f = self.figures
        before = len(self.keys())
        self.running_before = self.leftovers()[1] if before else set()
        proc = self.start()
        f.runs += 1
        deadline = time.monotonic() + self.limit_s
        seen: list[str] = []
        while proc.poll() is None and time.monotonic() < deadline:
            seen = self.keys()
            if len(seen) >= min(before + after, self.trials):
                break
            time.sleep(0.05)
        time.sleep(self.rng.random() * 0.3)       # anywhere in the next trial or commit
        if proc.poll() is None and len(self.keys()) < self.trials:   # not winding up
            seen = self.keys()                    # committed: must survive the signal
            group = name != "SIGINT" or self.rng.random() < 0.5   # a terminal's Ctrl-C
            with _suppress_gone():
                (os.killpg if group else os.kill)(proc.pid, SIGNALS[name])
            f.kills[name] += 1
        else:
            f.finished_alone += 1
        try:
            _, err = proc.communicate(timeout=self.limit_s)
        except subprocess.TimeoutExpired:
            f.hung += 1
            with _suppress_gone():
                os.killpg(proc.pid, signal.SIGKILL)
            _, err = proc.communicate()
        self._reap_group(proc.pid)
        after_keys = self.keys()
        f.trials_seen += len(seen)
        f.lost += len(set(seen) - set(after_keys))
        f.duplicated += len(after_keys) - len(set(after_keys))
        f.integrity_failures += not self.integrity()
        if proc.returncode in (128 + signal.SIGINT, 128 + signal.SIGTERM):
            self._check_clean_stop(proc.returncode, err)
        elif proc.returncode not in (0, -signal.SIGKILL):
            f.unclean_stops.append(f"{name}: exit {proc.returncode}: {err.strip()[-400:]}")
        return len(set(after_keys)) >= self.trials

    def _check_clean_stop(self, code: int, err: str) -> None:
        name = signal.Signals(code - 128).name
        text = " ".join(err.split())
        claims, running, statuses = self.leftovers()
        running -= self.running_before       # a SIGKILLed run's, failed after a while
        problems = []
        if f"interrupted by {name}:" not in text or "resume with: pypto tune" not in text:
            problems.append("no line with the trials kept and the command that resumes")
        if "Traceback" in err:
            problems.append("a traceback")
        if claims:
            problems.append(f"{claims} claim(s) left")
        if running:
            problems.append(f"{len(running)} Optuna trial(s) left RUNNING")
        if statuses and statuses[-1] != "interrupted":
            problems.append(f"the run row is {statuses[-1]!r}")
        if problems:
            self.figures.unclean_stops.append(f"{name}: " + "; ".join(problems)
                                              + f" [{err.strip()[-300:]}]")

    def _reap_group(self, pgid: int) -> None:
        """Wait for the run's workers, which die with it (at most a few seconds)."""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.05)
        with _suppress_gone():
            os.killpg(pgid, signal.SIGKILL)

    def run(self, stops: int, *, signals: tuple[str, ...] = tuple(SIGNALS),
            max_after: int = 6) -> Figures:
        """Up to ``stops`` stopped runs (random signal, after 1..``max_after`` new
        trials), then runs left alone until the database has its trials; the count must
        be exact."""
        f = self.figures
        f.campaigns += 1
        for _ in range(stops):
            if self.stop_once(self.rng.choice(signals), self.rng.randint(1, max_after)):
                break
        for _ in range(3):      # the rerun reaches the count
            if len(set(self.keys())) >= self.trials:
                break
            done = subprocess.run(self.command(), cwd=ROOT, capture_output=True, text=True,
                                  timeout=self.limit_s * 3, check=False,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
            f.runs += 1
            if done.returncode != 0:
                f.unclean_stops.append(f"rerun: exit {done.returncode}: "
                                       f"{done.stderr.strip()[-400:]}")
        keys = self.keys()
        f.duplicated += len(keys) - len(set(keys))
        f.exact += len(keys) == self.trials == len(set(keys))
        claims, running, _ = self.leftovers()
        f.orphans += len(running)
        if claims:
            f.unclean_stops.append(f"after the last run: {claims} claim(s) left")
        return f


@contextmanager
def _suppress_gone() -> Iterator[None]:
    try:
        yield
    except (ProcessLookupError, PermissionError):
        pass
