"""Element math shared by the CPU reference and the simulated vector unit.

Both sides compute in ``compute_dtype`` (float32 for float tensors, int64 for integer
ones) and round to the result dtype, so a fused chain on the simulated NPU gives the
same bits as the op-by-op reference; only reductions that are split differently may
differ in the last bits.
"""

from __future__ import annotations

import numpy as np

_SQRT_2_OVER_PI = np.float32(0.7978845608028654)
_GELU_C = np.float32(0.044715)


def compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if np.dtype(dtype).kind == "f" else np.dtype(np.int64)


def _gelu(x: np.ndarray) -> np.ndarray:
    # The tanh approximation, as most NPU kernel libraries implement GELU.
    inner = _SQRT_2_OVER_PI * (x + _GELU_C * x * x * x)
    return (np.float32(0.5) * x * (np.float32(1.0) + np.tanh(inner))).astype(x.dtype, copy=False)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return (np.float32(1.0) / (np.float32(1.0) + np.exp(-x))).astype(x.dtype, copy=False)


UNARY = {
    "copy": lambda x: x,
    "relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: np.float32(1.0) / np.sqrt(x),
    "reciprocal": lambda x: np.float32(1.0) / x,
    "gelu": _gelu,
    "sigmoid": _sigmoid,
    "tanh": np.tanh,
    "abs": np.abs,
    "neg": np.negative,
}

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
}

# x op scalar
SCALAR = {
    "add_scalar": np.add,
    "mul_scalar": np.multiply,
    "max_scalar": np.maximum,
    "min_scalar": np.minimum,
}

COMPARE = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}

REDUCE = {"sum": np.sum, "max": np.max, "min": np.min}

FLOAT_ONLY = frozenset({"exp", "log", "sqrt", "rsqrt", "reciprocal", "gelu", "sigmoid",
                        "tanh", "div"})


def convert(x: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    """``x`` converted to ``out_dtype`` as the NPU's conversion instructions do it: a
    float becomes an integer by truncation toward zero, saturating at the integer type's
    range, NaN giving 0 (NumPy's ``astype`` wraps, or gives an arbitrary value); every
    other conversion is NumPy's (floats round to nearest even, integers wrap)."""
    out = np.dtype(out_dtype)
    if x.dtype.kind == "f" and out.kind in "iu":
        info = np.iinfo(out)
        with np.errstate(invalid="ignore"):
            wide = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=info.max,
                                 neginf=info.min)
            return np.clip(np.trunc(wide), info.min, info.max).astype(out)
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(compute_dtype(out)).astype(out)


def apply_unary(name: str, x: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    if name == "cast":
        return convert(x, out_dtype)
    with np.errstate(all="ignore"):
        y = UNARY[name](x.astype(compute_dtype(x.dtype)))
    return np.asarray(y).astype(out_dtype)


def apply_binary(name: str, a: np.ndarray, b: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
    cd = compute_dtype(out_dtype)
    with np.errstate(all="ignore"):
        return np.asarray(BINARY[name](a.astype(cd), b.astype(cd))).astype(out_dtype)


def apply_compare(name: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a op b`` elementwise, compared in the operands' compute dtype; bool result."""
    cd = compute_dtype(np.result_type(a.dtype, b.dtype))
    with np.errstate(all="ignore"):
        return np.asarray(COMPARE[name](a.astype(cd), b.astype(cd)))


def apply_where(cond: np.ndarray, x: np.ndarray, y: np.ndarray,
                out_dtype: np.dtype) -> np.ndarray:
    """``x`` where ``cond`` is nonzero, else ``y`` (both exact: nothing is computed)."""
    return np.where(cond.astype(bool), x.astype(out_dtype), y.astype(out_dtype))


def apply_scalar(name: str, a: np.ndarray, value: float, out_dtype: np.dtype) -> np.ndarray:
    cd = compute_dtype(out_dtype)
    scalar = cd.type(value)
    with np.errstate(all="ignore"):
        return np.asarray(SCALAR[name](a.astype(cd), scalar)).astype(out_dtype)


def apply_reduce(name: str, x: np.ndarray, axis: int, out_dtype: np.dtype) -> np.ndarray:
    cd = compute_dtype(out_dtype)
    return np.asarray(REDUCE[name](x.astype(cd), axis=axis, keepdims=True)).astype(out_dtype)


def apply_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Matrix product with the cube's accumulation type (fp32, or int32 for int8)."""
    acc = np.float32 if a.dtype.kind == "f" else np.int64
    out = np.matmul(a.astype(acc), b.astype(acc))
    return out if acc is np.float32 else out.astype(np.int32)
