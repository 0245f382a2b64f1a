"""``pypto tune`` and the tuner library: measurement, strategies, the resumable loop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from typer.testing import CliRunner

from pypto.cli import app

if TYPE_CHECKING:
    from pypto.tuner.result import TaskResult

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()

# a GEMM that is fast to lower and tune
GEMM = textwrap.dedent("""
    import numpy as np, pypto

    @pypto.kernel
    def small_gemm(a, b):
        return pypto.matmul(a, b)

    a = pypto.tensor(np.ones((256, 1024)), dtype="float16")
    b = pypto.tensor(np.ones((1024, 384)), dtype="float16")
    small_gemm(a, b)
""")


# a layernorm whose default schedule a random search soon beats
# An RMS norm over long rows whose default a search beats within a few trials (at
# 0.72 of the best `benchmarks/vector_default.py` found): early stopping counts from there.
NORM = textwrap.dedent("""
    import numpy as np, pypto

    @pypto.kernel
    def norm(x):
        return pypto.rms_norm(x)

    norm(pypto.tensor(np.random.rand(162, 20287), dtype="float32"))
""")


@pytest.fixture
def gemm_script(tmp_path: Path) -> Path:
    p = tmp_path / "small_gemm.py"
    p.write_text(GEMM)
    return p


def _records(url: str) -> list:  # type: ignore[type-arg]
    from pypto.db import open_store

    with open_store(url) as store:
        return store.records()


def _compile_small_gemm(url: str, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    import pypto
    from pypto.compile import resolver as lookup

    monkeypatch.setenv("PYPTO_DB", url)
    lookup.reset()
    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return k.lower(pypto.spec((256, 1024), "float16"), pypto.spec((1024, 384), "float16"))


# -- measurement ---------------------------------------------------------------------------


def test_measure_ok_invalid_error_never_raise() -> None:
    import pypto
    from pypto.schedule_space import Schedule
    from pypto.tuner.measure import Measurer, measure

    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = k.lower(pypto.spec((128, 256), "float16"), pypto.spec((256, 128), "float16"))
    wl, tgt = c.workloads[0], c.target
    m = Measurer(wl, tgt)
    ok = m(m.space.default())
    assert ok.status == "ok" and ok.cycles and ok.cycles >= m.bound_cycles and ok.counts
    bad = measure(wl, tgt, Schedule({**dict(m.space.default()), "m1": 7}))
    assert bad.status == "invalid" and not bad.counts and "m1" in (bad.error or "")
    junk = measure(wl, tgt, Schedule(nonsense=1))
    assert junk.status == "invalid" and junk.cycles is None


# -- strategies ------------------------------------------------------------------------------


def test_strategies_by_name() -> None:
    from pypto.tuner import TuneError
    from pypto.tuner.strategies import get_strategy, names

    assert {"random", "tpe", "grid", "gp", "cmaes"} <= set(names())
    for name in ("random", "tpe", "grid"):
        assert get_strategy(name, 0).sampler() is not None
    with pytest.raises(TuneError, match="unknown strategy"):
        get_strategy("annealing")
    for name, dep in (("gp", "torch"), ("cmaes", "cmaes")):
        try:
            __import__(dep)
        except ImportError:
            with pytest.raises(TuneError, match=f"needs .*{dep}"):
                get_strategy(name)


# -- the command ----------------------------------------------------------------------------


def test_tune_gemm_example_then_compile_is_tuned(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'ex.db'}"
    r = runner.invoke(app, ["tune", str(ROOT / "examples" / "gemm.py"), "--trials", "3",
                            "--strategy", "random", "--seed", "0", "--db", url])
    assert r.exit_code == 0, r.output
    assert "Tuning results" in r.output and "gemm[0]" in r.output
    assert len(_records(url)) == 3
    import pypto
    from pypto.compile import resolver as lookup

    monkeypatch.setenv("PYPTO_DB", url)
    lookup.reset()
    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    c = k.lower(pypto.spec((1024, 1024), "float16"), pypto.spec((1024, 1024), "float16"))
    assert c.sources == ["tuned"]


def test_tune_never_loses_to_default_and_next_compile_uses_it(
        gemm_script: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tuner measures the default first, so the tuned schedule is never slower; with
    the cost-estimated default (near the best a local search finds) 30 trials need not
    beat it, so only "never slower" is asserted."""
    url = f"sqlite:///{tmp_path / 't.db'}"
    before = _compile_small_gemm(url, monkeypatch)
    assert before.sources == ["default"]
    r = runner.invoke(app, ["tune", str(gemm_script), "--trials", "30", "--strategy", "tpe",
                            "--seed", "0", "--db", url])
    assert r.exit_code == 0, r.output
    after = _compile_small_gemm(url, monkeypatch)
    assert after.sources == ["tuned"]
    assert after.simulate().cycles <= before.simulate().cycles


