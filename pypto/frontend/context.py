"""``pypto.Context``: which device runs kernels (the simulated NPU or the CPU oracle)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from pypto.errors import DeviceError

if TYPE_CHECKING:
    from pypto.targets import Target

DEVICE_TYPES = ("npu", "cpu")
DEFAULT_TARGET = "ascend910b"
_local = threading.local()


class Context:
    """Device selection, used as a ``with`` block.

    Example:
        >>> import pypto
        >>> with pypto.Context(device_type="cpu"):
        ...     pass

    ``device_type="npu"`` runs kernels on the simulated NPU of ``target``;
    ``device_type="cpu"`` runs the same graph with the NumPy reference (the oracle).
    """

    def __init__(self, device_type: str = "npu", device_id: int = 0,
                 target: str | None = None) -> None:
        if device_type not in DEVICE_TYPES:
            raise DeviceError(f"unknown device_type {device_type!r}: use 'npu' (the simulated "
                             "NPU) or 'cpu' (the NumPy reference)")
        if not isinstance(device_id, int) or isinstance(device_id, bool) or device_id < 0:
            raise DeviceError(f"device_id must be a non-negative int, got {device_id!r}")
        self.device_type = device_type
        self.device_id = device_id
        self.target_name = target or DEFAULT_TARGET
        self._target: Target | None = None
        if target is not None:
            self.target  # noqa: B018 - validate the name now, not at the first kernel call

    @property
    def target(self) -> Target:
        if self._target is None:
            from pypto.targets import load_target

            self._target = load_target(self.target_name)
        return self._target

    def __enter__(self) -> Context:
        _stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _stack().pop()

    def __repr__(self) -> str:
        return (f"Context(device_type={self.device_type!r}, device_id={self.device_id}, "
                f"target={self.target_name!r})")


def _stack() -> list[Context]:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


_default: Context | None = None


def current_context() -> Context:
    """The innermost active ``Context``, or the default (the NPU, ``ascend910b``)."""
    global _default
    stack = _stack()
    if stack:
        return stack[-1]
    if _default is None:
        _default = Context()
    return _default
