"""More elementwise math: ``power`` (``**``), ``clip`` and ``erf``.

None of them is a vector instruction: each is composed here from the instructions the
vector unit has (mul, exp, ln, recip, max/min with an immediate, compare, select), so
the partitioner fuses it into one vector chain like any other elementwise ops, and its
cost is what those instructions cost on the target (``[vector.op_cycles]``). Float16
inputs are computed in float32 and rounded once at the end, as ``softmax`` is.
"""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from pypto.errors import DTypeError, KernelError, ShapeError
from pypto.frontend.ops.elementwise import (
    _scalar_op,
    abs,
    add,
    cast,
    equal,
    exp,
    less,
    log,
    maximum,
    minimum,
    mul,
    neg,
    reciprocal,
    rsqrt,
    sqrt,
    where,
)
from pypto.frontend.ops.trace import Scalar, _as_tensor, op
from pypto.frontend.ops.views import broadcast_to
from pypto.frontend.tensor import Tensor, full
from pypto.ir import dtypes

#: Integer exponents up to this size are computed by repeated squaring (a few ulp);
#: larger ones as ``exp(p * ln|x|)`` with the sign of an odd power restored.
MAX_SQUARING_EXPONENT = 64

# Abramowitz & Stegun, Handbook of Mathematical Functions (1964), formula 7.1.26:
# erf(x) = 1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) exp(-x^2), t = 1 / (1 + p x),
# for x >= 0 (odd symmetry for x < 0); |error| <= 1.5e-7 in exact arithmetic.
ERF_P = 0.3275911
ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
#: The absolute error bound of ``erf`` in float32 that the tests check: the formula's
#: 1.5e-7 plus float32 rounding of its 22 steps (mostly the cancellation in ``1 - ...``
#: near 0). Measured: 5.34e-7 at x = -0.0475, the largest over 202,002 points in [-6, 6].
ERF_ABS_ERROR = 6e-7


def _float_compute(x: Tensor) -> tuple[Tensor, Any]:
    """``x`` in the dtype the op computes in (float32 for float16 and integers) and the
    dtype the result is rounded to."""
    out = x.dtype if x.dtype.is_float else dtypes.float32
    return (x if x.dtype == dtypes.float32 else cast(x, "float32")), out


def _finish(y: Tensor, out: Any) -> Tensor:
    return y if y.dtype == out else cast(y, out)


def _ones_like(x: Tensor) -> Tensor:
    return broadcast_to(full((1,), 1, dtype=x.dtype), x.shape)


def _integer_power(x: Tensor, p: int) -> Tensor:
    """``x ** p`` for ``0 < p`` by repeated squaring (``x`` in its compute dtype)."""
    result: Tensor | None = None
    base = x
    while p:
        if p & 1:
            result = base if result is None else mul(result, base)
        p >>= 1
        if p:
            base = mul(base, base)
    assert result is not None
    return result


def _odd_sign(x: Tensor, ax: Tensor, magnitude: Tensor) -> Tensor:
    """``magnitude`` negated where ``x`` is negative (the sign of an odd power).
    ``x < |x|`` says so; comparing with ``ax`` (a value of the chain, where ``0.0`` would
    be a new one-element input) keeps the whole computation in one vector chain."""
    return where(less(x, ax), neg(magnitude), magnitude)


