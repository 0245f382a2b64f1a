"""Write a file whole or not at all: ``atomic_write`` (used by ``pypto db export``).

The text goes to a temporary file beside the destination, renamed over it when complete,
so a reader never sees half a file. The temporary file is removed when the write fails,
is interrupted (Ctrl-C, or SIGTERM, which is turned into an exit for the duration), and,
since SIGKILL leaves it behind, by the next write to the same destination once its
writer's process is gone (its process id is in its name). The file gets the mode any file
the user writes gets: the destination's own if it exists, else 0666 less the umask
(``mkstemp``'s 0600 would make an exported log unreadable to the team that shares it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import TextIO


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _prefix(path: Path) -> str:
    return f".{path.name}."


def remove_orphans(path: Path) -> list[Path]:
    """Remove the temporary files of writes to ``path`` whose process is gone; return
    them."""
    removed = []
    for tmp in path.parent.glob(f"{_prefix(path)}*.tmp"):
        pid = tmp.name[len(_prefix(path)):].split(".", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            with contextlib.suppress(OSError):
                tmp.unlink()
                removed.append(tmp)
    return removed


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit(143)`` while the block runs (main thread, default
    handler only), so that clean-up code runs."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def leave(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def atomic_write(path: Path, encoding: str = "utf-8") -> Iterator[TextIO]:
    """A text file to write, which becomes ``path`` when the block ends without error
    (see the module doc)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with _sigterm_exits():
        remove_orphans(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{_prefix(path)}{os.getpid()}.",
                                   suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding=encoding) as out:
                yield out
                out.flush()
                os.fchmod(out.fileno(), _mode_for(path))
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
