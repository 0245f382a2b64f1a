"""Where the schedule database is, and why, found as git finds a repository.

In order (``locate``):

1. ``--db URL`` (a ``url`` argument), else ``$PYPTO_DB``: a SQLAlchemy URL, or a path of a
   SQLite file;
2. ``tuning_logs/pypto.db`` in the nearest ``tuning_logs/`` folder at or above the working
   directory;
3. the same above the folder of the script being run (``python path/to/x.py`` or
   ``pypto tune path/to/x.py``), so a project's scripts find their database from anywhere;
4. the per-user database, ``$XDG_DATA_HOME/pypto/pypto.db`` (``~/.local/share/pypto``).

A database found by 2–4 imports the ``*.jsonl`` tuning logs beside it on first use; the
per-user one imports the logs shipped in PyPTO's source tree (``Location.logs``).

Plain string handling, no SQLAlchemy: a compile-time lookup must not pay for importing it.
SQLite URLs are read as SQLAlchemy's ``make_url`` reads them (``tests/test_location.py``
checks that on random paths); passwords are masked with ``make_url`` itself.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

ENV_VAR = "PYPTO_DB"
LOGS_DIR = "tuning_logs"
DB_FILE = "pypto.db"
#: How the default is found, for the command line's help.
DEFAULT_HELP = ("default: $PYPTO_DB, else tuning_logs/pypto.db in the nearest tuning_logs/ "
                "at or above the working directory (or the script), else the per-user "
                "database; `pypto db stats` says which")
#: The tuning logs shipped with PyPTO's source tree (a clone, or ``pip install -e``).
SHIPPED_LOGS = Path(__file__).resolve().parents[2] / LOGS_DIR
_PACKAGE = Path(__file__).resolve().parents[1]

_URL_IN_TEXT = re.compile(r"[A-Za-z][\w+.-]*://\S+")
#: Query parameters that carry a password (libpq's and the drivers' names).
SECRET_QUERY_KEYS = frozenset({"password", "passwd", "pwd", "sslpassword"})


@dataclass(frozen=True)
class Location:
    """The database a command or a compile uses.

    Attributes:
        url: the SQLAlchemy URL (SQLite paths absolute).
        why: how it was chosen, for people (``pypto db stats`` prints it).
        logs: the folder whose ``*.jsonl`` logs are imported into it on first use; None
            for a database given by ``--db`` or ``$PYPTO_DB``.
    """

    url: str
    why: str
    logs: Path | None = None


_located: dict[tuple[str | None, str, str | None], Location] = {}
_ours: dict[str, bool] = {}  # script path -> inside the pypto package


def locate(url: str | None = None, script: str | os.PathLike[str] | None = None) -> Location:
    """The database to use: ``url``, else ``$PYPTO_DB``, else the nearest ``tuning_logs/``
    above the working directory, else above ``script`` (default: the running
    ``__main__`` script), else the per-user database. Memoized per (value, working
    directory, script): a compile looks this up on every call."""
    given = url if url and url.strip() else None
    env = None if given else os.environ.get(ENV_VAR)
    value = given or (env if env and env.strip() else None)
    script_path = os.fspath(script) if script is not None else _main_script()
    memo = (value if value is None else ("--db " if given else "$ ") + value,
            os.getcwd(), script_path)
    found = _located.get(memo)
    if found is None:
        found = _located[memo] = _locate(given, value, script_path)
    return found


def _locate(given: str | None, value: str | None, script: str | None) -> Location:
    if value is not None:
        return Location(_normalize(value.strip()),
                        "given with --db" if given else f"from ${ENV_VAR}")
    cwd = Path.cwd()
    logs = _nearest_logs(cwd)
    if logs is not None:
        return Location(sqlite_url(logs / DB_FILE),
                        f"the nearest {LOGS_DIR}/ at or above the working directory", logs)
    if script is not None:
        folder = Path(script).absolute().parent
        logs = _nearest_logs(folder)
        if logs is not None:
            return Location(sqlite_url(logs / DB_FILE),
                            f"the nearest {LOGS_DIR}/ above the script {_shown(script)}", logs)
    return Location(sqlite_url(user_database()),
                    f"the per-user database: no {LOGS_DIR}/ at or above the working directory"
                    + (" or the script" if script is not None else ""),
                    SHIPPED_LOGS if SHIPPED_LOGS.is_dir() else None)


def _nearest_logs(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / LOGS_DIR
        if candidate.is_dir():
            return candidate
    return None


def _main_script() -> str | None:
    """The script ``python`` runs (``__main__.__file__``), when it is a user's ``.py`` file:
    not PyPTO's own modules (``python -m pypto.cli``) nor a tool's ``__main__.py``."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not path or not path.endswith(".py") or path.endswith("__main__.py"):
        return None
    mine = _ours.get(path)
    if mine is None:  # memoized: a compile asks on every call
        mine = _ours[path] = Path(path).absolute().is_relative_to(_PACKAGE)
    return None if mine else path


