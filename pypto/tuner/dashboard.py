"""``pypto dashboard``: optuna-dashboard (an optional package) on the Optuna storage of a
schedule database: the journal file beside a SQLite database, Optuna's tables on
PostgreSQL (``pypto.tuner.study.storage_for``).

Before it starts, every (workload, target) with records of the current timing model gets
its study of records brought up to date (``pypto.tuner.record_study``): records imported
with ``pypto db import``, or measured before studies were kept, show too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pypto.tuner import TuneError

if TYPE_CHECKING:
    from pypto.db import ScheduleStore

INSTALL_HINT = "pip install optuna-dashboard"


def run_dashboard(db: str | None, *, host: str, port: int,
                  echo: Callable[[str], None] = print) -> None:
    """Serve optuna-dashboard on the studies of the database ``db`` (default: $PYPTO_DB,
    else ``tuning_logs/pypto.db``) at ``http://host:port/`` until interrupted.

    Raises:
        TuneError: optuna-dashboard is not installed, the database is in memory or has no
            records, or Optuna's storage cannot be opened.
    """
    try:
        import optuna_dashboard
    except ImportError:
        raise TuneError(f"`pypto dashboard` needs optuna-dashboard, which is not installed: "
                        f"{INSTALL_HINT}") from None
    from pypto.db import display_url, open_store
    from pypto.tuner.study import storage_for

    with open_store(db) as store:
        url = store.url
        if not store.stats().exists:
            raise TuneError(f"no schedule database at {display_url(url)}: tune first "
                            "(`pypto tune FILE`) or give --db")
        storage = storage_for(url)
        if storage is None:
            raise TuneError(f"{display_url(url)} is an in-memory database: its studies "
                            "die with it; give --db a SQLite file or a postgresql:// URL")
        studies = publish_all(store)
    echo(f"optuna-dashboard on http://{host}:{port}/ ({studies} studies of records in "
         f"{display_url(url)}); Ctrl+C stops it")
    try:
        optuna_dashboard.run_server(storage, host=host, port=port)
    except KeyboardInterrupt:
        echo("optuna-dashboard stopped")
    except OSError as e:        # the port is taken, or the address is not this machine's
        raise TuneError(f"cannot serve on {host}:{port} ({e.strerror or e}): give another "
                        "--port or --host") from None


def publish_all(store: ScheduleStore) -> int:
    """Bring the study of records of every (workload, target) of ``store`` with records of
    the current timing model up to date; return how many there are."""
    from pypto.errors import PyptoError
    from pypto.schedule_space import space_for
    from pypto.sim import MODEL_VERSION
    from pypto.targets import load_target
    from pypto.tuner.record_study import RecordStudy, settled
    from pypto.tuner.tasks import Task

    count = 0
    for s in store.summary():
        if s.model_version != MODEL_VERSION:
            continue
        try:
            target = load_target(s.target_name)
            workload = s.workload.workload()
            space = space_for(workload, target)
        except PyptoError:
            continue        # a target or family this installation does not have
        if target.key != s.target_key:
            continue        # the target's file changed since: another target now
        records = store.records(workload_key=s.workload.key, target_key=s.target_key,
                                model_version=MODEL_VERSION)
        task = Task("", 0, workload, target, space)
        if RecordStudy.open(store.url, task, settled(store, records)) is not None:
            count += 1
    return count
