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
_URL_IN_TEXT = re.compile(r"[A-Za-z][\w+.-]*://\S+")
#: Query parameters that carry a password (libpq's and the drivers' names).
SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pwd", "sslpassword"})
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
    return mask_url(url)


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***``: the password in the user part
    (also one with an unescaped ``@``, which SQLAlchemy would take as part of the host)
    and any password given as a query parameter. Whatever SQLAlchemy cannot parse keeps
    only its scheme."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError, TypeError):
        scheme = re.match(r"[A-Za-z][\w+.-]*://", url)
        return f"{scheme.group(0)}***" if scheme else "***"
    host = parsed.host or ""
    if "@" in host:  # the password ran on to the last "@"
        parsed = parsed.set(host=host.rsplit("@", 1)[1], password="***")
    secrets = {key: "***" for key in parsed.query if key.lower() in SECRET_QUERY_KEYS}
    if secrets:
        parsed = parsed.update_query_dict(secrets)
    return parsed.render_as_string(hide_password=True)


def mask_urls(text: str) -> str:
    """``text`` (a command line, an error) with every URL in it passed through
    ``mask_url``."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: mask_url(m.group(0)), text)
