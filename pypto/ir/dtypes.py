"""The dtypes PyPTO tensors carry, and promotion between them.

The dtype codes and element sizes are also the compiled extensions': ``setup.py`` runs
this file by path (so it imports nothing from ``pypto`` at module level) to write them
into ``pypto/_constants.pxi``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    """A tensor element type: its name, NumPy equivalent and PTO assembly suffix."""

    name: str
    code: int
    suffix: str
    is_float: bool

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.name)

    @property
    def itemsize(self) -> int:
        return self.np.itemsize

    def __repr__(self) -> str:
        return f"pypto.{self.name}"

    def __str__(self) -> str:
        return self.name


float16 = DType("float16", 0, "F16", True)
float32 = DType("float32", 1, "F32", True)
int8 = DType("int8", 2, "S8", False)
int32 = DType("int32", 3, "S32", False)
bool_ = DType("bool", 4, "B8", False)  # comparison results, one byte per element

ALL: tuple[DType, ...] = (float16, float32, int8, int32, bool_)
BY_NAME = {d.name: d for d in ALL}
BY_CODE = {d.code: d for d in ALL}
BY_SUFFIX = {d.suffix: d for d in ALL}
_ALIASES = {"fp16": float16, "half": float16, "f16": float16, "fp32": float32,
            "float": float32, "f32": float32, "i8": int8, "i32": int32, "bool_": bool_}
# Promotion order for binary ops; int32 meeting float16 goes to float32 (no precision loss).
_RANK = {bool_: -1, int8: 0, int32: 1, float16: 2, float32: 3}


def as_dtype(value: object, *, what: str = "dtype") -> DType:
    """Return the ``DType`` named by ``value`` (a name, a ``DType`` or a NumPy dtype)."""
    if isinstance(value, DType):
        return value
    if value is None:
        raise _dtype_error(f"{what} is required: pass dtype= one of {', '.join(BY_NAME)}")
    name = value if isinstance(value, str) else None
    if name is None:
        try:
            name = np.dtype(value).name  # type: ignore[arg-type]
        except TypeError:
            name = repr(value)
    key = name.lower()
    if key in BY_NAME:
        return BY_NAME[key]
    if key in _ALIASES:
        return _ALIASES[key]
    raise _dtype_error(f"unknown {what} {value!r}: use one of {', '.join(BY_NAME)}")


def _dtype_error(message: str) -> Exception:
    from pypto.errors import DTypeError  # here: setup.py runs this file without pypto

    return DTypeError(message)


def promote(a: DType, b: DType) -> DType:
    """The result dtype of a binary op on ``a`` and ``b``."""
    if a == b:
        return a
    hi, lo = (a, b) if _RANK[a] >= _RANK[b] else (b, a)
    if hi == float16 and lo == int32:
        return float32
    return hi
