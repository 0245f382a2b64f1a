"""``Tensor``: a concrete array (host data) or a symbolic value inside a kernel trace."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from pypto.errors import DTypeError, KernelError, ShapeError, UnsupportedError
from pypto.ir import dtypes
from pypto.ir.dtypes import DType
from pypto.ir.layouts import check_layout

if TYPE_CHECKING:
    from pypto.ir.graph import Graph


class Tensor:
    """An n-D array of one dtype, on the host or being traced inside ``@pypto.kernel``.

    Concrete tensors hold NumPy data (``.numpy()``); symbolic ones are nodes of the graph
    being traced. Operators, slicing and NumPy functions (``np.dot``, ``np.add``, ...) run
    PyPTO ops in both cases: traced inside a kernel, executed on the current device
    outside one.
    """

    __array_priority__ = 1000
    __slots__ = ("shape", "dtype", "layout", "_data", "_graph", "_node")

    def __init__(self, shape: tuple[int, ...], dtype: DType, layout: str = "ND", *,
                 data: np.ndarray | None = None, graph: Graph | None = None,
                 node: int | None = None) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.layout = layout
        self._data = data
        self._graph = graph
        self._node = node

    # -- basic properties -------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def is_symbolic(self) -> bool:
        return self._graph is not None

    @property
    def T(self) -> Tensor:  # noqa: N802 - NumPy's name
        return self.transpose()

    def numpy(self) -> np.ndarray:
        """The data as a NumPy array (a copy you may modify)."""
        if self._data is None:
            raise KernelError("this tensor is symbolic (inside a @pypto.kernel trace) and has "
                              "no value yet; return it from the kernel to get its data")
        return self._data.copy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        data = self.numpy()
        return data if dtype is None else data.astype(dtype)

    def __repr__(self) -> str:
        if self._data is None:
            return f"Tensor<symbolic %{self._node}: {self.dtype.name}{list(self.shape)}>"
        body = np.array2string(self._data, threshold=20, edgeitems=2)
        layout = "" if self.layout == "ND" else f", layout={self.layout!r}"
        return f"pypto.tensor({body}, dtype={self.dtype.name!r}{layout})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __bool__(self) -> bool:
        raise KernelError("the truth value of a PyPTO tensor is ambiguous; kernels are traced "
                          "once, so data-dependent Python control flow is not supported")

    # -- methods that mirror NumPy -------------------------------------------------------
    def reshape(self, *shape: Any) -> Tensor:
        from pypto.frontend import ops

        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return ops.reshape(self, shape)

    def transpose(self, *axes: Any) -> Tensor:
        from pypto.frontend import ops

        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        return ops.transpose(self, axes or None)

    def astype(self, dtype: Any) -> Tensor:
        from pypto.frontend import ops

        return ops.cast(self, dtype)

    def sum(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        from pypto.frontend import ops

        return ops.sum(self, axis=axis, keepdims=keepdims)

    def max(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        from pypto.frontend import ops

        return ops.max(self, axis=axis, keepdims=keepdims)

    def mean(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        from pypto.frontend import ops

        return ops.mean(self, axis=axis, keepdims=keepdims)

    def __getitem__(self, index: Any) -> Tensor:
        from pypto.frontend import ops

        return ops.getitem(self, index)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise UnsupportedError("PyPTO tensors are immutable: build a new tensor instead of "
                               "assigning into one")

    # -- operators ----------------------------------------------------------------------
    def _bin(self, name: str, other: Any, reverse: bool = False) -> Tensor:
        from pypto.frontend import ops

        fn = getattr(ops, name)
        return fn(other, self) if reverse else fn(self, other)

    def __add__(self, o: Any) -> Tensor: return self._bin("add", o)
    def __radd__(self, o: Any) -> Tensor: return self._bin("add", o, True)
    def __sub__(self, o: Any) -> Tensor: return self._bin("sub", o)
    def __rsub__(self, o: Any) -> Tensor: return self._bin("sub", o, True)
    def __mul__(self, o: Any) -> Tensor: return self._bin("mul", o)
    def __rmul__(self, o: Any) -> Tensor: return self._bin("mul", o, True)
    def __truediv__(self, o: Any) -> Tensor: return self._bin("div", o)
    def __rtruediv__(self, o: Any) -> Tensor: return self._bin("div", o, True)
    def __pow__(self, o: Any) -> Tensor: return self._bin("power", o)
    def __rpow__(self, o: Any) -> Tensor: return self._bin("power", o, True)
    def __eq__(self, o: Any) -> Tensor: return self._bin("equal", o)  # type: ignore[override]
    def __ne__(self, o: Any) -> Tensor: return self._bin("not_equal", o)  # type: ignore[override]
    def __lt__(self, o: Any) -> Tensor: return self._bin("less", o)
    def __le__(self, o: Any) -> Tensor: return self._bin("less_equal", o)
    def __gt__(self, o: Any) -> Tensor: return self._bin("greater", o)
    def __ge__(self, o: Any) -> Tensor: return self._bin("greater_equal", o)
    # Comparisons are elementwise (as NumPy's), so equality is not identity; a tensor
    # still hashes by identity, so the runtime may keep tensors in sets and dicts.
    __hash__ = object.__hash__
    def __matmul__(self, o: Any) -> Tensor: return self._bin("matmul", o)
    def __rmatmul__(self, o: Any) -> Tensor: return self._bin("matmul", o, True)

    def __neg__(self) -> Tensor:
        from pypto.frontend import ops

        return ops.neg(self)

    def __abs__(self) -> Tensor:
        from pypto.frontend import ops

        return ops.abs(self)

    def __pos__(self) -> Tensor:
        return self

    # -- NumPy protocols ----------------------------------------------------------------
    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from pypto.frontend.numpy_api import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from pypto.frontend.numpy_api import array_function

        return array_function(func, args, kwargs)


def tensor(data: Any, dtype: Any = None, layout: str | None = None) -> Tensor:
    """A concrete tensor from array-like ``data``.

    Example:
        >>> import numpy as np, pypto
        >>> pypto.tensor(np.ones((2, 2)), dtype="float16").shape
        (2, 2)

    ``dtype`` is required (``float16``, ``float32``, ``int8``, ``int32``); ``layout`` names
    how a 4-D tensor's axes are ordered (``NCHW``, ``NHWC``) and defaults to ``ND``.
    """
    if dtype is None:
        raise DTypeError("pypto.tensor() needs an explicit dtype, e.g. "
                         "pypto.tensor(data, dtype='float16'); choose one of "
                         f"{', '.join(dtypes.BY_NAME)}")
    dt = dtypes.as_dtype(dtype)
    if isinstance(data, Tensor):
        data = data.numpy()
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as exc:
        raise ShapeError(f"pypto.tensor(): data is not array-like ({exc})") from None
    if arr.dtype == object:
        raise ShapeError("pypto.tensor(): data is ragged or not numeric; pass a rectangular "
                         "array of numbers")
    if arr.dtype.kind not in "biuf":
        raise DTypeError(f"pypto.tensor(): cannot convert data of NumPy dtype {arr.dtype} "
                         f"to {dt.name}")
    with np.errstate(all="ignore"):
        arr = np.array(arr, dtype=dt.np, order="C")  # keeps 0-d arrays 0-d
    return Tensor(arr.shape, dt, check_layout(layout, arr.ndim), data=arr)


# Element counts (and their byte offsets) must fit in int64 everywhere downstream.
MAX_ELEMENTS = 2**48


def _as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(value)
    return int(value)


def _shape_arg(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        out = tuple(_as_int(s) for s in shape)
    except (TypeError, ValueError):
        raise ShapeError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if any(s < 0 for s in out):
        raise ShapeError(f"shape {list(out)} has a negative size")
    if math.prod(out) >= MAX_ELEMENTS or any(s >= MAX_ELEMENTS for s in out):
        raise ShapeError(f"shape {list(out)} has {math.prod(out):.3g} elements, more than "
                         f"any memory holds (at most {MAX_ELEMENTS:.3g}): check the shape")
    return out


def full(shape: Any, value: float, dtype: Any = None, layout: str | None = None) -> Tensor:
    """A tensor of ``shape`` filled with ``value``."""
    if dtype is None:
        raise DTypeError("pypto.full() needs an explicit dtype, e.g. dtype='float16'")
    dt = dtypes.as_dtype(dtype)
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
        raise DTypeError(f"pypto.full(): the fill value must be a number, got {value!r}")
    return tensor(np.full(_shape_arg(shape), value, dtype=dt.np), dtype=dt, layout=layout)


def ones(shape: Any, dtype: Any = "float16", layout: str | None = None) -> Tensor:
    """A tensor of ones (``float16`` unless ``dtype`` says otherwise)."""
    return full(shape, 1, dtype, layout)


def zeros(shape: Any, dtype: Any = "float16", layout: str | None = None) -> Tensor:
    """A tensor of zeros (``float16`` unless ``dtype`` says otherwise)."""
    return full(shape, 0, dtype, layout)


def rand(shape: Any, dtype: Any = "float16", seed: int | None = None,
         layout: str | None = None) -> Tensor:
    """Uniform random values in [0, 1) (integers in [-8, 8) for integer dtypes)."""
    dt = dtypes.as_dtype(dtype)
    rng = np.random.default_rng(seed)
    shp = _shape_arg(shape)
    data = rng.random(shp) if dt.is_float else rng.integers(-8, 8, shp)
    return tensor(data, dtype=dt, layout=layout)
