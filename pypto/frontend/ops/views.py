"""Views: transpose, reshape, broadcast_to and basic indexing."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from pypto.errors import (
    ShapeError,
    UnsupportedError,
)
from pypto.frontend.ops.trace import (
    _as_tensor,
    _record,
    op,
)
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes, infer


@op
def transpose(x: Any, axes: Any = None) -> Tensor:
    """Permute the axes (reverse them when ``axes`` is None)."""
    x = _as_tensor(x, dtypes.float32, "transpose")
    axes_t = None if axes is None else tuple(int(a) for a in axes)
    shape = infer.transpose(x.shape, axes_t)
    perm = tuple(reversed(range(x.ndim))) if axes_t is None else tuple(a % x.ndim
                                                                        for a in axes_t)
    if perm == tuple(range(x.ndim)):
        return x
    return _record("transpose", [x], {"axes": perm}, shape, x.dtype)


@op
def reshape(x: Any, shape: Any) -> Tensor:
    """The same elements (in row-major order) with a new shape; one dim may be -1."""
    x = _as_tensor(x, dtypes.float32, "reshape")
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    new = infer.reshape(x.shape, tuple(int(s) for s in shape))
    if new == x.shape:
        return x
    return _record("reshape", [x], {"shape": new}, new, x.dtype)


@op
def broadcast_to(x: Any, shape: Any) -> Tensor:
    """``x`` repeated along size-1 (or missing) leading axes to ``shape``."""
    x = _as_tensor(x, dtypes.float32, "broadcast_to")
    shape = tuple(int(s) for s in shape)
    if infer.broadcast("broadcast_to", x.shape, shape) != shape:
        raise ShapeError(f"broadcast_to: cannot broadcast {list(x.shape)} to {list(shape)}")
    if shape == x.shape:
        return x
    return _record("broadcast_to", [x], {"shape": shape}, shape, x.dtype)


def getitem(x: Tensor, index: Any) -> Tensor:
    """Basic indexing: ints, slices (steps of either sign: ``x[::-1]`` reverses, ``x[::2]``
    strides), ``...`` and ``None``.

    Inside a kernel this is a view (no copy); on a concrete tensor it slices the host data.
    """
    if not x.is_symbolic:
        from pypto.frontend.tensor import tensor

        try:
            return tensor(x._data[index], dtype=x.dtype)  # type: ignore[index]
        except IndexError as exc:
            raise ShapeError(f"bad index {index!r} for shape {list(x.shape)}: {exc}") from None
    index = index if isinstance(index, tuple) else (index,)
    if builtins.sum(1 for i in index if i is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    n_real = builtins.sum(1 for i in index if i is not None and i is not Ellipsis)
    if n_real > x.ndim:
        raise ShapeError(f"too many indices ({n_real}) for a {x.ndim}-D tensor")
    expanded: list[Any] = []
    for i in index:
        if i is Ellipsis:
            expanded += [slice(None)] * (x.ndim - n_real)
        else:
            expanded.append(i)
    if Ellipsis not in index:
        expanded += [slice(None)] * (x.ndim - n_real)
    begin, end, step, out_shape = [], [], [], []
    dim = 0
    for i in expanded:
        if i is None:
            out_shape.append(1)
            continue
        size = x.shape[dim]
        if isinstance(i, (int, np.integer)) and not isinstance(i, bool):
            k = int(i)
            if not -size <= k < size:
                raise ShapeError(f"index {k} is out of bounds for axis {dim} with size {size}")
            k %= size
            begin.append(k), end.append(k + 1), step.append(1)
        elif isinstance(i, slice):
            if i.step is not None and not isinstance(i.step, (int, np.integer)):
                raise ShapeError(f"slice step {i.step!r} must be an int")
            if i.step == 0:
                raise ShapeError(f"slice step cannot be zero (axis {dim}); use a positive "
                                 "step, or a negative one to reverse")
            b, e, s = i.indices(size)
            n = len(range(b, e, s))
            begin.append(b), end.append(b + n * s if n else b), step.append(s)
            out_shape.append(n)
        else:
            raise UnsupportedError(f"unsupported index {i!r}: use ints, slices, '...' or "
                                   "None (no advanced/boolean indexing)")
        dim += 1
    sliced_shape = tuple(len(range(b, e, s)) for b, e, s in zip(begin, end, step))
    y = x
    if sliced_shape != x.shape or any(st != 1 for st in step):
        y = _record("slice", [x], {"begin": tuple(begin), "end": tuple(end),
                                   "step": tuple(step)}, sliced_shape, x.dtype)
    return reshape(y, tuple(out_shape))
