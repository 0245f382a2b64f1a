"""PyPTO changes nothing in a database that is not its own (issue 15, defect 4): once
`pypto db stats` switched another program's SQLite file to WAL for good, and `tune` /
`import` added PyPTO's tables to it."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pypto.cli import app
from pypto.db import open_store

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def foreign_file(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
        conn.execute("INSERT INTO customers (name) VALUES ('ada'), ('grace')")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def journal_mode(path: Path) -> str:
    with sqlite3.connect(path) as conn:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])


def tables(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                                 "WHERE type = 'table'"))


@pytest.mark.parametrize("command", [["db", "stats"], ["db", "list"], ["report", "-o", "r.html"]])
def test_reading_another_programs_database_changes_nothing(tmp_path: Path,
                                                           command: list[str]) -> None:
    path = tmp_path / "shop.db"
    digest = foreign_file(path)
    result = runner.invoke(app, [*command, "--db", str(path)])
    assert "Traceback" not in result.output
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert journal_mode(path) == "delete"
    assert not (tmp_path / "shop.db-wal").exists()


def test_writing_to_another_programs_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "shop.db"
    digest = foreign_file(path)
    result = runner.invoke(app, ["db", "import", str(ROOT / "tuning_logs" / "gemm.jsonl"),
                                 "--db", str(path)])
    assert result.exit_code == 1
    assert "another program's SQLite database (tables customers)" in result.output
    assert "will not add its tables" in result.output
    assert tables(path) == ["customers"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert journal_mode(path) == "delete"


def test_a_database_pypto_makes_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "mine.db"
    result = runner.invoke(app, ["db", "import", str(ROOT / "tuning_logs" / "gemm.jsonl"),
                                 "--db", str(path)])
    assert result.exit_code == 0, result.output
    assert journal_mode(path) == "wal"
    with open_store(str(path)) as store:
        assert store.stats().records > 0
