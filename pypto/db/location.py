"""Where the schedule database is: ``PYPTO_DB``, else ``tuning_logs/pypto.db`` under the
working directory. Plain string handling, so a lookup with no database file never has to
import SQLAlchemy."""

from __future__ import annotations

import os
import re
from pathlib import Path

ENV_VAR = "PYPTO_DB"
DEFAULT_DIR = Path("tuning_logs")
DEFAULT_FILE = DEFAULT_DIR / "pypto.db"

_SQLITE = re.compile(r"^sqlite(\+\w+)?://(/?)([^?]*)(\?.*)?$")
_PASSWORD = re.compile(r"^([\w+.-]+://[^:/@]*):[^@]*@")
_defaults: dict[str, str] = {}
_resolved: dict[tuple[str, str], str] = {}


def default_url() -> str:
    """``sqlite:///<cwd>/tuning_logs/pypto.db`` (absolute, so a cache keyed on it follows
    ``chdir``)."""
    cwd = os.getcwd()
    url = _defaults.get(cwd)
    if url is None:
        url = _defaults[cwd] = f"sqlite:///{Path(cwd) / DEFAULT_FILE}"
    return url


def resolve_url(url: str | None = None) -> str:
    """``url``, else ``$PYPTO_DB``, else the default. A value without ``://`` is a file path
    of a SQLite database; relative SQLite paths are made absolute."""
    value = url or os.environ.get(ENV_VAR)
    if not value or not value.strip():
        return default_url()
    # Relative paths resolve against the working directory: part of the memo key.
    memo = (value, os.getcwd())
    found = _resolved.get(memo)
    if found is None:
        found = _resolved[memo] = _normalize(value.strip())
    return found


def _normalize(value: str) -> str:
    if "://" not in value:
        return f"sqlite:///{Path(value).expanduser().absolute()}"
    m = _SQLITE.match(value)
    if m and m.group(2) and m.group(3) and not m.group(3).startswith((":memory:", "file:")):
        path = Path(m.group(3))
        if not path.is_absolute():
            return f"sqlite{m.group(1) or ''}:///{path.absolute()}{m.group(4) or ''}"
    return value


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL; None for other databases and in-memory SQLite."""
    m = _SQLITE.match(url)
    if not m or not m.group(2) or not m.group(3) or m.group(3).startswith((":memory:", "file:")):
        return None
    return Path(m.group(3))


def is_default(url: str) -> bool:
    return url == default_url()


def display_url(url: str) -> str:
    """The URL without its password, or the path (relative to the working directory when
    inside it) for a SQLite file."""
    path = sqlite_path(url)
    if path is not None:
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)
    return _PASSWORD.sub(r"\1:***@", url)
