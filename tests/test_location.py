"""Where the schedule database is (issue 15, everyday use): ``--db``/``$PYPTO_DB``, else
the nearest ``tuning_logs/`` above the working directory, else above the script, else the
per-user database; SQLite URLs read as SQLAlchemy reads them; the README's example finds
its tuned schedule from any folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from pypto.db.location import (
    SHIPPED_LOGS,
    locate,
    resolve_url,
    sqlite_path,
    sqlite_url,
    user_database,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def unset(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No ``$PYPTO_DB``; the per-user data folder inside ``tmp_path``."""
    monkeypatch.delenv("PYPTO_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path


def test_db_and_env_override_everything(unset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (unset / "tuning_logs").mkdir()
    monkeypatch.chdir(unset)
    monkeypatch.setenv("PYPTO_DB", "sqlite:///env.db")
    env = locate()
    assert env.url == sqlite_url(unset / "env.db") and env.why == "from $PYPTO_DB"
    assert env.logs is None
    given = locate("other.db")
    assert given.url == sqlite_url(unset / "other.db") and given.why == "given with --db"
    pg = "postgresql+psycopg://u@h/db"
    assert resolve_url(pg) == pg


def test_the_nearest_tuning_logs_above_the_working_directory(unset: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    (unset / "project" / "tuning_logs").mkdir(parents=True)
    deep = unset / "project" / "src" / "kernels"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    found = locate(script=unset / "elsewhere" / "x.py")
    assert found.url == sqlite_url(unset / "project" / "tuning_logs" / "pypto.db")
    assert "working directory" in found.why
    assert found.logs == unset / "project" / "tuning_logs"
    # a nearer one wins, as a nested git repository does
    (deep / "tuning_logs").mkdir()
    monkeypatch.chdir(deep / "tuning_logs")  # a new working directory: not memoized
    assert locate().url == sqlite_url(deep / "tuning_logs" / "pypto.db")


def test_then_above_the_script_then_the_per_user_database(unset: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    (unset / "repo" / "tuning_logs").mkdir(parents=True)
    (unset / "repo" / "examples").mkdir()
    (unset / "cwd").mkdir()
    monkeypatch.chdir(unset / "cwd")
    by_script = locate(script=unset / "repo" / "examples" / "gemm.py")
    assert by_script.url == sqlite_url(unset / "repo" / "tuning_logs" / "pypto.db")
    assert "script" in by_script.why and "gemm.py" in by_script.why
    nothing = locate(script=unset / "cwd" / "mine.py")
    assert nothing.url == sqlite_url(unset / "xdg" / "pypto" / "pypto.db")
    assert nothing.why.startswith("the per-user database")
    assert nothing.logs == SHIPPED_LOGS  # so the shipped examples run tuned anywhere


def test_the_per_user_database_without_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert user_database() == Path.home() / ".local" / "share" / "pypto" / "pypto.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/ignored")  # the spec: absolute only
    assert user_database() == Path.home() / ".local" / "share" / "pypto" / "pypto.db"


path_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00/?"),
                    min_size=1, max_size=12)


@given(st.lists(path_text, min_size=1, max_size=4))
def test_sqlite_urls_read_as_sqlalchemy_reads_them(parts: list[str]) -> None:
    """The string handling that keeps SQLAlchemy out of a lookup agrees with make_url."""
    path = Path("/", *parts)
    url = sqlite_url(path)
    assert sqlite_path(url) == Path(make_url(url).database) == path
    with_query = url + "?mode=ro&uri=true"
    assert sqlite_path(with_query) == Path(make_url(with_query).database)


@given(st.text(st.characters(codec="ascii", exclude_characters="\x00?#"), max_size=20))
def test_relative_sqlite_urls_become_absolute_as_sqlalchemy_reads_them(text: str) -> None:
    url = "sqlite:///" + text
    database = make_url(url).database
    found = sqlite_path(url)
    if not database or database.startswith((":memory:", "file:")):
        assert found is None
    else:
        assert found == Path(database)


def test_memory_and_other_databases_have_no_file() -> None:
    for url in ("sqlite://", "sqlite:///:memory:", "sqlite:///file:x?uri=true",
                "postgresql+psycopg://u@h/db"):
        assert sqlite_path(url) is None


SNIPPET = textwrap.dedent("""
    import sys, warnings
    import numpy as np, pypto

    @pypto.kernel
    def gemm(A, B):
        return pypto.matmul(A, B)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pypto.Context(device_type="npu", device_id=0):
            A = pypto.tensor(np.random.rand(1024, 1024), dtype="float16")
            B = pypto.ones((1024, 1024), dtype="float16")
            compiled = gemm.lower(A, B)
    print(compiled.sources[0], "sqlalchemy" in sys.modules, len(caught))
""")


def test_the_readme_snippet_runs_tuned_from_any_folder(tmp_path: Path) -> None:
    """The README's snippet saved in a folder with no tuning_logs/ anywhere above: the
    per-user database takes the shipped logs on first use (one import through
    SQLAlchemy), and later processes read it through sqlite3 alone."""
    (tmp_path / "work").mkdir()
    script = tmp_path / "work" / "snippet.py"
    script.write_text(SNIPPET)
    env = {k: v for k, v in os.environ.items() if k != "PYPTO_DB"}
    env.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(tmp_path / "xdg"))
    runs = [subprocess.run([sys.executable, str(script)], cwd=tmp_path / "work", env=env,
                           capture_output=True, text=True, timeout=300, check=True).stdout.split()
            for _ in range(2)]
    assert runs == [["tuned", "True", "0"], ["tuned", "False", "0"]]
    assert (tmp_path / "xdg" / "pypto" / "pypto.db").is_file()
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["snippet.py"]


def test_an_example_run_from_another_folder_finds_the_repository_database(tmp_path: Path
                                                                          ) -> None:
    """``python path/to/examples/x.py`` from anywhere finds the tuning_logs/ above the
    script (a copy of the repository's layout, so the real one is not written)."""
    repo = tmp_path / "clone"
    (repo / "examples").mkdir(parents=True)
    (repo / "tuning_logs").mkdir()
    (repo / "tuning_logs" / "gemm.jsonl").write_bytes(
        (ROOT / "tuning_logs" / "gemm.jsonl").read_bytes())
    (repo / "examples" / "gemm.py").write_text(SNIPPET)
    (tmp_path / "elsewhere").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYPTO_DB"}
    env.update(PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(tmp_path / "xdg"))
    out = subprocess.run([sys.executable, str(repo / "examples" / "gemm.py")],
                         cwd=tmp_path / "elsewhere", env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    assert out.stdout.split()[0] == "tuned"
    assert (repo / "tuning_logs" / "pypto.db").is_file()
    assert not (tmp_path / "xdg").exists()
    stats = subprocess.run([sys.executable, "-m", "pypto.cli", "db", "stats", "--json"],
                           cwd=repo / "examples", env=env, capture_output=True, text=True,
                           timeout=120, check=True)
    doc = json.loads(stats.stdout)
    assert doc["path"] == str(repo / "tuning_logs" / "pypto.db")
    assert "nearest tuning_logs/" in doc["why"] and doc["records"] > 0
