"""PyPTO: NPU kernels written as NumPy-style Python, scheduled by search.

Example:
    >>> import numpy as np, pypto
    >>> @pypto.kernel
    ... def gemm(A, B):
    ...     return pypto.matmul(A, B)
    >>> with pypto.Context(device_type="npu"):
    ...     C = gemm(pypto.ones((64, 64), dtype="float16"), pypto.ones((64, 64), dtype="float16"))
    >>> float(C.numpy()[0, 0])
    64.0

Importing this package is cheap: Optuna, XGBoost, SQLAlchemy and Plotly load on first use.
"""

from pypto.errors import (
    AsmError,
    DatabaseError,
    DeviceError,
    DTypeError,
    HazardWarning,
    KernelError,
    LayoutError,
    LogFormatError,
    PyptoError,
    ScalarOverflowError,
    ScheduleError,
    ScheduleFallbackWarning,
    ShapeError,
    SimError,
    TargetError,
    UnsupportedError,
)
from pypto.frontend.context import Context
from pypto.frontend.kernel import Kernel, kernel, spec
from pypto.frontend.ops import (
    abs,
    add,
    avg_pool2d,
    broadcast_to,
    cast,
    clip,
    concatenate,
    conv2d,
    div,
    dot,
    equal,
    erf,
    exp,
    gelu,
    greater,
    greater_equal,
    layernorm,
    less,
    less_equal,
    log,
    matmul,
    max,
    max_pool2d,
    maximum,
    mean,
    min,
    minimum,
    mul,
    neg,
    not_equal,
    pad,
    power,
    reciprocal,
    relu,
    reshape,
    rms_norm,
    rsqrt,
    sigmoid,
    softmax,
    split,
    sqrt,
    stack,
    sub,
    sum,
    tanh,
    transpose,
    where,
)
from pypto.frontend.raw import inline_asm, raw
from pypto.frontend.tensor import Tensor, full, ones, rand, tensor, zeros
from pypto.ir.dtypes import bool_, float16, float32, int8, int32
from pypto.report.profiler import Profiler
from pypto.version import __version__

__all__ = [
    "AsmError", "Context", "__version__", "DatabaseError", "DeviceError", "LogFormatError",
    "ScheduleFallbackWarning", "DTypeError", "HazardWarning", "Kernel", "KernelError",
    "LayoutError",
    "Profiler", "PyptoError", "ScalarOverflowError",
    "ScheduleError", "ShapeError", "SimError", "TargetError", "Tensor", "UnsupportedError",
    "abs", "add", "bool_", "broadcast_to", "equal", "greater", "greater_equal", "less",
    "less_equal", "not_equal", "where", "cast", "conv2d", "div", "dot", "exp", "float16", "float32",
    "full", "gelu", "inline_asm", "int8", "int32", "kernel", "layernorm", "log", "matmul",
    "max", "maximum",
    "mean", "min", "minimum", "mul", "neg", "ones", "rand", "raw", "reciprocal", "relu",
    "reshape",
    "rsqrt", "sigmoid", "softmax", "spec", "sqrt", "sub", "sum", "tanh", "tensor", "transpose",
    "zeros", "clip", "erf", "power", "rms_norm", "concatenate", "pad", "split", "stack",
    "avg_pool2d", "max_pool2d",
]
