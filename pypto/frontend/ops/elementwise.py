"""Elementwise ops: arithmetic with NumPy broadcasting and weak scalars, casts,
comparisons (bool tensors) and where, unary math."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pypto.errors import (
    DTypeError,
    KernelError,
    ScalarOverflowError,
)
from pypto.frontend.ops.trace import (
    Scalar,
    _as_tensor,
    _need_float,
    _record,
    op,
)
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes, infer
from pypto.ir.dtypes import DType


@op
def cast(x: Tensor, dtype: Any) -> Tensor:
    """Convert ``x`` to ``dtype``."""
    dt = dtypes.as_dtype(dtype)
    if dt == x.dtype:
        return x
    return _record("cast", [x], {"dtype": dt.name}, x.shape, dt, x.layout)


def _unary(name: str, x: Any) -> Tensor:
    x = _as_tensor(x, dtypes.float32, name)
    _need_float(name, x.dtype)
    return _record(name, [x], {}, x.shape, x.dtype, x.layout)


def _scalar_op(name: str, x: Tensor, value: Any) -> Tensor:
    value = float(value) if isinstance(value, (float, np.floating)) else int(value)
    if isinstance(value, float) and not x.dtype.is_float:
        x = cast(x, "float32")
    elif isinstance(value, int) and not x.dtype.is_float:
        _check_int_scalar(value, x.dtype)
    return _record(name, [x], {"value": float(value)}, x.shape, x.dtype, x.layout)


def _check_int_scalar(value: int, dt: DType) -> None:
    """A Python int must fit an integer tensor's dtype, as NumPy 2 requires."""
    info = np.iinfo(dt.np)
    if not info.min <= value <= info.max:
        raise ScalarOverflowError(f"Python integer {value} is out of bounds for {dt.name} "
                                  f"({info.min}..{info.max}); cast the tensor first, e.g. "
                                  "x.astype('int32')")


def _binary(name: str, a: Any, b: Any) -> Tensor:
    a_scalar, b_scalar = isinstance(a, Scalar), isinstance(b, Scalar)
    if a_scalar and b_scalar:
        raise KernelError(f"{name}: at least one operand must be a PyPTO tensor")
    if a_scalar or b_scalar:
        t, s = (b, a) if a_scalar else (a, b)
        t = _as_tensor(t, dtypes.float32, name)
        s = float(s) if isinstance(s, (float, np.floating)) else int(s)
        if name == "add":
            return _scalar_op("add_scalar", t, s)
        if name == "mul":
            return _scalar_op("mul_scalar", t, s)
        if name == "maximum":
            return _scalar_op("max_scalar", t, s)
        if name == "minimum":
            return _scalar_op("min_scalar", t, s)
        if name == "sub":
            return _scalar_op("add_scalar", t, -s) if b_scalar else _scalar_op(
                "add_scalar", neg(t), s)
        if name == "div":
            if not t.dtype.is_float:
                raise DTypeError(f"div needs a float tensor, got {t.dtype.name}; cast first")
            if b_scalar:
                if s == 0:
                    return _record("div", [t, _full_like_const(t, 0.0)], {}, t.shape, t.dtype)
                return _scalar_op("mul_scalar", t, 1.0 / s)
            # scalar / x is a division (a reciprocal rounded to the tensor's dtype first
            # would overflow: 0.5 / 1e-5 in fp16), of a broadcast one-element constant
            return _record("div", [_full_like_const(t, float(s)), t], {}, t.shape, t.dtype,
                           t.layout)
        raise AssertionError(name)
    like = a.dtype if isinstance(a, Tensor) else b.dtype
    a, b = _as_tensor(a, like, name), _as_tensor(b, like, name)
    dt = dtypes.promote(a.dtype, b.dtype)
    _need_float(name, dt)
    a, b = cast(a, dt), cast(b, dt)
    shape = infer.broadcast(name, a.shape, b.shape)
    layout = a.layout if a.shape == shape else (b.layout if b.shape == shape else "ND")
    return _record(name, [a, b], {}, shape, dt, layout)


def _full_like_const(t: Tensor, value: float) -> Tensor:
    from pypto.frontend.tensor import full

    return full((1,), value, dtype=t.dtype)


@op
def add(a: Any, b: Any) -> Tensor:
    """``a + b`` with NumPy broadcasting."""
    return _binary("add", a, b)


@op
def sub(a: Any, b: Any) -> Tensor:
    """``a - b`` with NumPy broadcasting."""
    return _binary("sub", a, b)


@op
def mul(a: Any, b: Any) -> Tensor:
    """``a * b`` with NumPy broadcasting."""
    return _binary("mul", a, b)


@op
def div(a: Any, b: Any) -> Tensor:
    """``a / b`` with NumPy broadcasting (float tensors)."""
    return _binary("div", a, b)


@op
def maximum(a: Any, b: Any) -> Tensor:
    """Elementwise maximum."""
    return _binary("maximum", a, b)


