"""The shareable tuning logs (``tuning_logs/*.jsonl``) and the store they are kept in.

A fresh clone ships logs, not a database: the first compile-time lookup of the default
database imports the logs it has not seen in this exact content.
"""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pypto.errors import ScheduleFallbackWarning

if TYPE_CHECKING:
    from pypto.db.reader import ScheduleReader
    from pypto.db.store import ScheduleStore


def sync_tuning_logs(store: ScheduleStore, directory: Path,
                     stacklevel: int = 2) -> list[Any]:
    """Import the ``*.jsonl`` logs of ``directory`` that ``store`` has not seen in this
    exact content (their sha256 is kept in the store's meta table). Bad lines are skipped
    with a warning. Returns the import reports."""
    reports = []
    for path, digest in pending_logs(store, directory):
        report = store.import_jsonl(path, skip_bad=True)
        store.set_meta(_meta_key(path), digest)
        if report.skipped:
            warnings.warn(f"pypto: {report.describe()}", ScheduleFallbackWarning,
                          stacklevel=stacklevel)
        reports.append(report)
    return reports


def import_pending(url: str, directory: Path, stacklevel: int = 2) -> list[Any]:
    """Import into the database at ``url`` the logs of ``directory`` it has not imported
    in this exact content (creating it if need be). Checking costs a read through
    ``sqlite3`` (``pypto.db.reader``); SQLAlchemy loads only when there is something to
    import. Returns the import reports."""
    from pypto.db.reader import open_reader

    reader = open_reader(url)
    try:
        if not pending_logs(reader, directory):
            return []
    finally:
        if reader is not None:
            reader.close()
    from pypto.db import open_store

    with open_store(url) as store:
        return sync_tuning_logs(store, directory, stacklevel=stacklevel + 1)


def pending_logs(store: ScheduleReader | None, directory: Path) -> list[tuple[Path, str]]:
    """The logs of ``directory`` that ``store`` (None: a database not made yet) has not
    imported in this exact content, each with its sha256."""
    out = []
    for path in log_files(directory):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if store is None or store.get_meta(_meta_key(path)) != digest:
            out.append((path, digest))
    return out


def _meta_key(path: Path) -> str:
    return f"imported:{path.name}"


def log_files(directory: Path) -> list[Path]:
    """The ``*.jsonl`` files of ``directory``, sorted (none if it cannot be read)."""
    try:
        return sorted(p for p in directory.glob("*.jsonl") if p.is_file())
    except OSError:
        return []
