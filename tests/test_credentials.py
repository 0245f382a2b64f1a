"""No password given in a database URL is stored or printed (issue 15, defect 5): not
in ``pypto_runs.command``, not in errors, not when the password holds an unescaped
``@`` or comes as a ``?password=`` query parameter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from pypto.db import open_store
from pypto.db.location import display_url, mask_url, mask_urls

PG_ENV = "PYPTO_TEST_PG_URL"
ROOT = Path(__file__).resolve().parents[1]
SECRET = "s3cr3t-Zq"


@pytest.mark.parametrize("url", [
    f"postgresql+psycopg://user:{SECRET}@127.0.0.1:5432/db",
    f"postgresql+psycopg://user:{SECRET[:3]}@{SECRET[3:]}@127.0.0.1:5432/db",  # unescaped @
    f"postgresql+psycopg://user@127.0.0.1:5432/db?password={SECRET}",
    f"postgresql+psycopg://user@127.0.0.1:5432/db?sslmode=disable&PASSWORD={SECRET}",
    f"postgresql+psycopg://user:{SECRET[:3]}%40{SECRET[3:]}@127.0.0.1/db",
    f"postgresql+psycopg://user:{SECRET}@[not a url",
])
def test_masked_urls_hold_no_password(url: str) -> None:
    for shown in (mask_url(url), display_url(url), mask_urls(f"pypto tune k.py --db {url} -v")):
        assert SECRET not in shown and SECRET[3:] not in shown
    assert mask_url(url).startswith("postgresql+psycopg://")


def test_masking_keeps_what_is_not_a_secret() -> None:
    url = "postgresql+psycopg://user:pw@db.example:5433/tuning?sslmode=require"
    assert mask_url(url) == "postgresql+psycopg://user:***@db.example:5433/tuning?sslmode=require"
    assert mask_urls("pypto tune gemm.py --trials 5") == "pypto tune gemm.py --trials 5"
    assert display_url("postgresql+psycopg://postgres@127.0.0.1/test") == \
        "postgresql+psycopg://postgres@127.0.0.1/test"


@given(st.text(alphabet=st.characters(codec="ascii", exclude_characters="/?#\x00"),
               min_size=4, max_size=30).filter(lambda s: s.strip() == s and " " not in s))
def test_any_password_in_the_user_part_is_masked(password: str) -> None:
    assume(password not in "postgresql+psycopg://user:***@127.0.0.1:5432/db")
    shown = mask_url(f"postgresql+psycopg://user:{password}@127.0.0.1:5432/db")
    assert password not in shown


def test_a_run_stores_its_command_without_the_password(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'x.db'}") as store:
        store.start_run(strategy="random", trials_asked=1,
                        command=f"pypto tune k.py --db postgresql+psycopg://u:{SECRET}@h/db")
        (run,) = store.runs()
        assert SECRET not in run.command and "u:***@h/db" in run.command


@pytest.fixture
def pg_url_with_password() -> Iterator[str]:
    """The test server's URL with a password added (trust auth ignores it), its
    search_path a fresh schema."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"the PostgreSQL tests need {PG_ENV}")
    schema = f"pypto_cred_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
    try:
        url = make_url(base).set(password=SECRET).update_query_dict(
            {"options": f"-csearch_path={schema}"})
        yield url.render_as_string(hide_password=False)
    finally:
        with admin.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
        admin.dispose()


def test_tune_on_postgresql_neither_stores_nor_prints_the_password(
        tmp_path: Path, pg_url_with_password: str) -> None:
    script = tmp_path / "k.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, pypto

        @pypto.kernel
        def k(a, b):
            return pypto.matmul(a, b)

        k(pypto.tensor(np.ones((64, 64)), dtype="float16"),
          pypto.tensor(np.ones((64, 64)), dtype="float16"))
    """))
    done = subprocess.run([sys.executable, "-m", "pypto.cli", "tune", str(script), "--trials",
                           "2", "--strategy", "random", "--db", pg_url_with_password],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert SECRET not in done.stdout + done.stderr
    with open_store(pg_url_with_password) as store:
        (run,) = store.runs()
    assert "pypto tune" in run.command and SECRET not in run.command


def test_an_unreachable_server_error_does_not_print_the_password() -> None:
    url = f"postgresql+psycopg://u:{SECRET}@127.0.0.1:9/db?password={SECRET}"
    done = subprocess.run([sys.executable, "-m", "pypto.cli", "db", "stats", "--db", url],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert SECRET not in done.stdout + done.stderr
    assert "127.0.0.1" in done.stdout + done.stderr
