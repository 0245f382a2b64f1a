"""Shared test setup: the schedule database of a test session is a temporary file, so
tests never read or write the repository's ``tuning_logs/`` (whose committed logs would
otherwise turn expected ``default`` schedules into ``tuned`` ones), and the per-user
database (``$XDG_DATA_HOME/pypto``) of a test that unsets ``PYPTO_DB`` is a temporary
one too."""

from __future__ import annotations

import logging
import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _session_database(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    previous = {name: os.environ.get(name) for name in ("PYPTO_DB", "XDG_DATA_HOME")}
    os.environ["PYPTO_DB"] = f"sqlite:///{tmp_path_factory.mktemp('db') / 'session.db'}"
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg_data"))
    yield
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def _pypto_logger():  # type: ignore[no-untyped-def]
    """The CLI configures the ``pypto`` logger for its process (a handler on stderr, no
    propagation); commands run in-process by ``CliRunner`` must not leave that to the
    tests after them (``caplog`` listens at the root)."""
    logger = logging.getLogger("pypto")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:] = saved[0]
    logger.setLevel(saved[1])
    logger.propagate = saved[2]
