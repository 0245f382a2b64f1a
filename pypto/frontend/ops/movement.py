"""Data movement: ``concatenate``, ``stack``, ``split`` and ``pad``, as NumPy's.

``split`` gives views (slices: no copy inside a kernel); ``concatenate`` and ``pad``
are one data movement workload each (``pypto.ir.movement``), ``stack`` a concatenate
of reshaped views.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pypto.errors import DTypeError, KernelError, ShapeError, UnsupportedError
from pypto.frontend.ops.elementwise import _check_int_scalar, cast
from pypto.frontend.ops.trace import _const_tensor, _eager, _record, _symbolic_graph
from pypto.frontend.ops.views import getitem, reshape
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes, infer


def _tensors(name: str, tensors: Any) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise KernelError(f"{name}: pass a list or tuple of tensors, e.g. "
                          f"pypto.{name}([a, b]), got {type(tensors).__name__}")
    if not tensors:
        raise ShapeError(f"{name}: needs at least one tensor, got an empty sequence")
    out = []
    for i, t in enumerate(tensors):
        if isinstance(t, np.ndarray):
            like = next((u.dtype for u in tensors if isinstance(u, Tensor)), dtypes.float32)
            t = _const_tensor(t, like)
        if not isinstance(t, Tensor):
            raise KernelError(f"{name}: item {i} is a {type(t).__name__}, not a PyPTO tensor")
        out.append(t)
    return out


def _variadic(fn: Any, tensors: list[Tensor], **kwargs: Any) -> Tensor:
    """Trace ``fn(*tensors, **kwargs)``, or run it eagerly as a small cached kernel."""
    if _symbolic_graph(tuple(tensors)) is not None:
        return fn(*tensors, **kwargs)
    return _eager(fn, tuple(tensors), kwargs)


def concatenate(tensors: Sequence[Any], axis: int | None = 0) -> Tensor:
    """Join tensors along an existing ``axis`` (``None``: flattened first), as
    ``np.concatenate``; dtypes promote as NumPy's do.

    Example:
        >>> import numpy as np, pypto
        >>> a = pypto.tensor(np.ones((2, 2)), dtype="float32")
        >>> pypto.concatenate([a, a * 2], axis=1).shape
        (2, 4)
    """
    ts = _tensors("concatenate", tensors)
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))):
        raise ShapeError(f"concatenate: axis must be an int or None, got {axis!r}")
    return _variadic(_concatenate, ts, axis=None if axis is None else int(axis))


def _concatenate(*ts: Tensor, axis: int | None) -> Tensor:
    if axis is None:
        ts = tuple(reshape(t, (t.size,)) for t in ts)
        axis = 0
    first = ts[0]
    if first.ndim == 0:
        raise ShapeError("concatenate: zero-dimensional tensors cannot be concatenated; "
                         "reshape them to 1-D first")
    for i, t in enumerate(ts):
        if t.ndim != first.ndim:
            raise ShapeError(f"concatenate: all tensors must have the same number of "
                             f"dimensions; tensor 0 has {first.ndim}, tensor {i} has {t.ndim}")
    ax = infer.normalize_axis("concatenate", axis, first.ndim)
    for i, t in enumerate(ts):
        for d in range(first.ndim):
            if d != ax and t.shape[d] != first.shape[d]:
                raise ShapeError(f"concatenate: tensor {i} has shape {list(t.shape)} but "
                                 f"tensor 0 has {list(first.shape)}: all sizes but axis "
                                 f"{ax}'s must match (axis {d}: {t.shape[d]} vs "
                                 f"{first.shape[d]})")
    dt = ts[0].dtype
    for t in ts[1:]:
        dt = dtypes.promote(dt, t.dtype)
    parts = [cast(t, dt) for t in ts if t.shape[ax] > 0]
    shape = first.shape[:ax] + (builtins.sum(t.shape[ax] for t in ts),) + first.shape[ax + 1:]
    if not parts:
        parts = [cast(ts[0], dt)]
    if len(parts) == 1:
        return parts[0]
    layouts = {t.layout for t in parts}
    layout = layouts.pop() if len(layouts) == 1 else "ND"
    return _record("concatenate", parts, {"axis": ax}, shape, dt, layout)


def stack(tensors: Sequence[Any], axis: int = 0) -> Tensor:
    """Join tensors of one shape along a new ``axis``, as ``np.stack``.

    Example:
        >>> import numpy as np, pypto
        >>> a = pypto.tensor(np.ones((2, 3)), dtype="float32")
        >>> pypto.stack([a, a, a], axis=1).shape
        (2, 3, 3)
    """
    ts = _tensors("stack", tensors)
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise ShapeError(f"stack: axis must be an int, got {axis!r}")
    for i, t in enumerate(ts):
        if t.shape != ts[0].shape:
            raise ShapeError(f"stack: all tensors must have the same shape; tensor 0 has "
                             f"{list(ts[0].shape)}, tensor {i} has {list(t.shape)}")
    ax = infer.normalize_axis("stack", int(axis), ts[0].ndim + 1)
    return _variadic(_stack, ts, axis=ax)


def _stack(*ts: Tensor, axis: int) -> Tensor:
    shape = ts[0].shape[:axis] + (1,) + ts[0].shape[axis:]
    return _concatenate(*(reshape(t, shape) for t in ts), axis=axis)


def split(x: Tensor, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """Split ``x`` along ``axis`` into equal sections (an int that divides the axis) or
    at the given indices, as ``np.split``: views, no copy inside a kernel.

    Example:
        >>> import numpy as np, pypto
        >>> x = pypto.tensor(np.arange(6.0), dtype="float32")
        >>> [t.shape for t in pypto.split(x, [1, 4])]
        [(1,), (3,), (2,)]
    """
    if not isinstance(x, Tensor):
        raise KernelError(f"split: expected a PyPTO tensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ShapeError("split: a zero-dimensional tensor cannot be split")
    ax = infer.normalize_axis("split", axis, x.ndim)
    size = x.shape[ax]
    if isinstance(indices_or_sections, (int, np.integer)) and \
            not isinstance(indices_or_sections, bool):
        n = int(indices_or_sections)
        if n <= 0:
            raise ShapeError(f"split: the number of sections must be >= 1, got {n}")
        if size % n:
            raise ShapeError(f"split: axis {ax} of size {size} does not divide into {n} equal "
                             "sections; pass the split indices instead")
        bounds = [i * (size // n) for i in range(n + 1)]
    else:
        try:
            cuts = [int(i) for i in indices_or_sections]
        except (TypeError, ValueError):
            raise ShapeError("split: indices_or_sections must be an int or a sequence of "
                             f"ints, got {indices_or_sections!r}") from None
        bounds = [0, *cuts, size]
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        index = [slice(None)] * x.ndim
        index[ax] = slice(lo, hi)
        out.append(getitem(x, tuple(index)))
    return out


def _pad_width(pad_width: Any, ndim: int) -> tuple[tuple[int, int], ...]:
    arr = np.asarray(pad_width)
    if arr.dtype.kind not in "iu" and not (arr.dtype.kind == "f" and arr.size and
                                           np.all(arr == np.round(arr))):
        raise ShapeError(f"pad: pad_width must be ints, got {pad_width!r}")
    try:
        widths = np.broadcast_to(arr.astype(np.int64), (ndim, 2))
    except ValueError:
        raise ShapeError(f"pad: pad_width {pad_width!r} does not fit a {ndim}-D tensor: give "
                         f"an int, a (before, after) pair or {ndim} pairs") from None
    for axis, (before, after) in enumerate(widths):
        if before < 0 or after < 0:
            raise ShapeError(f"pad: pad widths must be >= 0, got ({before}, {after}) for "
                             f"axis {axis}; slice the tensor to remove elements")
    return tuple((int(b), int(a)) for b, a in widths)


def pad(x: Tensor, pad_width: Any, mode: str = "constant", constant_values: Any = 0) -> Tensor:
    """``x`` with ``pad_width`` elements of ``constant_values`` added before and after
    each axis, as ``np.pad`` in mode ``'constant'`` (an int, a ``(before, after)`` pair,
    or one pair per axis).

    Example:
        >>> import numpy as np, pypto
        >>> x = pypto.tensor(np.ones((2, 3)), dtype="float32")
        >>> pypto.pad(x, ((1, 1), (0, 2))).shape
        (4, 5)
    """
    if not isinstance(x, Tensor):
        raise KernelError(f"pad: expected a PyPTO tensor, got {type(x).__name__}")
    if mode != "constant":
        raise UnsupportedError(f"pad: mode {mode!r} is not supported; only 'constant'")
    if x.ndim == 0:
        raise ShapeError("pad: a zero-dimensional tensor cannot be padded")
    pads = _pad_width(pad_width, x.ndim)
    value = constant_values
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise DTypeError(f"pad: constant_values must be one number, got {value!r}")
    if not x.dtype.is_float:
        if not math.isfinite(float(value)):
            raise DTypeError(f"pad: constant_values {value!r} does not fit {x.dtype.name}")
        value = int(value)  # NumPy converts the value to the array's dtype (truncating)
        _check_int_scalar(value, x.dtype)
    if all(p == (0, 0) for p in pads):
        return x
    return _variadic(_pad, [x], pads=pads, value=float(value))


def _pad(x: Tensor, *, pads: tuple[tuple[int, int], ...], value: float) -> Tensor:
    shape = tuple(d + b + a for d, (b, a) in zip(x.shape, pads))
    return _record("pad", [x], {"pads": pads, "value": value}, shape, x.dtype, x.layout)