def test_resume_counts_what_the_database_holds(gemm_script: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    args = ["tune", str(gemm_script), "--strategy", "tpe", "--seed", "1", "--db", url]
    assert runner.invoke(app, [*args, "--trials", "10"]).exit_code == 0
    assert len(_records(url)) == 10
    r = runner.invoke(app, [*args, "--trials", "20"])
    assert r.exit_code == 0, r.output
    recs = _records(url)
    assert len(recs) == 20
    assert len({x.schedule_key for x in recs}) == 20
    again = runner.invoke(app, [*args, "--trials", "20"])
    assert again.exit_code == 0 and "nothing to do" in again.output
    assert len(_records(url)) == 20


def test_early_stopping_and_timeout(gemm_script: Path, tmp_path: Path) -> None:
    # (tests/test_cli_everyday.py checks when early stopping counts from)
    norm = tmp_path / "norm.py"
    norm.write_text(NORM)
    url = f"sqlite:///{tmp_path / 'e.db'}"
    r = runner.invoke(app, ["tune", str(norm), "--trials", "500", "--strategy", "random",
                            "--seed", "0", "--db", url, "--early-stopping", "3"])
    assert r.exit_code == 0 and "early-stopped" in r.output, r.output
    assert len(_records(url)) < 100
    url2 = f"sqlite:///{tmp_path / 'f.db'}"
    t0 = time.perf_counter()
    r = runner.invoke(app, ["tune", str(gemm_script), "--trials", "5000", "--db", url2,
                            "--timeout", "2"])
    assert r.exit_code == 0 and "timeout" in r.output, r.output
    assert time.perf_counter() - t0 < 30


def test_sigkill_loses_nothing_and_measures_nothing_twice(gemm_script: Path,
                                                          tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'k.db'}"
    cmd = [sys.executable, "-m", "pypto.cli", "tune", str(gemm_script), "--trials", "40",
           "--strategy", "tpe", "--seed", "3", "--db", url]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        count = 0
        while time.time() < deadline and proc.poll() is None:
            if (tmp_path / "k.db").exists():
                try:
                    count = len(_records(url))
                except Exception:  # noqa: BLE001 - the schema may be half-created
                    count = 0
                if count >= 8:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    kept = {r.schedule_key for r in _records(url)}
    assert len(kept) >= count >= 8
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    recs = _records(url)
    assert len(recs) == 40
    keys = [r.schedule_key for r in recs]
    assert len(set(keys)) == 40 and kept <= set(keys)


@pytest.mark.parametrize("strategy", ["random", "tpe"])
def test_seeded_runs_are_reproducible(strategy: str, tmp_path: Path) -> None:
    import pypto
    from pypto.db import open_store
    from pypto.tuner.loop import TuneOptions, tune_task
    from pypto.tuner.tasks import extract_tasks

    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = k.lower(pypto.spec((256, 1024), "float16"), pypto.spec((1024, 384), "float16"))
    orders = []
    for i in range(2):
        with open_store(f"sqlite:///{tmp_path / f'{strategy}{i}.db'}") as store:
            (task,) = extract_tasks([c])
            orders.append(tune_task(task, store, TuneOptions(strategy, 24, seed=7)).order)
    assert len(orders[0]) == 24 and orders[0] == orders[1]


def _tune_relu_16(strategy: str, trials: int, url: str,
                  monkeypatch: pytest.MonkeyPatch) -> tuple[TaskResult, list[tuple[Any, ...]]]:
    """A seeded run on a 144-point space (a sampler soon repeats itself there); the result
    and every trial of its study: (number, state, value, params, user attributes)."""
    import pypto
    from pypto.db import open_store
    from pypto.tuner import study as study_module
    from pypto.tuner.loop import TuneOptions, tune_task
    from pypto.tuner.tasks import extract_tasks

    studies: list[Any] = []
    opened = study_module.open_study

    def keep(*args: Any, **kwargs: Any) -> Any:
        studies.append(opened(*args, **kwargs))
        return studies[-1]

    monkeypatch.setattr(study_module, "open_study", keep)
    k = pypto.kernel(lambda a: pypto.relu(a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (task,) = extract_tasks([k.lower(pypto.spec((16, 16), "float16"))])
    with open_store(url) as store:
        res = tune_task(task, store, TuneOptions(strategy, trials, seed=0))
    (study,) = studies
    return res, [(t.number, t.state.name, t.value, sorted(t.params.items()),
                  sorted(t.user_attrs.items())) for t in study.get_trials()]


def _unaccounted(res: TaskResult, trials: list[tuple[Any, ...]]) -> int:
    """Finished trials of the study that the result does not count: the proposal made
    ahead and given back at the end (0 or 1)."""
    finished = sum(t[1] in ("COMPLETE", "FAIL") for t in trials)
    return finished - (res.trials_before + res.trials_run + res.rejected + res.duplicates)


def test_a_seeded_run_through_duplicates_and_forced_points_is_the_same_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through duplicate proposals and the mutations queued after them, a seeded run
    measures the same schedules in the same order, and its study holds the same trials
    (states, values, parameters); each of them is counted once in the result."""
    runs = [_tune_relu_16("tpe", 60, f"sqlite:///{tmp_path / f'd{i}.db'}", monkeypatch)
            for i in range(2)]
    (first, first_trials), (second, second_trials) = runs
    assert first.duplicates > 0 and first.trials_total == 60
    assert first.order == second.order and first_trials == second_trials
    assert _unaccounted(first, first_trials) in (0, 1)


def test_a_space_measured_whole_is_exhausted_and_every_trial_is_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    res, trials = _tune_relu_16("random", 400, f"sqlite:///{tmp_path / 'x.db'}", monkeypatch)
    assert res.status == "exhausted" and res.trials_total == 144
    assert len(set(res.order)) == len(res.order) == 144
    assert _unaccounted(res, trials) in (0, 1)


def test_proposals_made_ahead_are_taken_in_order_or_given_back() -> None:
    """The loop's proposer: a proposal made ahead (on its thread, while a schedule is
    measured) is the next one taken; one never taken comes back from ``close``."""
    import threading

    from pypto.tuner.prefetch import Proposer

    made: list[tuple[int, str]] = []

    def propose() -> tuple[int, str]:
        made.append((len(made), threading.current_thread().name))
        return made[-1]

    p = Proposer(propose)
    assert p.next()[0] == 0                     # nothing ahead: made now, here
    p.ahead()
    p.ahead()                                   # one at a time
    p.wait()
    assert len(made) == 2 and made[1][1].startswith("pypto-propose")
    assert p.next() == made[1]
    p.ahead()
    assert p.close() == made[2] and len(made) == 3
    off = Proposer(propose, enabled=False)
    off.ahead()
    assert off.close() is None and len(made) == 3


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize("body, message", [
    (None, "no such file"),
    ("def broken(:\n", "does not parse"),
    ("raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
    ("x = 1\n", "ran no @pypto.kernel"),
    ("import pypto\n\n@pypto.kernel\ndef f(a):\n    return a + 1\n", "ran no @pypto.kernel"),
])
def test_bad_files(body: str | None, message: str, tmp_path: Path) -> None:
    p = tmp_path / "user.py"
    if body is not None:
        p.write_text(body)
    r = runner.invoke(app, ["tune", str(p), "--db", f"sqlite:///{tmp_path / 'b.db'}"])
    assert r.exit_code == 1
    assert message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


@pytest.mark.parametrize("extra, message", [
    (["--trials", "0"], "--trials must be at least 1"),
    (["--kernel", "nope"], "no kernel named nope"),
    (["--strategy", "annealing"], "unknown strategy 'annealing'"),
    (["--target", "tpu9"], "tpu9"),
    (["--db", "sqlite:////nonexistent/dir/x.db"], "cannot use database"),
    (["--db", "postgresql+psycopg://nobody@127.0.0.1:1/none"], "cannot use database"),
])
def test_bad_options(extra: list[str], message: str, gemm_script: Path, tmp_path: Path) -> None:
    args = ["tune", str(gemm_script), *extra]
    if "--db" not in extra:
        args += ["--db", f"sqlite:///{tmp_path / 'o.db'}"]
    r = runner.invoke(app, args)
    assert r.exit_code == 1, r.output
    assert message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_real_subprocess_exit_codes(gemm_script: Path, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    ok = subprocess.run([sys.executable, "-m", "pypto.cli", "tune", str(gemm_script),
                         "--trials", "2", "--db", url], cwd=ROOT, capture_output=True,
                        text=True, timeout=120, check=False)
    assert ok.returncode == 0, ok.stderr
    assert "Tuning results" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "pypto.cli", "tune", str(tmp_path / "nope.py")],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr


def test_points_queued_by_the_loop_use_the_strategy_encoding(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pypto
    from pypto.db import open_store
    from pypto.tuner import loop
    from pypto.tuner.tasks import extract_tasks

    monkeypatch.setattr(loop, "STUCK_AFTER", 1)
    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = k.lower(pypto.spec((128, 256), "float16"), pypto.spec((256, 128), "float16"))
    with warnings.catch_warnings(), open_store(f"sqlite:///{tmp_path / 'f.db'}") as store:
        warnings.filterwarnings("error", message="Fixed parameter")
        (task,) = extract_tasks([c])
        res = loop.tune_task(task, store, loop.TuneOptions("tpe", 15, seed=0))
    assert res.trials_total == 15 and len(set(res.order)) == 15
