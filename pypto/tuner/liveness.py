"""Is a tuning worker alive? Heartbeats for peers anywhere, process ids for peers here.

A worker's claims carry a heartbeat that a thread refreshes every ``HEARTBEAT_S``; a claim
not refreshed for ``STALE_AFTER`` seconds belongs to a dead worker (on any machine) and
the next claim on its task removes it. On the same host a dead worker is known at once:
its process is gone (``dead_here``), so a rerun after a SIGKILL does not wait out the
grace period. Worker processes also die with their parent (``die_with_parent``), so
killing ``pypto tune`` kills its workers.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pypto.db import Claim, ScheduleStore, WorkerInfo

HEARTBEAT_S = 5.0


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


@contextlib.contextmanager
def heartbeat(store: ScheduleStore, worker: WorkerInfo,
              interval: float = HEARTBEAT_S) -> Iterator[None]:
    """Refresh ``worker``'s claims every ``interval`` seconds while the block runs (in a
    thread, so a long measurement does not make the worker look dead)."""
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
