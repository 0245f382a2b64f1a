"""Shared test setup: the schedule database of a test session is a temporary file, so
tests never read or write the repository's ``tuning_logs/`` (whose committed logs would
otherwise turn expected ``default`` schedules into ``tuned`` ones)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _session_database(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    previous = os.environ.get("PYPTO_DB")
    os.environ["PYPTO_DB"] = f"sqlite:///{tmp_path_factory.mktemp('db') / 'session.db'}"
    yield
    if previous is None:
        os.environ.pop("PYPTO_DB", None)
    else:
        os.environ["PYPTO_DB"] = previous
