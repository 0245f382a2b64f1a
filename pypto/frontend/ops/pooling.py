"""2-D pooling on the vector unit: ``max_pool2d`` and ``avg_pool2d`` over NHWC, NCHW
(a 4-D ``ND`` tensor counts as NCHW, as in ``conv2d``) or NC1HWC0 tensors.

A pooling window of ``kh x kw`` taps is ``kh * kw`` strided views of the input (padded
first, by one data movement workload, when ``padding`` is given): tap ``(i, j)`` reads
rows ``i, i + sh, ...`` and columns ``j, j + sw, ...``. The taps are combined by
elementwise ``maximum`` (or ``add``), so the whole window is one fused vector chain
whose loads are those views: no im2col buffer, and each output element is computed
once. Average pooling sums in float32.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pypto.errors import DTypeError, LayoutError, ShapeError
from pypto.frontend.ops.elementwise import _scalar_op, add, cast, div, less, maximum
from pypto.frontend.ops.movement import pad
from pypto.frontend.ops.trace import _as_tensor, _record, op
from pypto.frontend.tensor import Tensor, tensor
from pypto.ir import dtypes

# the H and W axes of each layout a pooled tensor may have
_SPATIAL = {"NHWC": (1, 2), "NCHW": (2, 3), "ND": (2, 3), "NC1HWC0": (2, 3)}


def _pair(op_name: str, name: str, v: Any, low: int) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        pair = (int(v), int(v))
    elif isinstance(v, (tuple, list)) and len(v) == 2 and all(
            isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in v):
        pair = (int(v[0]), int(v[1]))
    else:
        raise ShapeError(f"{op_name}: {name} must be an int or a pair of ints, got {v!r}")
    if min(pair) < low:
        raise ShapeError(f"{op_name}: {name} must be >= {low}, got {v!r}")
    return pair


def _windows(op_name: str, x: Tensor, kernel_size: Any, stride: Any, padding: Any
             ) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int],
                        tuple[int, int]]:
    """(H and W axes, kernel, stride, padding, output H and W), checked."""
    if x.layout not in _SPATIAL or (x.layout == "ND" and x.ndim != 4):
        raise LayoutError(f"{op_name}: the input must be a 4-D NCHW or NHWC tensor (or "
                          f"NC1HWC0), got a {x.ndim}-D tensor of layout {x.layout!r}")
    axes = _SPATIAL[x.layout]
    kernel = _pair(op_name, "kernel_size", kernel_size, 1)
    strides = kernel if stride is None else _pair(op_name, "stride", stride, 1)
    pads = _pair(op_name, "padding", padding, 0)
    for p, k in zip(pads, kernel):
        if 2 * p > k:  # every window then holds an element of the input, as PyTorch asks
            raise ShapeError(f"{op_name}: padding {padding!r} must be at most half the "
                             f"kernel size {kernel_size!r}")
    out = tuple((x.shape[a] + 2 * p - k) // s + 1
                for a, p, k, s in zip(axes, pads, kernel, strides))
    if min(out) <= 0:
        raise ShapeError(f"{op_name}: a {kernel[0]}x{kernel[1]} window does not fit the "
                         f"{x.shape[axes[0]]}x{x.shape[axes[1]]} input with padding {pads}")
    return axes, kernel, strides, pads, out  # type: ignore[return-value]


def _taps(x: Tensor, axes: tuple[int, int], kernel: tuple[int, int],
          strides: tuple[int, int], out: tuple[int, int]) -> list[Tensor]:
    """The ``kh * kw`` strided views of ``x`` (already padded), one per window tap, in
    ``x``'s layout."""
    taps = []
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            begin, end, step = [0] * x.ndim, list(x.shape), [1] * x.ndim
            for a, first, s, n in zip(axes, (i, j), strides, out):
                begin[a], step[a], end[a] = first, s, first + (n - 1) * s + 1
            shape = tuple(len(range(b, e, s)) for b, e, s in zip(begin, end, step))
            taps.append(_record("slice", [x], {"begin": tuple(begin), "end": tuple(end),
                                               "step": tuple(step)}, shape, x.dtype, x.layout))
    return taps


