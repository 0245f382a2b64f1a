"""The exception hierarchy: every user-facing error is a ``PyptoError``.

Errors name the input that was wrong and what to do about it. Subclasses also derive
from the matching built-in (``TypeError``, ``ValueError``) so ordinary ``except``
clauses keep working.
"""

from __future__ import annotations


class PyptoError(Exception):
    """Base class of every error PyPTO raises on purpose."""


class DTypeError(PyptoError, TypeError):
    """A missing or unknown dtype, or an op that does not accept a dtype."""


class ScalarOverflowError(DTypeError, OverflowError):
    """A Python scalar outside the range of an integer tensor's dtype (as NumPy 2)."""


class LayoutError(PyptoError, ValueError):
    """An unknown layout, or a layout that does not fit the tensor's rank."""


class ShapeError(PyptoError, ValueError):
    """Shapes that do not fit an op (names the op and both shapes)."""


class UnsupportedError(PyptoError, NotImplementedError):
    """An op, option or size PyPTO does not handle (yet); says what to do instead."""


class KernelError(PyptoError, TypeError):
    """A ``@pypto.kernel`` used wrongly: bad arguments or a bad return value."""


class DeviceError(PyptoError, ValueError):
    """An unknown device type or a bad device id in ``pypto.Context``."""


class TargetError(PyptoError, ValueError):
    """An unknown target, or a malformed target descriptor file (names the field)."""


class ScheduleError(PyptoError, ValueError):
    """A schedule that is not valid for its workload and target."""


class AsmError(PyptoError, ValueError):
    """PTO assembly that does not parse; carries the line and column."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None,
                 text: str | None = None) -> None:
        self.line, self.column, self.text = line, column, text
        where = ""
        if line is not None:
            where = f"line {line}" + (f", column {column}" if column is not None else "") + ": "
        detail = f"\n    {text}\n    {' ' * max((column or 1) - 1, 0)}^" if text is not None else ""
        super().__init__(f"{where}{message}{detail}")


class DatabaseError(PyptoError, RuntimeError):
    """The schedule database cannot be opened, read or written (names it and says why)."""


class LogFormatError(PyptoError, ValueError):
    """A tuning log (JSON lines) with malformed lines; ``problems`` lists (line, reason)."""

    def __init__(self, message: str, problems: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.problems = problems


class ScheduleFallbackWarning(UserWarning):
    """A kernel runs a schedule that was not tuned for its exact workload."""


class HazardWarning(UserWarning):
    """Pipes of a raw block (``pypto.inline_asm``) race: their synchronization is the
    block author's job, so PyPTO warns (naming the lines) instead of refusing it."""


class SimError(PyptoError, RuntimeError):
    """The simulated device rejected a program (bounds, capacity, alignment, flags)."""


class CostModelError(PyptoError, ValueError):
    """A cost model cannot be trained, read or used: no data, a corrupt blob, or a model
    saved for other features, another op family or another model format (retrain it)."""
