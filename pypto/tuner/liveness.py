"""Is a tuning worker alive? Heartbeats for peers anywhere, process ids for peers here.

A worker's claims carry a heartbeat that a thread refreshes every ``HEARTBEAT_S``; a claim
not refreshed for ``STALE_AFTER`` seconds belongs to a dead worker (on any machine) and
the next claim on its task removes it. On the same host a dead worker is known at once:
its process is gone (``dead_here``), so a rerun after a SIGKILL does not wait out the
grace period. Worker processes also die with their parent (``die_with_parent``), so
killing ``pypto tune`` kills its workers.

Runs are told the same way: a ``running`` run whose process is gone (this host) or whose
heartbeat went stale (any host) was killed without ending it, and the next run on the
database ends it as ``interrupted`` (``end_lost_runs``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypto.db import Claim, Run, ScheduleStore, WorkerInfo

HEARTBEAT_S = 5.0
#: A ``running`` run of another host whose heartbeat is older than this many seconds was
#: killed: its process (the loop, or the pool that queued it) beats every ``HEARTBEAT_S``.
#: Longer than a claim's ``STALE_AFTER``, since a wrong verdict ends a live run's row.
RUN_STALE_AFTER = 300.0


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def dead_here(store: ScheduleStore, workload_key: str, target_key: str,
              me: WorkerInfo) -> list[Claim]:
    """Remove and return the claims on a task of workers of this host whose process is
    gone."""
    host = socket.gethostname()
    dead = {c.worker for c in store.claims(workload_key, target_key)
            if c.host == host and c.worker != me.id and c.pid != me.pid
            and not pid_alive(c.pid)}
    return [claim for worker in sorted(dead) for claim in store.release(worker)]


def run_lost(run: Run, now: float | None = None) -> bool:
    """Whether ``run`` says ``running`` but its process died without ending it: on this
    host, its process is gone; on another, its heartbeat is older than
    ``RUN_STALE_AFTER``. A run that recorded neither (imported, or started before schema
    revision 0004) is not judged."""
    if run.status != "running":
        return False
    if run.pid is not None and run.host == socket.gethostname():
        return not pid_alive(run.pid)
    now = time.time() if now is None else now
    return run.heartbeat is not None and now - run.heartbeat > RUN_STALE_AFTER


def end_lost_runs(store: ScheduleStore) -> list[int]:
    """End every lost ``running`` run (``run_lost``) as ``interrupted``; their ids. The
    records they committed stay; a run that cannot be updated is left as it is."""
    from pypto.errors import DatabaseError

    ended = []
    for run in store.runs():
        if run_lost(run):
            with contextlib.suppress(DatabaseError):
                store.update_run(run.id, status="interrupted")
                ended.append(run.id)
    return ended


@contextlib.contextmanager
def heartbeat(store: ScheduleStore, worker: WorkerInfo,
              interval: float = HEARTBEAT_S, run_id: int | None = None) -> Iterator[None]:
    """Refresh ``worker``'s claims, and run ``run_id``'s heartbeat, every ``interval``
    seconds while the block runs (in a thread, so a long measurement does not make the
    worker look dead)."""
    from pypto.db.location import sqlite_path
    from pypto.errors import DatabaseError

    if store.url.startswith("sqlite") and sqlite_path(store.url) is None:
        yield                   # an in-memory database: no other process can see it
        return
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval):
            with contextlib.suppress(DatabaseError):
                store.heartbeat(worker.id)
                if run_id is not None:
                    store.update_run(run_id)

    thread = threading.Thread(target=beat, name="pypto-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def die_with_parent() -> None:
    """Have the kernel kill this process when its parent dies (Linux); elsewhere the
    workers notice through ``parent_gone``."""
    import signal

    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def parent_gone(parent_pid: int) -> bool:
    return os.getppid() != parent_pid
