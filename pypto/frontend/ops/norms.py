"""``rms_norm``: ``x / sqrt(mean(x**2) + eps)`` over the last axis, scaled by ``gamma``
(the statistics accumulate in float32, as ``layernorm``'s)."""

from __future__ import annotations

import math
from typing import Any

from pypto.errors import DTypeError, ShapeError, UnsupportedError
from pypto.frontend.ops.elementwise import _scalar_op, cast, mul, rsqrt
from pypto.frontend.ops.reductions import _statistics_dtype, mean
from pypto.frontend.ops.trace import _as_tensor, op
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes, infer


@op
def rms_norm(x: Any, gamma: Any = None, eps: float = 1e-6, axis: int = -1) -> Tensor:
    """Root-mean-square normalization over ``axis`` (the last), times ``gamma`` if given:
    ``x * rsqrt(mean(x * x) + eps) * gamma``. Float16 inputs are normalized in float32
    and rounded once.

    Example:
        >>> import numpy as np, pypto
        >>> x = pypto.tensor(np.array([[3.0, 4.0]]), dtype="float32")
        >>> [round(v, 4) for v in pypto.rms_norm(x, eps=0.0).numpy()[0].tolist()]
        [0.8485, 1.1314]
    """
    x = _as_tensor(x, dtypes.float32, "rms_norm")
    if not x.dtype.is_float:
        raise DTypeError(f"rms_norm needs a float tensor, got {x.dtype.name}; cast first, "
                         "e.g. x.astype('float32')")
    if x.ndim == 0:
        raise ShapeError("rms_norm: the input is a scalar (0-D); it needs an axis to "
                         "normalize over")
    if infer.normalize_axis("rms_norm", axis, x.ndim) != x.ndim - 1:
        raise UnsupportedError("rms_norm normalizes over the last axis; transpose the input "
                               "so the normalized axis is last")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not math.isfinite(eps) \
            or eps < 0:
        raise ShapeError(f"rms_norm: eps must be a finite number >= 0, got {eps!r}")
    if gamma is not None:
        g = _as_tensor(gamma, x.dtype, "rms_norm")
        try:
            fits = infer.broadcast("rms_norm", g.shape, x.shape) == x.shape
        except ShapeError:
            fits = False
        if not fits:
            raise ShapeError(f"rms_norm: gamma of shape {list(g.shape)} does not broadcast "
                             f"to the input's {list(x.shape)}")
    out = x.dtype
    xf = _statistics_dtype(x)
    ms = mean(mul(xf, xf), axis=-1, keepdims=True)
    y = mul(xf, rsqrt(_scalar_op("add_scalar", ms, float(eps))))
    if gamma is not None:
        y = mul(y, gamma)
    return cast(y, out)