def _power_scalar(x: Tensor, p: float | int) -> Tensor:
    if not x.dtype.is_float:
        if isinstance(p, (int, np.integer)):
            if p < 0:
                raise ShapeError(f"power: integers to negative integer powers are not "
                                 f"allowed (exponent {p} on an {x.dtype.name} tensor), as in "
                                 "NumPy; cast the tensor first, e.g. x.astype('float32')")
            return _ones_like(x) if p == 0 else _integer_power(x, int(p))
        x = cast(x, "float32")
    p = float(p)
    if math.isnan(p):
        raise DTypeError("power: the exponent is NaN; pass a number")
    xc, out = _float_compute(x)
    if p == 0.0:  # NumPy: x ** 0 == 1 for every x, NaN included
        return _ones_like(x)
    if p == 1.0:
        return x
    if p == 0.5:
        return _finish(sqrt(xc), out)
    if p == -0.5:
        return _finish(rsqrt(xc), out)
    if p.is_integer() and int(builtins.abs(p)) <= MAX_SQUARING_EXPONENT:
        y = _integer_power(xc, int(builtins.abs(p)))
        return _finish(reciprocal(y) if p < 0 else y, out)
    if p.is_integer():
        ax = abs(xc)
        magnitude = exp(_scalar_op("mul_scalar", log(ax), p))
        return _finish(_odd_sign(xc, ax, magnitude) if int(p) % 2 else magnitude, out)
    return _finish(exp(_scalar_op("mul_scalar", log(xc), p)), out)


def _power_tensor(x: Tensor, y: Tensor) -> Tensor:
    """``x ** y`` elementwise as ``exp(y ln|x|)``. A negative base gives a real result
    only for an integer-valued exponent (negated when it is odd), NaN otherwise; ``0 **
    0`` is 1, as in NumPy. An exponent is integer-valued when the NPU's float -> int32
    conversion (truncation, saturating) gives it back, so exponents past 2**31 on a
    negative base give NaN where NumPy gives inf or 0."""
    dt = dtypes.promote(x.dtype, y.dtype)
    if not dt.is_float:
        raise DTypeError(f"power: a tensor exponent needs float tensors, got {x.dtype.name} "
                         f"** {y.dtype.name}; cast first, e.g. x.astype('float32')")
    xc, out = _float_compute(cast(x, dt))
    yc, _ = _float_compute(cast(y, dt))
    # Every op below has an operand computed in the chain (an op on the inputs alone
    # would start a vector workload of its own): x enters as x + 0.
    truncated = cast(cast(yc, "int32"), "float32")
    zero = _scalar_op("mul_scalar", truncated, 0.0)  # finite: 0 exactly
    half = cast(cast(_scalar_op("mul_scalar", truncated, 0.5), "int32"), "float32")
    odd = add(truncated, _scalar_op("mul_scalar", half, -2.0))  # 0 or +-1 (integer y)
    xz = add(xc, zero)
    ax = abs(xz)
    magnitude = exp(mul(yc, log(ax)))
    signed = where(equal(odd, 0.0), magnitude, neg(magnitude))
    nan = broadcast_to(full((1,), np.nan, dtype="float32"), magnitude.shape)
    result = where(less(xz, ax), where(equal(truncated, yc), signed, nan), magnitude)
    ones = broadcast_to(full((1,), 1.0, dtype="float32"), result.shape)
    return _finish(where(equal(yc, zero), ones, result), out)


@op
def power(x: Any, exponent: Any) -> Tensor:
    """``x ** exponent`` elementwise, with NumPy broadcasting.

    A Python-number exponent picks the cheapest exact form: ``0`` gives ones, ``0.5``
    ``sqrt``, ``-0.5`` ``rsqrt``, an integer up to 64 repeated squaring (negative: its
    reciprocal), anything else ``exp(p * ln x)`` (a negative base gives NaN for a
    non-integer ``p``, as in NumPy). Integer tensors take non-negative integer exponents.

    Example:
        >>> import numpy as np, pypto
        >>> x = pypto.tensor(np.array([1.0, 2.0, 3.0]), dtype="float32")
        >>> (x ** 2).numpy().tolist()
        [1.0, 4.0, 9.0]
    """
    if isinstance(x, Scalar) and isinstance(exponent, Scalar):
        raise KernelError("power: at least one operand must be a PyPTO tensor")
    if isinstance(exponent, bool) or isinstance(x, bool):
        raise DTypeError("power: bool operands are not supported; pass numbers")
    if isinstance(exponent, Scalar):
        return _power_scalar(_as_tensor(x, dtypes.float32, "power"), exponent)
    y = _as_tensor(exponent, dtypes.float32, "power")
    if isinstance(x, Scalar) and not isinstance(x, bool) and x > 0 and y.dtype.is_float:
        if x == 1:
            return _ones_like(y)  # NumPy: 1 ** nan == 1
        yc, out = _float_compute(y)  # b ** y = exp(y ln b) for b > 0
        return _finish(exp(_scalar_op("mul_scalar", yc, math.log(float(x)))), out)
    if isinstance(x, Scalar):
        x = full((1,), float(x), dtype=y.dtype if y.dtype.is_float else "float32")
    return _power_tensor(_as_tensor(x, y.dtype, "power"), y)


