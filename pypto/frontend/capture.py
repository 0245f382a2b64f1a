"""Capture mode: run a user's script and collect the compiled kernels it calls.

Inside ``capture()``, every ``@pypto.kernel`` call is compiled for the NPU (so its
workloads and schedules are known) but executed with the NumPy reference, which is
cheap; the script sees real numbers and runs as usual.
"""

from __future__ import annotations

import contextlib
import runpy
import sys
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
