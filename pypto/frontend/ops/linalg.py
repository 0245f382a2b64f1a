"""Cube ops: matmul / dot and conv2d (NCHW or NHWC, converted as needed)."""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from pypto.errors import (
    DTypeError,
    ShapeError,
    UnsupportedError,
)
from pypto.frontend.ops.elementwise import (
    cast,
    mul,
)
from pypto.frontend.ops.trace import (
    Scalar,
    _as_tensor,
    _record,
    op,
)
from pypto.frontend.ops.views import (
    reshape,
    transpose,
)
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes, infer

_MATMUL_OUT = {"float16": dtypes.float16, "float32": dtypes.float32, "int8": dtypes.int32}


@op
def matmul(a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False) -> Tensor:
    """Matrix product ``a @ b`` (batched over leading dims, which broadcast).

    fp16 inputs accumulate in fp32 and return fp16; int8 inputs return int32.
    """
    like = a.dtype if isinstance(a, Tensor) else _as_tensor(b, dtypes.float32, "matmul").dtype
    a, b = _as_tensor(a, like, "matmul"), _as_tensor(b, like, "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"matmul: operands must have at least 1 dim, got {list(a.shape)} and "
                         f"{list(b.shape)}; use mul for scalars")
    squeeze_a, squeeze_b = a.ndim == 1, b.ndim == 1
    if squeeze_a:
        a = reshape(a, (1, a.shape[0]))
    if squeeze_b:
        b = reshape(b, (b.shape[0], 1))
    dt = dtypes.promote(a.dtype, b.dtype)
    if dt.name not in _MATMUL_OUT:
        raise DTypeError(f"matmul: the cube takes float16, float32 or int8 operands, got "
                         f"{a.dtype.name} and {b.dtype.name}; cast to float32 first")
    a, b = cast(a, dt), cast(b, dt)
    shape = infer.matmul(a.shape, b.shape, bool(transpose_a), bool(transpose_b))
    out = _record("matmul", [a, b], {"transpose_a": bool(transpose_a),
                                     "transpose_b": bool(transpose_b)}, shape, _MATMUL_OUT[dt.name])
    if squeeze_a or squeeze_b:
        final = shape[:-2] + (() if squeeze_a else shape[-2:-1]) + (() if squeeze_b else shape[-1:])
        out = reshape(out, final)
    return out


@op
def dot(a: Any, b: Any) -> Tensor:
    """NumPy's ``dot`` for 1-D and 2-D operands (use ``matmul`` for batches)."""
    if (isinstance(a, Tensor) and a.ndim > 2) or (isinstance(b, Tensor) and b.ndim > 2):
        raise UnsupportedError("dot of tensors with more than 2 dims is not supported; use "
                               "pypto.matmul (batched) instead")
    if isinstance(a, Scalar) or isinstance(b, Scalar):
        return mul(a, b)
    return matmul(a, b)


def _pair(name: str, v: Any) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return (int(v), int(v))
    if isinstance(v, (tuple, list)) and len(v) == 2 and all(
            isinstance(i, (int, np.integer)) and not isinstance(i, bool) for i in v):
        return (int(v[0]), int(v[1]))
    raise ShapeError(f"conv2d: {name} must be an int or a pair of ints, got {v!r}")


@op
def conv2d(x: Any, weight: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           groups: int = 1) -> Tensor:
    """2-D convolution. ``x`` is NCHW (a 4-D ``ND`` tensor counts as NCHW), NHWC or
    NC1HWC0 (``[N, C/C0, H, W, C0]``) by its ``layout``; ``weight`` is KCRS, or KRSC
    when its layout is NHWC. The result has the input's layout (NC1HWC0 results keep
    the input's C0 when it divides K, else one block of all K channels).

    The op the NPU computes is ``conv2d_nhwc``: an NHWC input times the weights as an
    ``[R*S*C, K]`` matrix gives the NHWC output ``[N, OH, OW, K]``, which is the implicit
    GEMM's ``[N*OH*OW, K]``. Other layouts are views of these (transposes, reshapes);
    the partitioner turns those that are not plain strided reads into copy workloads,
    which is the automatic layout conversion (its time counts). Padding reads a
    one-element zero constant. An NCHW input with KCRS weights and one group is read
    and written as it lies instead (``conv2d_nchw``: the GEMM transposed,
    ``[K, C*R*S] x im2col^T``, with no conversion at all; ``conv2d_converted`` forces
    the conversions, for comparison: ``benchmarks/layouts.py``). A grouped (or
    depthwise) convolution is one GEMM per group: the weights ``[R*S*C/groups, K]``
    hold group ``g``'s in columns ``g*K/groups ..``, and its reduction reads input
    channels ``g*C/groups ..``.

    Example:
        >>> import pypto
        >>> x = pypto.ones((1, 3, 8, 8), dtype="float16")
        >>> w = pypto.ones((4, 3, 3, 3), dtype="float16")
        >>> pypto.conv2d(x, w, padding=1).shape
        (1, 4, 8, 8)
    """
    return _conv2d(x, weight, stride, padding, dilation, groups, direct=True)


