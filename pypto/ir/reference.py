"""The CPU reference: evaluate a graph op by op with NumPy. This is the oracle the
simulated NPU is checked against, so it is written as plainly as possible.

A raw block (``pypto.inline_asm``) is NPU code with no NumPy meaning: the caller passes
``raw``, which runs one (the compile layer runs it on the functional executor)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pypto.errors import UnsupportedError
from pypto.ir import numerics
from pypto.ir.graph import (
    ASM_OUTPUT,
    COMPARISONS,
    ELEMENTWISE_BINARY,
    ELEMENTWISE_SCALAR,
    ELEMENTWISE_UNARY,
    INLINE_ASM,
    REDUCTIONS,
    Graph,
    Node,
)

RawRunner = Callable[[Node, list[np.ndarray]], list[np.ndarray]]


def evaluate(graph: Graph, inputs: list[np.ndarray], raw: RawRunner | None = None
             ) -> list[np.ndarray]:
    """Values of ``graph.outputs`` for the given input arrays; ``raw(node, arrays)`` gives
    the outputs of a raw block from the arrays bound to it."""
    values: dict[int, Any] = {}
    for node in graph.nodes:
        values[node.id] = _eval(node, graph, values, inputs, raw)
    return [np.ascontiguousarray(values[i]) for i in graph.outputs]


def _eval(n: Node, graph: Graph, v: dict[int, Any], inputs: list[np.ndarray],
          raw: RawRunner | None = None) -> Any:
    dt = n.dtype.np
    args = [v[i] for i in n.inputs]
    if n.op == INLINE_ASM:
        if raw is None:
            raise UnsupportedError("a raw block (pypto.inline_asm) is NPU code: only the "
                                   "simulated NPU's executor runs it")
        return raw(n, [np.ascontiguousarray(a) for a in args])
    if n.op == ASM_OUTPUT:
        return args[0][n.attr("index")]
    if n.op == "input":
        return np.asarray(inputs[n.attr("index")], dtype=dt).reshape(n.shape)
    if n.op == "const":
        return graph.consts[n.id].astype(dt).reshape(n.shape)
    if n.op in ELEMENTWISE_UNARY:
        return numerics.apply_unary(n.op, args[0], dt)
    if n.op in ELEMENTWISE_BINARY:
        return numerics.apply_binary(n.op, args[0], args[1], dt)
    if n.op in COMPARISONS:
        return numerics.apply_compare(n.op, args[0], args[1])
    if n.op == "where":
        return numerics.apply_where(args[0], args[1], args[2], dt)
    if n.op in ELEMENTWISE_SCALAR:
        return numerics.apply_scalar(n.op, args[0], n.attr("value"), dt)
    if n.op in REDUCTIONS:
        out = numerics.apply_reduce(n.op, args[0], n.attr("axis"), dt)
        return out.reshape(n.shape)
    if n.op == "matmul":
        a, b = args
        if n.attr("transpose_a"):
            a = np.swapaxes(a, -1, -2)
        if n.attr("transpose_b"):
            b = np.swapaxes(b, -1, -2)
        return numerics.apply_matmul(a, b).astype(dt)
    if n.op == "transpose":
        return np.transpose(args[0], n.attr("axes"))
    if n.op == "reshape":
        return args[0].reshape(n.shape)
    if n.op == "broadcast_to":
        return np.broadcast_to(args[0], n.shape)
    if n.op == "slice":
        # a reversed slice that runs past index 0 ends at -1: no end, for Python
        index = tuple(slice(b, e if e >= 0 else None, s)
                      for b, e, s in zip(n.attr("begin"), n.attr("end"), n.attr("step")))
        return args[0][index]
    if n.op == "concatenate":
        return np.concatenate(args, axis=n.attr("axis")).astype(dt)
    if n.op == "pad":
        return np.pad(args[0], n.attr("pads"), constant_values=n.attr("value")).astype(dt)
    if n.op == "conv2d":
        return conv2d_reference(args[0], args[1], n.attr("stride"), n.attr("padding"),
                                n.attr("dilation"), n.attr("groups")).astype(dt)
    if n.op == "conv2d_nhwc":  # NHWC input, [R*S*C/groups, K] weights (a third: zeros)
        x, w = args[0], args[1]
        r, s = n.attr("kernel")
        groups = n.attr("groups", 1)
        kcrs = w.reshape(r, s, x.shape[3] // groups, w.shape[1]).transpose(3, 2, 0, 1)
        out = conv2d_reference(x.transpose(0, 3, 1, 2), kcrs, n.attr("stride"),
                               n.attr("padding"), n.attr("dilation"), groups)
        return out.transpose(0, 2, 3, 1).astype(dt)
    if n.op == "conv2d_nchw":  # NCHW input, [K, C*R*S] weights (a third input: zeros)
        x, w = args[0], args[1]
        r, s = n.attr("kernel")
        kcrs = w.reshape(w.shape[0], x.shape[1], r, s)
        return conv2d_reference(x, kcrs, n.attr("stride"), n.attr("padding"),
                                n.attr("dilation"), 1).astype(dt)
    raise UnsupportedError(f"the CPU reference has no rule for op {n.op!r}")


def conv2d_reference(x: np.ndarray, w: np.ndarray, stride: tuple[int, int],
                     padding: tuple[int, int], dilation: tuple[int, int],
                     groups: int) -> np.ndarray:
    """NCHW x KCRS convolution with fp32 (or int) accumulation, via im2col."""
    acc = np.float32 if x.dtype.kind == "f" else np.int64
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    ph, pw = padding
    xp = np.pad(x.astype(acc), ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    oh = (h + 2 * ph - dilation[0] * (r - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pw - dilation[1] * (s - 1) - 1) // stride[1] + 1
    out = np.zeros((n, k, oh, ow), dtype=acc)
    kg = k // groups
    for g in range(groups):
        cols = np.empty((n, cg, r, s, oh, ow), dtype=acc)
        for i in range(r):
            for j in range(s):
                hi, wj = i * dilation[0], j * dilation[1]
                cols[:, :, i, j] = xp[:, g * cg:(g + 1) * cg,
                                      hi:hi + stride[0] * oh:stride[0],
                                      wj:wj + stride[1] * ow:stride[1]]
        wg = w[g * kg:(g + 1) * kg].astype(acc).reshape(kg, cg * r * s)
        out[:, g * kg:(g + 1) * kg] = np.einsum("kq,nqhw->nkhw", wg,
                                                cols.reshape(n, cg * r * s, oh, ow))
    return out if acc is np.float32 else out.astype(np.int32)
