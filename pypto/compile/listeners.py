"""The listeners of kernel calls: what observes a compiled kernel as it is called.

The profiler (``pypto.Profiler``) and capture mode (``pypto tune``'s collection of a
script's workloads) subscribe here, as Triton's autotuner lets a listener see each
launch; the kernel notifies them on every call. Nothing below the observers needs to know
them. Listeners are per thread and nest (the innermost subscribed last).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pypto.compile.compiled import Compiled

_local = threading.local()


class CallListener(Protocol):
    """Sees every kernel call made on the NPU while it is subscribed."""

    #: False: the kernel is not run on the simulated NPU while this listener listens;
    #: it runs with the NumPy reference instead (capture mode only needs the workloads)
    runs_on_device: bool

    def kernel_called(self, compiled: Compiled) -> None:
        """``compiled`` is about to run."""


def subscribe(listener: CallListener) -> None:
    _stack().append(listener)


def unsubscribe(listener: CallListener) -> None:
    _stack().remove(listener)


def listeners() -> list[CallListener]:
    """The listeners of this thread, outermost first."""
    return list(_stack())


def _stack() -> list[CallListener]:
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    return stack
