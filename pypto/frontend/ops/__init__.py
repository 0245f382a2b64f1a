"""PyPTO ops. Inside a kernel trace they add graph nodes; outside, they run at once on
the current device (each op becomes a small cached kernel). One module per kind of op."""

from pypto.frontend.ops.elementwise import (
    abs,
    add,
    cast,
    div,
    equal,
    exp,
    gelu,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    maximum,
    minimum,
    mul,
    neg,
    not_equal,
    reciprocal,
    relu,
    rsqrt,
    sigmoid,
    sqrt,
    sub,
    tanh,
    where,
)
from pypto.frontend.ops.linalg import (
    conv2d,
    dot,
    matmul,
)
from pypto.frontend.ops.math import (
    clip,
    erf,
    power,
)
from pypto.frontend.ops.movement import (
    concatenate,
    pad,
    split,
    stack,
)
from pypto.frontend.ops.norms import (
    rms_norm,
)
from pypto.frontend.ops.pooling import (
    avg_pool2d,
    max_pool2d,
)
from pypto.frontend.ops.reductions import (
    layernorm,
    max,
    mean,
    min,
    softmax,
    sum,
)
from pypto.frontend.ops.trace import (
    op,
)
from pypto.frontend.ops.views import (
    broadcast_to,
    getitem,
    reshape,
    transpose,
)

__all__ = [
    "avg_pool2d",
    "max_pool2d",
    "concatenate",
    "pad",
    "split",
    "stack",
    "clip",
    "erf",
    "power",
    "rms_norm",
    "abs",
    "add",
    "broadcast_to",
    "cast",
    "conv2d",
    "div",
    "dot",
    "equal",
    "exp",
    "gelu",
    "getitem",
    "greater",
    "greater_equal",
    "layernorm",
    "less",
    "less_equal",
    "log",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mul",
    "neg",
    "not_equal",
    "op",
    "reciprocal",
    "relu",
    "reshape",
    "rsqrt",
    "sigmoid",
    "softmax",
    "sqrt",
    "sub",
    "sum",
    "tanh",
    "transpose",
    "where",
]
