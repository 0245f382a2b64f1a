"""PyPTO ops. Inside a kernel trace they add graph nodes; outside, they run at once on
the current device (each op becomes a small cached kernel)."""

from __future__ import annotations

import builtins
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from pypto.errors import (
    DTypeError,
    KernelError,
    ScalarOverflowError,
    ShapeError,
    UnsupportedError,
)
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes, infer
from pypto.ir.dtypes import DType
from pypto.ir.numerics import FLOAT_ONLY

Scalar = (int, float, np.integer, np.floating)


# -- tracing plumbing -------------------------------------------------------------------

def _symbolic_graph(args: tuple[Any, ...]) -> Any:
    graph = None
    for a in args:
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, Tensor) and t.is_symbolic:
                if graph is not None and t._graph is not graph:
                    raise KernelError("tensors from two different kernel traces were mixed; "
                                      "a symbolic tensor cannot escape its kernel")
                graph = t._graph
    return graph


def op(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """Make ``fn`` (which builds graph nodes) also work eagerly on concrete tensors."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if _symbolic_graph(args) is not None:
            return fn(*args, **kwargs)
        if not any(isinstance(a, Tensor) for a in args):
            raise KernelError(f"pypto.{fn.__name__}() needs at least one PyPTO tensor argument; "
                              "wrap NumPy data with pypto.tensor(data, dtype=...)")
        return _eager(wrapper, args, kwargs)

    return wrapper


_EAGER: dict[tuple, Any] = {}


def _eager(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    from pypto.frontend.kernel import Kernel

    like = next(a for a in args if isinstance(a, Tensor))
    args = tuple(_const_tensor(a, like.dtype) if isinstance(a, np.ndarray) else a for a in args)
    try:
        key = (fn, tuple(sorted(kwargs.items())))
        hash(key)
    except TypeError:
        raise KernelError(f"pypto.{fn.__name__}(): keyword arguments must be hashable "
                          "(ints, floats, strings, tuples)") from None
    kernel = _EAGER.get(key)
    if kernel is None:
        kernel = Kernel(functools.partial(fn, **kwargs), name=fn.__name__)
        _EAGER[key] = kernel
    return kernel(*args)


def _const_tensor(value: np.ndarray, like: DType) -> Tensor:
    arr = np.asarray(value)
    if arr.dtype.name in dtypes.BY_NAME:
        dt = dtypes.BY_NAME[arr.dtype.name]
    elif arr.dtype.kind in "biuf":
        dt = like  # NumPy's default float64/int64 take the tensor's dtype, as weak types
    else:
        raise DTypeError(f"cannot use a NumPy array of dtype {arr.dtype} as a PyPTO operand")
    from pypto.frontend.tensor import tensor

    return tensor(arr, dtype=dt)


def _node_id(graph: Any, t: Tensor) -> int:
    if t._graph is graph:
        return t._node  # type: ignore[return-value]
    if t._data is None:
        raise KernelError("a symbolic tensor from another kernel trace was used")
    node = graph.add("const", (), {}, t.shape, t.dtype, t.layout)
    graph.consts[node.id] = t._data
    return node.id


def _record(op_name: str, inputs: list[Tensor], attrs: dict[str, Any],
            shape: tuple[int, ...], dtype: DType, layout: str = "ND") -> Tensor:
    graph = _symbolic_graph(tuple(inputs))
    if graph.sealed:
        raise KernelError("a symbolic tensor escaped its kernel trace and was used afterwards; "
                          "return it from the kernel to get a concrete tensor")
    ids = tuple(_node_id(graph, t) for t in inputs)
    layout = "ND" if layout == "NZ" else layout  # results are stored row-major
    node = graph.add(op_name, ids, attrs, shape, dtype, layout)
    return Tensor(node.shape, dtype, layout, graph=graph, node=node.id)


def _as_tensor(x: Any, like: DType, name: str) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return _const_tensor(x, like)
    raise KernelError(f"{name}: expected a PyPTO tensor, got {type(x).__name__}")


def _need_float(name: str, dt: DType) -> None:
    if name in FLOAT_ONLY and not dt.is_float:
        raise DTypeError(f"{name} needs a float tensor, got {dt.name}; cast first, e.g. "
                         "x.astype('float32')")


# -- elementwise ------------------------------------------------------------------------

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


# -- reductions -------------------------------------------------------------------------

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


# -- matmul and conv ----------------------------------------------------------------------

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
    one-element zero constant. Grouped and depthwise convolutions keep the NCHW
    ``conv2d`` op, which runs on the CPU reference only.

    Example:
        >>> import pypto
        >>> x = pypto.ones((1, 3, 8, 8), dtype="float16")
        >>> w = pypto.ones((4, 3, 3, 3), dtype="float16")
        >>> pypto.conv2d(x, w, padding=1).shape
        (1, 4, 8, 8)
    """
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
    k, _, kr, ks = kcrs_shape
    if groups != 1:
        xin = transpose(x_nhwc, (0, 3, 1, 2))
        wk = cast(transpose(w, (0, 3, 1, 2)) if krsc else w, dt)
        y = _record("conv2d", [xin, wk], {"stride": s, "padding": p, "dilation": d,
                                          "groups": int(groups)}, shape, out_dt, "NCHW")
        if layout == "NCHW":
            return y
        y = _record("transpose", [y], {"axes": (0, 2, 3, 1)},
                    (n, shape[2], shape[3], k), out_dt, "NHWC")
    else:
        w_rsck = cast(transpose(w, (1, 2, 3, 0) if krsc else (2, 3, 1, 0)), dt)
        operands = [x_nhwc, reshape(w_rsck, (kr * ks * c, k))]
        if p != (0, 0):
            from pypto.frontend.tensor import tensor

            operands.append(tensor(np.zeros(1), dtype=dt))  # what padded taps read
        y = _record("conv2d_nhwc", operands, {"stride": s, "padding": p, "dilation": d,
                                              "kernel": (kr, ks)},
                    (n, shape[2], shape[3], k), out_dt, "NHWC")
    if layout == "NHWC":
        return y
    if layout == "NCHW":
        return _record("transpose", [y], {"axes": (0, 3, 1, 2)}, shape, out_dt, "NCHW")
    k0 = x.shape[4] if k % x.shape[4] == 0 else k
    y = reshape(y, (n, shape[2], shape[3], k // k0, k0))
    return _record("transpose", [y], {"axes": (0, 3, 1, 2, 4)},
                   (n, k // k0, shape[2], shape[3], k0), out_dt, "NC1HWC0")


# -- views ------------------------------------------------------------------------------

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
    """Basic indexing: ints, slices with positive steps, ``...`` and ``None``.

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
            b, e, s = i.indices(size)
            if s <= 0:
                raise UnsupportedError("negative or zero slice steps are not supported; "
                                       "slice forward and reverse on the host")
            n = builtins.max(0, (e - b + s - 1) // s)
            begin.append(b), end.append(b + n * s if n else b), step.append(s)
            out_shape.append(n)
        else:
            raise UnsupportedError(f"unsupported index {i!r}: use ints, slices, '...' or "
                                   "None (no advanced/boolean indexing)")
        dim += 1
    sliced_shape = tuple((e - b + s - 1) // s if e > b else 0
                         for b, e, s in zip(begin, end, step))
    y = x
    if sliced_shape != x.shape:
        y = _record("slice", [x], {"begin": tuple(begin), "end": tuple(end),
                                   "step": tuple(step)}, sliced_shape, x.dtype)
    return reshape(y, tuple(out_shape))
