"""Capture mode: run a user's script and collect the compiled kernels it calls.

Inside ``capture()``, every ``@pypto.kernel`` call is compiled for the NPU (so its
workloads and schedules are known) but executed with the NumPy reference, which is
cheap; the script sees real numbers and runs as usual.
"""

from __future__ import annotations

import contextlib
import linecache
import runpy
import signal
import sys
import threading
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pypto.compile import listeners
from pypto.errors import PyptoError

if TYPE_CHECKING:
    from pypto.compile.compiled import Compiled


@dataclass
class Capture:
    """A call listener that collects the compiled kernels and keeps them off the device."""

    calls: list[Compiled] = field(default_factory=list)
    runs_on_device = False

    def kernel_called(self, compiled: Compiled) -> None:
        self.calls.append(compiled)

    def unique(self) -> list[Compiled]:
        """Compiled kernels, first call of each (kernel, signature) only."""
        seen, out = set(), []
        for c in self.calls:
            key = (c.name, tuple(wl.key for wl in c.workloads))
            if key not in seen:
                seen.add(key)
                out.append(c)
        return out


@contextlib.contextmanager
def capture() -> Iterator[Capture]:
    """Collect the kernels called inside the block (run with the NumPy reference)."""
    collected = Capture()
    listeners.subscribe(collected)
    try:
        yield collected
    finally:
        listeners.unsubscribe(collected)


class ScriptError(PyptoError):
    """A user script that could not be run: missing, unparsable, or raising."""


def run_script(path: str | Path, argv: list[str] | None = None) -> None:
    """Run ``path`` as ``__main__`` (as ``python path`` would), turning failures into
    ``ScriptError`` with one line that says what went wrong."""
    p = Path(path)
    if not p.exists():
        raise ScriptError(f"{p}: no such file")
    if p.is_dir():
        raise ScriptError(f"{p}: is a directory, not a Python file")
    try:
        compile(p.read_text(), str(p), "exec")
    except SyntaxError as exc:
        raise ScriptError(f"{p}:{exc.lineno}: does not parse: {exc.msg}") from None
    except UnicodeDecodeError:
        raise ScriptError(f"{p}: is not a UTF-8 text file") from None
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(p), *(argv or [])]
    sys.path.insert(0, str(p.resolve().parent))
    try:
        runpy.run_path(str(p), run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise ScriptError(f"{p}: exited with status {exc.code}") from None
    except PyptoError as exc:
        raise ScriptError(f"{p}: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
        tb = exc.__traceback__
        line = None
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == str(p):
                line = tb.tb_lineno
            tb = tb.tb_next
        where = f"{p}:{line}" if line else str(p)
        raise ScriptError(f"{where}: raised {type(exc).__name__}: {exc}") from None
    finally:
        sys.argv, sys.path[:] = old_argv, old_path


class _OutOfTime(BaseException):
    """Raised in a script that outlived its time limit (a BaseException, so that the
    script's own ``except Exception`` does not swallow it)."""


#: seconds past the limit after which a script stuck where no exception reaches it (a
#: long C call) has the traceback of every thread dumped and the process ended
GRACE_S = 10.0


@contextlib.contextmanager
def time_limit(seconds: float | None, path: str | Path) -> Iterator[None]:
    """Run the block (a script run by ``run_script``) for at most ``seconds``: then raise
    ``ScriptError`` saying where the script ``path`` was (its line and function, and the
    innermost call). A script stuck in C code that never returns to Python gets
    ``GRACE_S`` more, then every thread's traceback is printed and the process exits
    with status 1 (``faulthandler``), rather than hang silently. ``None``: no limit; off
    the main thread the limit cannot be delivered, so none is set either."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    import faulthandler

    def expired(signum: int, frame: types.FrameType | None) -> None:
        raise _OutOfTime

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(seconds + GRACE_S, exit=True)
    try:
        yield
    except _OutOfTime as exc:
        raise ScriptError(f"{_where(exc.__traceback__, Path(path))}: still running after "
                          f"{seconds:g} s: capture mode runs the script once to see which "
                          "kernels it calls; make it finish sooner (a smaller input, fewer "
                          "iterations) or give a larger --timeout") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        faulthandler.cancel_dump_traceback_later()
        signal.signal(signal.SIGALRM, old)


def _where(tb: types.TracebackType | None, path: Path) -> str:
    """``path:line, in function (`source`)`` of the script's innermost frame in ``tb``,
    and the innermost frame elsewhere if the script was in a call."""
    mine = inner = None
    target = str(path.resolve())
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename == __file__:        # this module's own frames
            tb = tb.tb_next
            continue
        inner = (code.co_filename, tb.tb_lineno, code.co_name)
        if str(Path(code.co_filename).resolve()) == target:
            mine = inner
        tb = tb.tb_next
    if mine is None:
        return str(path)

    def say(frame: tuple[str, int, str], name: str) -> str:
        source = linecache.getline(frame[0], frame[1]).strip()
        function = "the script's top level" if frame[2] == "<module>" else f"{frame[2]}()"
        return f"{name}:{frame[1]}, in {function}" + (f" (`{source}`)" if source else "")

    text = say(mine, str(path))
    if inner is not None and inner != mine:
        text += f", calling {say(inner, inner[0])}"
    return text