@op
def conv2d_converted(x: Any, weight: Any, stride: Any = 1, padding: Any = 0,
                     dilation: Any = 1, groups: int = 1) -> Tensor:
    """``conv2d`` that never reads NCHW directly: an NCHW input is converted to NHWC,
    the weights to ``[R*S*C, K]`` and the result back, each a copy workload (what
    ``conv2d`` did before it could read NCHW; kept for ``benchmarks/layouts.py``)."""
    return _conv2d(x, weight, stride, padding, dilation, groups, direct=False)


def direct_nchw(layout: str, weight: Tensor, groups: int) -> bool:
    """Whether ``conv2d`` reads the NCHW input and KCRS weights as they lie: with one
    group (a grouped conv's NCHW input is converted)."""
    return layout == "NCHW" and weight.layout != "NHWC" and groups == 1


def _conv2d(x: Any, weight: Any, stride: Any, padding: Any, dilation: Any, groups: int,
            direct: bool) -> Tensor:
    x = _as_tensor(x, dtypes.float16, "conv2d")
    w = _as_tensor(weight, x.dtype, "conv2d")
    layout = x.layout if x.layout in ("NHWC", "NC1HWC0") else "NCHW"
    if (x.ndim != 5 if layout == "NC1HWC0" else x.ndim != 4) or w.ndim != 4:
        raise ShapeError(f"conv2d: input and weight must be 4-D (or a 5-D NC1HWC0 input), "
                         f"got {list(x.shape)} and {list(w.shape)}")
    s, p, d = _pair("stride", stride), _pair("padding", padding), _pair("dilation", dilation)
    if builtins.min(*s, *d) < 1 or builtins.min(p) < 0:
        raise ShapeError("conv2d: stride and dilation must be >= 1 and padding >= 0")
    dt = dtypes.promote(x.dtype, w.dtype)
    if dt.name not in _MATMUL_OUT:
        raise DTypeError(f"conv2d: float16, float32 or int8 operands only, got {dt.name}")
    if direct and direct_nchw(layout, w, int(groups)):
        shape = infer.conv2d(x.shape, w.shape, s, p, d, 1)
        k, c, kr, ks = w.shape
        operands = [cast(x, dt), reshape(cast(w, dt), (k, c * kr * ks))]
        if p != (0, 0):
            from pypto.frontend.tensor import tensor

            operands.append(tensor(np.zeros(1), dtype=dt))  # what padded taps read
        return _record("conv2d_nchw", operands, {"stride": s, "padding": p, "dilation": d,
                                                 "kernel": (kr, ks)},
                       shape, _MATMUL_OUT[dt.name], "NCHW")
    if layout == "NC1HWC0":
        n, c1, h, wd, c0 = x.shape
        x_nhwc = _record("transpose", [x], {"axes": (0, 2, 3, 1, 4)}, (n, h, wd, c1, c0),
                         x.dtype, "ND")
        x_nhwc = reshape(cast(x_nhwc, dt), (n, h, wd, c1 * c0))
    elif layout == "NCHW":
        n, _, h, wd = x.shape
        x_nhwc = _record("transpose", [x], {"axes": (0, 2, 3, 1)},
                         (n, h, wd, x.shape[1]), x.dtype, "NHWC")
        x_nhwc = cast(x_nhwc, dt)
    else:
        x_nhwc = cast(x, dt)
    n, h, wd, c = x_nhwc.shape
    krsc = w.layout == "NHWC"
    kcrs_shape = (w.shape[0], w.shape[3], w.shape[1], w.shape[2]) if krsc else w.shape
    shape = infer.conv2d((n, c, h, wd), kcrs_shape, s, p, d, int(groups))
    out_dt = _MATMUL_OUT[dt.name]
    k, cg, kr, ks = kcrs_shape
    w_rsck = cast(transpose(w, (1, 2, 3, 0) if krsc else (2, 3, 1, 0)), dt)
    operands = [x_nhwc, reshape(w_rsck, (kr * ks * cg, k))]
    if p != (0, 0):
        from pypto.frontend.tensor import tensor

        operands.append(tensor(np.zeros(1), dtype=dt))  # what padded taps read
    attrs = {"stride": s, "padding": p, "dilation": d, "kernel": (kr, ks)}
    if groups != 1:  # (absent for one group: the workload keys of plain convs stay)
        attrs["groups"] = int(groups)
    y = _record("conv2d_nhwc", operands, attrs, (n, shape[2], shape[3], k), out_dt, "NHWC")
    if layout == "NHWC":
        return y
    if layout == "NCHW":
        return _record("transpose", [y], {"axes": (0, 3, 1, 2)}, shape, out_dt, "NCHW")
    k0 = x.shape[4] if k % x.shape[4] == 0 else k
    y = reshape(y, (n, shape[2], shape[3], k // k0, k0))
    return _record("transpose", [y], {"axes": (0, 3, 1, 2, 4)},
                   (n, k // k0, shape[2], shape[3], k0), out_dt, "NC1HWC0")


