"""The command line as a new user meets it (issue 15, everyday use): --version, -v and
--log-level anywhere on the line, --traceback for a failed script, `space` and `asm`
without the script's prints and with the schedule's real source, whole lines without a
terminal, an ETA, the duplicate count's wording, and early stopping counted from the first
improvement over the default."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pypto.cli import app
from pypto.cli_output import hoist
from pypto.version import __version__

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

GEMM = textwrap.dedent("""
    import numpy as np, pypto

    @pypto.kernel
    def small_gemm(a, b):
        return pypto.matmul(a, b)

    print("HELLO FROM THE SCRIPT")
    small_gemm(pypto.tensor(np.ones((256, 1024)), dtype="float16"),
               pypto.tensor(np.ones((1024, 384)), dtype="float16"))
""")
NORM = textwrap.dedent("""
    import numpy as np, pypto

    @pypto.kernel
    def norm(x):
        return pypto.layernorm(x)

    norm(pypto.tensor(np.random.rand(512, 768), dtype="float16"))
""")
BROKEN = textwrap.dedent("""
    import pypto

    def helper(x):
        return x / 0

    helper(1)
""")


@pytest.fixture
def scripts(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in (("gemm", GEMM), ("norm", NORM), ("broken", BROKEN)):
        out[name] = tmp_path / f"{name}.py"
        out[name].write_text(text)
    return out


def _cycles_in_order(db: Path) -> list[int | None]:
    conn = sqlite3.connect(db)
    try:
        return [row[0] for row in conn.execute("SELECT cycles FROM pypto_records ORDER BY id")]
    finally:
        conn.close()


def test_version() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.startswith(f"pypto {__version__} (timing model ")
    real = subprocess.run([sys.executable, "-m", "pypto.cli", "--version"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert real.returncode == 0 and real.stdout == r.output


def test_global_options_anywhere_on_the_line() -> None:
    assert hoist(["db", "stats", "-vv", "--log-level", "info", "--json"]) == \
        ["-vv", "--log-level", "info", "db", "stats", "--json"]
    assert hoist(["run", "x.py", "--traceback", "--log-level=debug"]) == \
        ["--traceback", "--log-level=debug", "run", "x.py"]
    assert hoist(["tune", "x.py", "--", "-v"]) == ["tune", "x.py", "--", "-v"]
    for args in (["-v", "db", "stats"], ["db", "stats", "-v"], ["db", "-v", "stats"]):
        r = runner.invoke(app, args)
        assert r.exit_code == 0, (args, r.output)


def test_a_bad_log_level_is_a_usage_error() -> None:
    r = runner.invoke(app, ["--log-level", "loud", "targets"])
    assert r.exit_code == 2 and "--log-level must be one of debug, info, warning, error" in \
        r.output


def test_verbose_logging_says_which_database_and_schedule(scripts: dict[str, Path],
                                                          tmp_path: Path) -> None:
    quiet = runner.invoke(app, ["asm", str(scripts["gemm"])],
                          env={"PYPTO_DB": str(tmp_path / "q.db")})
    assert quiet.exit_code == 0 and "pypto.compile" not in quiet.output
    # a database this process has not looked into yet (lookups are cached per process)
    r = runner.invoke(app, ["asm", str(scripts["gemm"]), "-vv"],
                      env={"PYPTO_DB": str(tmp_path / "v.db")})
    assert r.exit_code == 0, r.output
    assert "no schedule database at" in r.output and "from $PYPTO_DB" in r.output
    assert "the default schedule" in r.output  # debug: each lookup's outcome
    assert "ran 1 kernel call(s)" in r.output


def test_a_failed_script_is_one_line_or_with_traceback_the_whole_story(
        scripts: dict[str, Path]) -> None:
    short = runner.invoke(app, ["run", str(scripts["broken"])])
    assert short.exit_code == 1
    assert f"error: {scripts['broken']}:5: raised ZeroDivisionError" in short.output
    assert "Traceback" not in short.output
    full = subprocess.run([sys.executable, "-m", "pypto.cli", "run", str(scripts["broken"]),
                           "--traceback"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert full.returncode == 1
    assert "Traceback (most recent call last)" in full.stderr
    assert "return x / 0" in full.stderr and "in helper" in full.stderr
    assert "runpy" not in full.stderr and "pypto/frontend" not in full.stderr
    assert full.stderr.rstrip().splitlines()[-1].startswith("error: ")


def test_space_and_asm_keep_the_scripts_prints_out_and_name_the_source(
        scripts: dict[str, Path], tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    env = {"PYPTO_DB": str(db)}
    asm = runner.invoke(app, ["asm", str(scripts["gemm"])], env=env)
    assert asm.exit_code == 0 and "HELLO FROM THE SCRIPT" not in asm.stdout
    assert asm.stdout.startswith("; kernel small_gemm on ascend910b")
    verbose = runner.invoke(app, ["asm", str(scripts["gemm"]), "-v"], env=env)
    assert "HELLO FROM THE SCRIPT" in verbose.stderr
    assert "HELLO FROM THE SCRIPT" not in verbose.stdout
    before = runner.invoke(app, ["space", str(scripts["gemm"])], env=env)
    assert before.exit_code == 0 and "HELLO" not in before.stdout
    assert "  schedule (default): {" in before.stdout
    tuned = runner.invoke(app, ["tune", str(scripts["gemm"]), "--trials", "3",
                                "--strategy", "random", "--seed", "1", "--db", str(db)])
    assert tuned.exit_code == 0, tuned.output
    after = runner.invoke(app, ["space", str(scripts["gemm"])], env=env)
    assert "  schedule (tuned): {" in after.stdout and "(default)" not in after.stdout


def test_early_stopping_waits_for_the_first_improvement_over_the_default(
        scripts: dict[str, Path], tmp_path: Path) -> None:
    # layernorm: random search beats the default after some trials, then stops 3 after
    # its best
    db = tmp_path / "n.db"
    r = runner.invoke(app, ["tune", str(scripts["norm"]), "--trials", "300", "--strategy",
                            "random", "--seed", "0", "--db", str(db), "--early-stopping", "3"])
    assert r.exit_code == 0 and "early-stopped" in r.output, r.output
    cycles = _cycles_in_order(db)
    default = cycles[0]
    ok = [c if c is not None else float("inf") for c in cycles]
    first_better = next(i for i, c in enumerate(ok) if c < default)
    best = ok.index(min(ok))
    assert best >= first_better > 3  # it went on past 3 trials without beating the default
    assert len(cycles) == best + 1 + 3
    # a search that never beats the default runs all its trials
    db2 = tmp_path / "g.db"
    r = runner.invoke(app, ["tune", str(scripts["gemm"]), "--trials", "12", "--strategy",
                            "random", "--seed", "0", "--db", str(db2), "--early-stopping", "3"])
    assert r.exit_code == 0 and "small_gemm[0]: done" in r.output, r.output
    cycles = _cycles_in_order(db2)
    assert len(cycles) == 12 and min(c for c in cycles if c is not None) == cycles[0]


def test_duplicates_say_elsewhere_only_when_someone_else_measures() -> None:
    from types import SimpleNamespace

    from pypto.tuner.cli import _notes

    res = SimpleNamespace(trials_run=10, trials_total=10, trials_before=0, rejected=0,
                          duplicates=4, transferred=0, mutated=0, uniform=0, requeued=0,
                          errors=0)
    assert "4 proposal(s) measured already skipped" in _notes(res)
    assert "elsewhere" in " ".join(_notes(res, pooled=True))
    res.trials_total = 14  # 4 by another run on the same database
    assert "elsewhere" in " ".join(_notes(res))


def test_without_a_terminal_lines_are_whole_and_the_bar_has_an_eta(scripts: dict[str, Path],
                                                                   tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-m", "pypto.cli", "tune", str(scripts["gemm"]),
                          "--trials", "4", "--strategy", "random", "--seed", "2", "--db",
                          str(tmp_path / "w.db")], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    spec = "matmul (float16[256, 1024], float16[1024, 384]) -> float16[256, 384]"
    assert any(spec in line for line in out.stdout.splitlines())  # not folded at 80
    assert "HELLO" not in out.stdout
    bar = [line for line in out.stderr.splitlines() if "trials/s" in line]
    assert bar and "ETA" in bar[-1] and "best" in bar[-1]
    assert max(len(line) for line in out.stdout.splitlines()) > 80
