"""NumPy's dispatch protocols: ``np.dot(A, B)``, ``np.add(A, B)``... on PyPTO tensors run
PyPTO ops (traced inside a kernel, executed on the device outside one)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pypto.errors import UnsupportedError
from pypto.frontend import ops

_UFUNCS = {
    np.add: ops.add, np.subtract: ops.sub, np.multiply: ops.mul, np.divide: ops.div,
    np.true_divide: ops.div, np.maximum: ops.maximum, np.minimum: ops.minimum,
    np.exp: ops.exp, np.log: ops.log, np.sqrt: ops.sqrt, np.tanh: ops.tanh,
    np.negative: ops.neg, np.absolute: ops.abs, np.reciprocal: ops.reciprocal,
    np.matmul: ops.matmul, np.equal: ops.equal, np.not_equal: ops.not_equal,
    np.less: ops.less, np.less_equal: ops.less_equal, np.greater: ops.greater,
    np.greater_equal: ops.greater_equal, np.power: ops.power,
}


def _reduce_fn(fn: Any) -> Any:
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None,
             keepdims: bool = False, **kw: Any) -> Any:
        if out is not None or dtype is not None or kw:
            raise UnsupportedError(f"{fn.__name__}: only axis= and keepdims= are supported "
                                   "on PyPTO tensors")
        return fn(a, axis=axis, keepdims=bool(keepdims))
    return call


def _transpose(a: Any, axes: Any = None) -> Any:
    return ops.transpose(a, axes)


def _reshape(a: Any, *args: Any, **kwargs: Any) -> Any:
    shape = kwargs.pop("shape", kwargs.pop("newshape", args[0] if args else None))
    if kwargs or len(args) > 1:
        raise UnsupportedError("np.reshape: only the shape argument is supported (order='C')")
    return ops.reshape(a, shape)


_FUNCTIONS = {
    np.dot: ops.dot, np.matmul: ops.matmul, np.transpose: _transpose, np.reshape: _reshape,
    np.sum: _reduce_fn(ops.sum), np.max: _reduce_fn(ops.max), np.amax: _reduce_fn(ops.max),
    np.min: _reduce_fn(ops.min), np.amin: _reduce_fn(ops.min), np.mean: _reduce_fn(ops.mean),
    np.broadcast_to: ops.broadcast_to, np.where: ops.where, np.clip: ops.clip,
    np.concatenate: ops.concatenate, np.stack: ops.stack, np.split: ops.split, np.pad: ops.pad,
}


def array_ufunc(ufunc: Any, method: str, inputs: tuple[Any, ...], kwargs: dict) -> Any:
    fn = _UFUNCS.get(ufunc)
    if fn is None or method != "__call__":
        names = ", ".join(sorted(f"np.{u.__name__}" for u in _UFUNCS))
        raise UnsupportedError(f"np.{ufunc.__name__}{'' if method == '__call__' else '.' + method}"
                               f" is not supported on PyPTO tensors; supported: {names}")
    if kwargs:
        raise UnsupportedError(f"np.{ufunc.__name__}: keyword arguments "
                               f"{sorted(kwargs)} are not supported on PyPTO tensors")
    return fn(*inputs)


def array_function(func: Any, args: tuple[Any, ...], kwargs: dict) -> Any:
    fn = _FUNCTIONS.get(func)
    if fn is None:
        names = ", ".join(sorted(f"np.{f.__name__}" for f in _FUNCTIONS))
        raise UnsupportedError(f"np.{func.__name__} is not supported on PyPTO tensors; "
                               f"supported: {names}, and ufuncs like np.add, np.maximum")
    return fn(*args, **kwargs)