def _padded(x: Tensor, axes: tuple[int, int], pads: tuple[int, int], value: float) -> Tensor:
    widths = [(0, 0)] * x.ndim
    for a, p in zip(axes, pads):
        widths[a] = (p, p)
    return pad(x, tuple(widths), constant_values=value)


@op
def max_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> Tensor:
    """The maximum over each ``kernel_size`` window, moved by ``stride`` (default: the
    kernel size), the input padded by ``padding`` on each side with -inf. The layout of
    ``x`` says which axes are H and W (NHWC, NCHW, NC1HWC0); the result keeps it.

    Example:
        >>> import numpy as np, pypto
        >>> x = pypto.tensor(np.arange(16.0).reshape(1, 4, 4, 1), dtype="float32",
        ...                  layout="NHWC")
        >>> pypto.max_pool2d(x, 2).numpy().reshape(2, 2).tolist()
        [[5.0, 7.0], [13.0, 15.0]]
    """
    x = _as_tensor(x, dtypes.float32, "max_pool2d")
    axes, kernel, strides, pads, out = _windows("max_pool2d", x, kernel_size, stride, padding)
    if any(pads):
        lowest = float("-inf") if x.dtype.is_float else float(np.iinfo(x.dtype.np).min)
        x = _padded(x, axes, pads, lowest)
    taps = _taps(x, axes, kernel, strides, out)
    y = taps[0]
    for t in taps[1:]:
        y = maximum(y, t)
    return y


@op
def avg_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
               count_include_pad: bool = True) -> Tensor:
    """The mean over each ``kernel_size`` window (as ``max_pool2d``'s), summed in
    float32. With ``count_include_pad`` (the default, as PyTorch's) a window divides by
    its full size; without, by the input elements it covers.

    Example:
        >>> import numpy as np, pypto
        >>> x = pypto.tensor(np.arange(16.0).reshape(1, 1, 4, 4), dtype="float32")
        >>> pypto.avg_pool2d(x, 2).numpy().reshape(2, 2).tolist()
        [[2.5, 4.5], [10.5, 12.5]]
    """
    x = _as_tensor(x, dtypes.float32, "avg_pool2d")
    if not x.dtype.is_float:
        raise DTypeError(f"avg_pool2d needs a float tensor, got {x.dtype.name}; cast first, "
                         "e.g. x.astype('float32')")
    axes, kernel, strides, pads, out = _windows("avg_pool2d", x, kernel_size, stride, padding)
    result_dtype = x.dtype
    if any(pads):
        x = _padded(x, axes, pads, 0.0)
    taps = _taps(x, axes, kernel, strides, out)
    total = cast(taps[0], "float32")
    if x.dtype != dtypes.float32 and len(taps) > 1:
        # A cast of a tap alone would start a vector workload of its own (its operand is
        # a view of a tensor no chain computes); maximum(tap, -inf), with -inf computed
        # in the chain, is the tap exactly and keeps every cast in one chain.
        never = less(total, total)  # false everywhere, NaN included
        minus_inf = _scalar_op("add_scalar", cast(never, x.dtype), float("-inf"))
        taps = [taps[0], *(maximum(t, minus_inf) for t in taps[1:])]
    for t in taps[1:]:
        total = add(total, cast(t, "float32"))
    if count_include_pad or not any(pads):
        mean = _scalar_op("mul_scalar", total, 1.0 / (kernel[0] * kernel[1]))
    else:
        mean = div(total, _counts(x.shape, axes, kernel, strides, pads, out))
    return mean if mean.dtype == result_dtype else cast(mean, result_dtype)


def _counts(padded_shape: tuple[int, ...], axes: tuple[int, int], kernel: tuple[int, int],
            strides: tuple[int, int], pads: tuple[int, int], out: tuple[int, int]) -> Tensor:
    """How many input (not padding) elements each window covers: a float32 constant
    that broadcasts over the other axes."""
    per_axis = []
    for a, k, s, p, n in zip(axes, kernel, strides, pads, out):
        size = padded_shape[a] - 2 * p
        starts = np.arange(n) * s - p
        per_axis.append(np.minimum(starts + k, size) - np.maximum(starts, 0))
    shape = [1] * len(padded_shape)
    shape[axes[0]], shape[axes[1]] = out
    counts = np.outer(per_axis[0], per_axis[1]).reshape(shape)
    return tensor(counts, dtype="float32")
