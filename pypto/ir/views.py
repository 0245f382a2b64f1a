"""Strided views: transposes, slices, broadcasts and reshapes as (offset, strides) over a
materialized buffer, so they fold into the loads of the kernel that consumes them."""

from __future__ import annotations

import math
from dataclasses import dataclass


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
    """Elements ``offset + sum(i_d * strides[d])`` of buffer ``base`` (a node id)."""

    base: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]

    @staticmethod
    def whole(base: int, shape: tuple[int, ...]) -> View:
        return View(base, 0, shape, contiguous_strides(shape))

    def is_contiguous(self) -> bool:
        return self.offset == 0 and all(
            s == c for d, s, c in zip(self.shape, self.strides, contiguous_strides(self.shape))
            if d != 1)

    def transpose(self, axes: tuple[int, ...]) -> View:
        return View(self.base, self.offset, tuple(self.shape[a] for a in axes),
                    tuple(self.strides[a] for a in axes))

    def broadcast_to(self, shape: tuple[int, ...]) -> View:
        pad = len(shape) - len(self.shape)
        old_shape = (1,) * pad + self.shape
        old_strides = (0,) * pad + self.strides
        strides = tuple(0 if o == 1 and n != 1 else s
                        for o, n, s in zip(old_shape, shape, old_strides))
        return View(self.base, self.offset, tuple(shape), strides)

    def slice(self, begin: tuple[int, ...], end: tuple[int, ...], step: tuple[int, ...]) -> View:
        offset = self.offset + sum(b * s for b, s in zip(begin, self.strides))
        shape = tuple(len(range(b, e, st)) for b, e, st in zip(begin, end, step))
        strides = tuple(s * st for s, st in zip(self.strides, step))
        return View(self.base, offset, shape, strides)

    def reshape(self, shape: tuple[int, ...]) -> View | None:
        """The reshaped view, or None when it cannot be expressed without a copy."""
        if math.prod(shape) == 0:
            return View(self.base, self.offset, shape, contiguous_strides(shape))
        strides = _reshape_strides(self.shape, self.strides, shape)
        return None if strides is None else View(self.base, self.offset, shape, strides)


def _reshape_strides(shape: tuple[int, ...], strides: tuple[int, ...],
                     new: tuple[int, ...]) -> tuple[int, ...] | None:
    old = [(d, s) for d, s in zip(shape, strides) if d != 1]
    out = [0] * len(new)
    oi = ni = 0
    while ni < len(new):
        if new[ni] == 1:
            ni += 1
            continue
        if oi >= len(old):
            return None
        oj, nj = oi + 1, ni + 1
        op, np_ = old[oi][0], new[ni]
        while op != np_:
            if op < np_:
                op *= old[oj][0]
                oj += 1
            else:
                np_ *= new[nj]
                nj += 1
        if any(old[k][1] != old[k + 1][1] * old[k + 1][0] for k in range(oi, oj - 1)):
            return None
        stride = old[oj - 1][1]
        for k in range(nj - 1, ni - 1, -1):
            out[k] = stride
            stride *= new[k]
        oi, ni = oj, nj
    return tuple(out)
