"""Tracing plumbing shared by the ops: inside a kernel trace an op adds a graph node;
outside one it runs at once on the current device as a small cached kernel."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any

import numpy as np

from pypto.errors import (
    DTypeError,
    KernelError,
)
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes
from pypto.ir.dtypes import DType
from pypto.ir.numerics import FLOAT_ONLY

Scalar = (int, float, np.integer, np.floating)

# The graph of the kernel being traced, for what takes no tensor to find it by (a raw
# block with no bindings).
_TRACING: ContextVar[Any] = ContextVar("pypto_tracing", default=None)


@contextlib.contextmanager
def tracing(graph: Any) -> Iterator[None]:
    """Mark ``graph`` as the one being traced while the kernel's function runs."""
    token = _TRACING.set(graph)
    try:
        yield
    finally:
        _TRACING.reset(token)


def current_trace() -> Any:
    """The graph of the kernel being traced, or None outside a trace."""
    return _TRACING.get()


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


