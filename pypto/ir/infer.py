"""Shape inference: each function returns the result shape or raises ``ShapeError``
naming the op and the shapes involved."""

from __future__ import annotations

import math

from pypto.errors import ShapeError


def broadcast(op: str, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            raise ShapeError(f"{op}: shapes {list(a)} and {list(b)} do not broadcast "
                             f"(axis -{i}: {x} vs {y})")
        out.append(max(x, y) if 0 not in (x, y) else 0)
    return tuple(reversed(out))


def matmul(a: tuple[int, ...], b: tuple[int, ...], transpose_a: bool,
           transpose_b: bool) -> tuple[int, ...]:
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"matmul: operands need 2 or more dims, got {list(a)} and {list(b)}")
    m, ka = (a[-1], a[-2]) if transpose_a else (a[-2], a[-1])
    kb, n = (b[-1], b[-2]) if transpose_b else (b[-2], b[-1])
    if ka != kb:
        raise ShapeError(f"matmul: inner dimensions differ: A {list(a)} has K={ka}, "
                         f"B {list(b)} has K={kb}" + (" (after transposes)"
                                                     if transpose_a or transpose_b else ""))
    batch = broadcast("matmul (batch dims)", a[:-2], b[:-2])
    return (*batch, m, n)


def normalize_axis(op: str, axis: int, ndim: int) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise ShapeError(f"{op}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ShapeError(f"{op}: axis {axis} is out of range for a {ndim}-D tensor")
    return axis % ndim


def reduce(op: str, shape: tuple[int, ...], axis: int, keepdims: bool) -> tuple[int, ...]:
    ax = normalize_axis(op, axis, len(shape))
    if shape[ax] == 0:
        raise ShapeError(f"{op}: cannot reduce an empty axis {ax} of shape {list(shape)}")
    if keepdims:
        return shape[:ax] + (1,) + shape[ax + 1:]
    return shape[:ax] + shape[ax + 1:]


def transpose(shape: tuple[int, ...], axes: tuple[int, ...] | None) -> tuple[int, ...]:
    if axes is None:
        return tuple(reversed(shape))
    if sorted(a % len(shape) if -len(shape) <= a < len(shape) else -1 for a in axes) \
            != list(range(len(shape))):
        raise ShapeError(f"transpose: axes {list(axes)} are not a permutation of "
                         f"{len(shape)} dims (shape {list(shape)})")
    return tuple(shape[a] for a in axes)


def reshape(shape: tuple[int, ...], new: tuple[int, ...]) -> tuple[int, ...]:
    size = math.prod(shape)
    if sum(1 for d in new if d == -1) > 1:
        raise ShapeError(f"reshape: at most one -1 allowed, got {list(new)}")
    known = math.prod(d for d in new if d != -1)
    if any(d < -1 for d in new):
        raise ShapeError(f"reshape: negative size in {list(new)}")
    if -1 in new:
        if known == 0 or size % known:
            raise ShapeError(f"reshape: cannot reshape {list(shape)} ({size} elements) "
                             f"into {list(new)}")
        new = tuple(size // known if d == -1 else d for d in new)
    if math.prod(new) != size:
        raise ShapeError(f"reshape: cannot reshape {list(shape)} ({size} elements) into "
                         f"{list(new)} ({math.prod(new)} elements)")
    return tuple(new)


def conv2d(x: tuple[int, ...], w: tuple[int, ...], stride: tuple[int, int],
           padding: tuple[int, int], dilation: tuple[int, int], groups: int) -> tuple[int, ...]:
    """Shapes in NCHW / KCRS order."""
    if len(x) != 4 or len(w) != 4:
        raise ShapeError(f"conv2d: input and weight must be 4-D, got {list(x)} and {list(w)}")
    n, c, h, wd = x
    k, cg, r, s = w
    if groups < 1 or c % groups or k % groups or cg * groups != c:
        raise ShapeError(f"conv2d: input channels {c} and weight {list(w)} do not fit "
                         f"groups={groups} (weight must be [K, C/groups, R, S])")
    oh = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1
    if oh <= 0 or ow <= 0:
        raise ShapeError(f"conv2d: kernel {r}x{s} does not fit input {h}x{wd} with "
                         f"padding {padding} and dilation {dilation}")
    return (n, k, oh, ow)