def user_database() -> Path:
    """``$XDG_DATA_HOME/pypto/pypto.db``, ``~/.local/share/pypto/pypto.db`` by default."""
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    root = Path(base) if base and Path(base).is_absolute() else \
        Path.home() / ".local" / "share"
    return root / "pypto" / DB_FILE


def default_url() -> str:
    """The database used when neither ``--db`` nor ``$PYPTO_DB`` says one."""
    return _locate(None, None, _main_script()).url


def resolve_url(url: str | None = None, script: str | os.PathLike[str] | None = None) -> str:
    """``locate(url, script).url``: a value without ``://`` is a file path of a SQLite
    database; relative SQLite paths are made absolute."""
    return locate(url, script).url


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite file (its path made absolute and %-quoted, as
    ``make_url`` unquotes it)."""
    return f"sqlite:///{quote(str(path.expanduser().absolute()), safe='/')}"


def _normalize(value: str) -> str:
    if "://" not in value:
        return sqlite_url(Path(value))
    parts = _sqlite_parts(value)
    if parts is not None and parts[1] and not _special(parts[1]):
        scheme, database, query = parts
        if not Path(database).is_absolute():
            absolute = quote(str(Path(database).absolute()), safe="/")
            return f"{scheme}:///{absolute}" + (f"?{query}" if query else "")
    return value


def _sqlite_parts(url: str) -> tuple[str, str, str] | None:
    """(scheme, database, query) of a ``sqlite[+driver]:///database?query`` URL (the
    database %-decoded, as SQLAlchemy reads it); None for anything else (``sqlite://`` is
    in memory)."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.partition("+")[0] != "sqlite" or not rest.startswith("/"):
        return None
    database, _, query = rest[1:].partition("?")
    return scheme, unquote(database), query


def _special(database: str) -> bool:
    return database.startswith((":memory:", "file:"))


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL; None for other databases and in-memory SQLite."""
    parts = _sqlite_parts(url)
    if parts is None or not parts[1] or _special(parts[1]):
        return None
    return Path(parts[1])


def _shown(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the working directory when inside it."""
    try:
        return str(Path(path).absolute().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def display_url(url: str) -> str:
    """The URL without its password, or the path (relative to the working directory when
    inside it) for a SQLite file."""
    path = sqlite_path(url)
    if path is not None:
        return _shown(path)
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
        scheme, sep, _ = url.partition("://")
        plausible = scheme[:1].isalpha() and all(c.isalnum() or c in "+.-" for c in scheme)
        return f"{scheme}://***" if sep and plausible else "***"
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


def read_only_uri(path: Path) -> str | None:
    """The ``file:`` URI that opens the SQLite file at ``path`` read-only, when this
    process cannot write it (the file or its directory is read-only); else None.
    ``immutable=1`` when the directory is read-only and the file's WAL index (``-shm``)
    is not there: SQLite could not create it, and without it would not open the file."""
    if not path.is_file():
        return None
    directory = path.parent if str(path.parent) else Path(".")
    if os.access(path, os.W_OK) and os.access(directory, os.W_OK):
        return None
    uri = f"{path.absolute().as_uri()}?mode=ro"
    shm = path.with_name(path.name + "-shm")
    if not os.access(directory, os.W_OK) and not shm.exists():
        uri += "&immutable=1"
    return uri