@op
def minimum(a: Any, b: Any) -> Tensor:
    """Elementwise minimum."""
    return _binary("minimum", a, b)


# -- comparisons and selection ------------------------------------------------------------

def _scalar_dtype(x: Any, like: DType) -> DType:
    """The dtype a Python scalar takes beside a tensor of ``like`` (NumPy 2's weak
    scalars: the tensor's dtype, except a float against an integer or bool tensor)."""
    if isinstance(x, (float, np.floating)) and not like.is_float:
        return dtypes.float32
    if like == dtypes.bool_:
        return dtypes.int32
    if isinstance(x, (int, np.integer)) and not like.is_float:
        _check_int_scalar(int(x), like)
    return like


def _as(x: Any, dt: DType, name: str) -> Tensor:
    """``x`` as a tensor of ``dt``: a scalar becomes a one-element constant made on the
    host; a tensor is cast when its dtype differs."""
    if isinstance(x, Scalar):
        from pypto.frontend.tensor import full

        return full((1,), x, dtype=dt)
    t = _as_tensor(x, dt, name)
    return t if t.dtype == dt else cast(t, dt)


def _compare(name: str, a: Any, b: Any) -> Tensor:
    if isinstance(a, Scalar) and isinstance(b, Scalar):
        raise KernelError(f"{name}: at least one operand must be a PyPTO tensor")
    ta = a if isinstance(a, Tensor) else None
    tb = b if isinstance(b, Tensor) else None
    da = ta.dtype if ta is not None else None
    db = tb.dtype if tb is not None else None
    if da is None:
        da = _scalar_dtype(a, db) if isinstance(a, Scalar) else _as_tensor(a, db, name).dtype
    if db is None:
        db = _scalar_dtype(b, da) if isinstance(b, Scalar) else _as_tensor(b, da, name).dtype
    dt = dtypes.promote(da, db)
    a, b = _as(a, dt, name), _as(b, dt, name)
    shape = infer.broadcast(name, a.shape, b.shape)
    return _record(name, [a, b], {}, shape, dtypes.bool_)


def _make_compare(name: str, symbol: str) -> Callable[[Any, Any], Tensor]:
    def fn(a: Any, b: Any) -> Tensor:
        return _compare(name, a, b)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``a {symbol} b`` elementwise, with NumPy broadcasting: a bool tensor."
    return op(fn)


equal = _make_compare("equal", "==")
not_equal = _make_compare("not_equal", "!=")
less = _make_compare("less", "<")
less_equal = _make_compare("less_equal", "<=")
greater = _make_compare("greater", ">")
greater_equal = _make_compare("greater_equal", ">=")


@op
def where(condition: Any, x: Any, y: Any) -> Tensor:
    """``x`` where ``condition`` is true (nonzero), else ``y``; all three broadcast as in
    NumPy. ``x`` and ``y`` may be Python scalars.

    Example:
        >>> import numpy as np, pypto
        >>> a = pypto.tensor(np.array([-1.0, 2.0]), dtype="float32")
        >>> pypto.where(a > 0, a, 0.0).numpy().tolist()
        [0.0, 2.0]
    """
    cond = _as_tensor(condition, dtypes.bool_, "where")
    if cond.dtype != dtypes.bool_:
        cond = not_equal(cond, 0)
    if not isinstance(x, Tensor) and not isinstance(y, Tensor):
        dt = dtypes.float32 if isinstance(x, (float, np.floating)) or isinstance(
            y, (float, np.floating)) else dtypes.int32
    else:
        dx = x.dtype if isinstance(x, Tensor) else None
        dy = y.dtype if isinstance(y, Tensor) else None
        dx = dx or (_scalar_dtype(x, dy) if isinstance(x, Scalar) else dy)
        dy = dy or (_scalar_dtype(y, dx) if isinstance(y, Scalar) else dx)
        dt = dtypes.promote(dx, dy)
    xt, yt = _as(x, dt, "where"), _as(y, dt, "where")
    shape = infer.broadcast("where", infer.broadcast("where", cond.shape, xt.shape), yt.shape)
    return _record("where", [cond, xt, yt], {}, shape, dt)


def _make_unary(name: str, doc: str) -> Callable[[Any], Tensor]:
    def fn(x: Any) -> Tensor:
        return _unary(name, x)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return op(fn)


relu = _make_unary("relu", "max(x, 0).")
gelu = _make_unary("gelu", "GELU (tanh approximation).")
exp = _make_unary("exp", "e**x.")
log = _make_unary("log", "Natural logarithm.")
sqrt = _make_unary("sqrt", "Square root.")
rsqrt = _make_unary("rsqrt", "1 / sqrt(x).")
reciprocal = _make_unary("reciprocal", "1 / x.")
sigmoid = _make_unary("sigmoid", "1 / (1 + exp(-x)).")
tanh = _make_unary("tanh", "Hyperbolic tangent.")
neg = _make_unary("neg", "-x.")
abs = _make_unary("abs", "|x|.")  # noqa: A001 - NumPy's name


