"""Reductions and normalisations: sum, max, min, mean, softmax, layernorm (float16
statistics accumulate in float32)."""

from __future__ import annotations

import math
from typing import Any

from pypto.errors import (
    ShapeError,
    UnsupportedError,
)
from pypto.frontend.ops.elementwise import (
    _scalar_op,
    add,
    cast,
    div,
    exp,
    mul,
    rsqrt,
    sub,
)
from pypto.frontend.ops.trace import (
    _as_tensor,
    _need_float,
    _record,
    op,
)
from pypto.frontend.ops.views import (
    reshape,
    transpose,
)
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes, infer


def _axes(name: str, x: Tensor, axis: Any) -> list[int]:
    if axis is None:
        return list(range(x.ndim))
    axes = list(axis) if isinstance(axis, (tuple, list)) else [axis]
    norm = [infer.normalize_axis(name, a, x.ndim) for a in axes]
    if len(set(norm)) != len(norm):
        raise ShapeError(f"{name}: repeated axis in {axis!r}")
    return sorted(norm)


def _reduce(name: str, x: Tensor, axis: Any, keepdims: bool) -> Tensor:
    x = _as_tensor(x, dtypes.float32, name)
    if x.ndim == 0:
        return x
    axes = _axes(name, x, axis)
    if name == "sum" and x.dtype == dtypes.int8:
        x = cast(x, "int32")
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keepdims \
        else tuple(d for i, d in enumerate(x.shape) if i not in axes)
    if axis is None and x.ndim > 1:
        y = reshape(x, (x.size,))
        infer.reduce(name, y.shape, 0, True)
        y = _record(name, [y], {"axis": 0, "keepdims": False}, (), y.dtype)
        return reshape(y, out_shape) if out_shape != () else y
    y = x
    for a in reversed(axes):
        shape = infer.reduce(name, y.shape, a, True)
        y = _record(name, [y], {"axis": a, "keepdims": True}, shape, y.dtype)
    return reshape(y, out_shape) if y.shape != out_shape else y


@op
def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Sum over ``axis`` (an int, a tuple, or ``None`` for all). A float16 sum
    accumulates in float32 and rounds once at the end, as NumPy's does."""
    x = _as_tensor(x, dtypes.float32, "sum")
    if x.dtype == dtypes.float16:
        return cast(_reduce("sum", cast(x, "float32"), axis, keepdims), x.dtype)
    return _reduce("sum", x, axis, keepdims)


@op
def max(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum over ``axis``."""
    return _reduce("max", x, axis, keepdims)


@op
def min(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Minimum over ``axis``."""
    return _reduce("min", x, axis, keepdims)


@op
def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis`` (integer tensors give float32)."""
    x = _as_tensor(x, dtypes.float32, "mean")
    out = x.dtype if x.dtype.is_float else dtypes.float32
    count = math.prod(x.shape[a] for a in _axes("mean", x, axis)) if x.ndim else 1
    total = _reduce("sum", _statistics_dtype(x), axis, keepdims)
    return cast(_scalar_op("mul_scalar", total, 1.0 / count), out)


def _statistics_dtype(x: Tensor) -> Tensor:
    """``x`` in the dtype sums and normalization statistics accumulate in: float32 for
    float16 and integer tensors (as Ascend kernels cast in and out), so a sum that
    passes float16's range (65504) stays finite."""
    return x if x.dtype == dtypes.float32 else cast(x, "float32")


@op
def softmax(x: Any, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    x = _as_tensor(x, dtypes.float32, "softmax")
    _need_float("exp", x.dtype)
    ax = infer.normalize_axis("softmax", axis, x.ndim)
    if ax != x.ndim - 1:
        perm = [i for i in range(x.ndim) if i != ax] + [ax]
        inverse = [perm.index(i) for i in range(x.ndim)]
        return transpose(softmax(transpose(x, perm), -1), inverse)
    if x.dtype == dtypes.float16:  # computed in float32, rounded once at the end
        return cast(softmax(cast(x, "float32"), -1), x.dtype)
    shifted = sub(x, max(x, axis=-1, keepdims=True))
    e = exp(shifted)
    return div(e, sum(e, axis=-1, keepdims=True))


@op
def layernorm(x: Any, gamma: Any = None, beta: Any = None, eps: float = 1e-5,
              axis: int = -1) -> Tensor:
    """Normalize over ``axis`` (the last by default), then scale by ``gamma`` and add
    ``beta`` if given."""
    x = _as_tensor(x, dtypes.float32, "layernorm")
    _need_float("rsqrt", x.dtype)
    if infer.normalize_axis("layernorm", axis, x.ndim) != x.ndim - 1:
        raise UnsupportedError("layernorm normalizes over the last axis; transpose the "
                               "input so the normalized axis is last")
    out = x.dtype
    x = _statistics_dtype(x)  # mean and variance in float32 (a float16 outlier of 300
    centered = sub(x, mean(x, axis=-1, keepdims=True))  # squares past float16's range)
    var = mean(mul(centered, centered), axis=-1, keepdims=True)
    y = mul(centered, rsqrt(add(var, float(eps))))
    if gamma is not None:
        y = mul(y, gamma)
    if beta is not None:
        y = add(y, beta)
    return cast(y, out)