@op
def clip(x: Any, a_min: Any = None, a_max: Any = None) -> Tensor:
    """``minimum(maximum(x, a_min), a_max)`` as NumPy's ``clip`` (bounds are numbers or
    tensors that broadcast; one may be None; where ``a_min > a_max`` the result is
    ``a_max``).

    Example:
        >>> import numpy as np, pypto
        >>> x = pypto.tensor(np.array([-2.0, 0.5, 3.0]), dtype="float32")
        >>> pypto.clip(x, 0.0, 1.0).numpy().tolist()
        [0.0, 0.5, 1.0]
    """
    x = _as_tensor(x, dtypes.float32, "clip")
    if a_min is None and a_max is None:
        raise ShapeError("clip: give a_min, a_max or both (both are None)")
    for name, bound in (("a_min", a_min), ("a_max", a_max)):
        if isinstance(bound, bool) or not (bound is None or isinstance(bound, (*Scalar, Tensor,
                                                                             np.ndarray))):
            raise DTypeError(f"clip: {name} must be a number, a tensor or None, got "
                             f"{type(bound).__name__}")
        if isinstance(bound, (float, np.floating)) and math.isnan(bound):
            raise DTypeError(f"clip: {name} is NaN; pass a number")
    y = x
    if a_min is not None:
        y = maximum(y, a_min)
    if a_max is not None:
        y = minimum(y, a_max)
    return y


@op
def erf(x: Any) -> Tensor:
    """The error function, by Abramowitz & Stegun 7.1.26 (``ERF_P``, ``ERF_A``) in
    float32: absolute error at most ``ERF_ABS_ERROR`` (6e-7) against the exact value
    (float16 results: plus half an ulp of float16). The vector unit has no erf
    instruction: this is 22 of its instructions (abs, recip, exp, 9 mul/muls, 6 adds,
    a compare, neg, cast and select for the sign), 28 full-width passes at the targets'
    ``[vector.op_cycles]``.

    Example:
        >>> import numpy as np, pypto
        >>> x = pypto.tensor(np.array([0.0, 1.0]), dtype="float32")
        >>> [round(v, 5) for v in pypto.erf(x).numpy().tolist()]
        [0.0, 0.8427]
    """
    x = _as_tensor(x, dtypes.float32, "erf")
    if not x.dtype.is_float:
        raise DTypeError(f"erf needs a float tensor, got {x.dtype.name}; cast first, e.g. "
                         "x.astype('float32')")
    xc, out = _float_compute(x)
    ax = abs(xc)
    t = reciprocal(_scalar_op("add_scalar", _scalar_op("mul_scalar", ax, ERF_P), 1.0))
    # -(a1 t + ... + a5 t^5) by Horner with negated coefficients, so 1 - poly * gauss
    # is one multiply-add
    poly = _scalar_op("add_scalar", _scalar_op("mul_scalar", t, -ERF_A[4]), -ERF_A[3])
    for a in reversed(ERF_A[:3]):
        poly = _scalar_op("add_scalar", mul(poly, t), -a)
    poly = mul(poly, t)
    gauss = exp(_scalar_op("mul_scalar", mul(ax, ax), -1.0))
    y = _scalar_op("add_scalar", mul(poly, gauss), 1.0)
    return _finish(_odd_sign(xc, ax, y), out)
