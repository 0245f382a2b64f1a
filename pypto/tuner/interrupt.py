"""Ctrl-C and SIGTERM during ``pypto tune``: stop soon, at a point where the bookkeeping
is whole.

Python raises ``KeyboardInterrupt`` wherever the main thread is when SIGINT arrives: in
the middle of an Optuna ``ask`` (a trial left RUNNING that no claim names), of a commit,
or of the clean-up that ends the run; SIGTERM by default ends the process with no
clean-up at all (its run row left ``running``). Under ``catch_signals`` both signals are
*deferred*: the handler notes the first one and the tuning loop stops at its next check
(``requested``), ending its run as ``interrupted``, giving back its claims and failing
its unmeasured Optuna trials on the way out. Only where stopping at once is harmless, the
measurement of a schedule and the run of the user's script (``interruptible``), does the
signal raise ``Interrupted`` there and then.

A second signal while the run is being saved is not acted on; it says so and puts the
default handlers back, so a third ends the process at once (finished trials are
committed as they are measured: even then none is lost).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A deferred SIGINT or SIGTERM raised where stopping is harmless."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


@dataclass
class _State:
    installed: bool = False
    pending: int | None = None      # the first signal's number
    allowed: int = 0                # depth of ``interruptible`` blocks
    repeats: int = 0


_STATE = _State()


def _handler(signum: int, frame: FrameType | None) -> None:
    state = _STATE
    if state.pending is None:
        state.pending = signum
        if state.allowed:
            raise Interrupted(signal.Signals(signum).name)
        return
    state.repeats += 1
    os.write(2, b"\nstill saving what was measured; signal once more to quit at once "
                b"(finished trials are in the database already)\n")
    for sig in SIGNALS:
        if signal.getsignal(sig) is _handler:
            signal.signal(sig, signal.SIG_DFL)


@contextlib.contextmanager
def catch_signals() -> Iterator[None]:
    """Defer SIGINT and SIGTERM while the block runs (see the module doc); their former
    handlers come back afterwards. Off the main thread, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a signal the process was started ignoring (``nohup``, ``&`` in a script) stays so
    old = {sig: signal.getsignal(sig) for sig in SIGNALS
           if signal.getsignal(sig) is not signal.SIG_IGN}
    _STATE.installed, _STATE.pending, _STATE.allowed, _STATE.repeats = True, None, 0, 0
    for sig in old:
        signal.signal(sig, _handler)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        _STATE.installed, _STATE.allowed = False, 0


def requested() -> str | None:
    """The name of the signal that asked the run to stop (``SIGINT``, ``SIGTERM``), if
    one did under ``catch_signals``."""
    return None if _STATE.pending is None else signal.Signals(_STATE.pending).name


def checkpoint() -> None:
    """Raise ``Interrupted`` if a signal asked to stop."""
    name = requested()
    if name is not None:
        raise Interrupted(name)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """A block a signal may end at once (a measurement, the user's script): ``Interrupted``
    is raised on entry if one came already, and inside the block when one comes."""
    if not _STATE.installed or threading.current_thread() is not threading.main_thread():
        yield
        return
    checkpoint()
    _STATE.allowed += 1
    try:
        yield
    finally:
        _STATE.allowed -= 1
