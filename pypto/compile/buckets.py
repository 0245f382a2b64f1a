"""Shape buckets of a dynamic kernel (``@pypto.kernel(dynamic_shape=True)``).

A size falls in a bucket ``(lo, hi]``: by default the powers of two (``(512, 1024]``),
or the upper bounds a kernel gives (``buckets=(64, 256, 1024)``: ``(0, 64]``,
``(64, 256]``, ``(256, 1024]``, and powers of two above the last bound). A dynamic
kernel caches its compiled variants per bucket of its arguments' dims; its schedules
come from the nearest tuned shape in the same bucket (every size of the workload in
the same bucket as this one's), and ``pypto tune --shapes`` tunes one shape per
bucket, its upper bound (``representatives``).

Example:
    >>> from pypto.compile.buckets import Buckets
    >>> Buckets().bucket(1000), Buckets((64, 256)).bucket(100)
    ((512, 1024), (64, 256))
    >>> Buckets().representatives(100, 1000)
    [128, 256, 512, 1000]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pypto.errors import KernelError


@dataclass(frozen=True)
class Buckets:
    """Bucket upper bounds, ascending (empty: powers of two)."""

    bounds: tuple[int, ...] = ()

    @staticmethod
    def from_option(buckets: Any) -> Buckets:
        """The buckets of ``@pypto.kernel(buckets=...)``: None (powers of two) or a
        sequence of increasing positive ints (upper bounds)."""
        if buckets is None:
            return Buckets()
        if isinstance(buckets, (str, bytes)) or not isinstance(buckets, Sequence) or \
                not buckets or not all(isinstance(b, int) and not isinstance(b, bool)
                                       for b in buckets):
            raise KernelError(f"buckets= must be a list of increasing positive ints (the "
                              f"buckets' upper bounds), e.g. [64, 256, 1024]; got {buckets!r}")
        bounds = tuple(buckets)
        if bounds[0] < 1 or any(a >= b for a, b in zip(bounds, bounds[1:])):
            raise KernelError(f"buckets={list(bounds)}: the upper bounds must be positive and "
                              "strictly increasing, e.g. [64, 256, 1024]")
        return Buckets(bounds)

    def bucket(self, size: int) -> tuple[int, int]:
        """``(lo, hi)``: ``size`` is in ``lo < size <= hi``."""
        lo = 0
        for b in self.bounds:
            if size <= b:
                return lo, b
            lo = b
        hi = 1
        while hi < size:
            hi *= 2
        return max(lo, hi // 2 if hi > 1 else 0), hi

    def key(self, sizes: Sequence[int]) -> tuple[int, ...]:
        """The bucket (its upper bound) of each size."""
        return tuple(self.bucket(int(s))[1] for s in sizes)

    def same(self, a: Sequence[int], b: Sequence[int]) -> bool:
        """Whether size vectors ``a`` and ``b`` lie in the same buckets, size by size."""
        return len(a) == len(b) and self.key(a) == self.key(b)

    def representatives(self, lo: int, hi: int) -> list[int]:
        """One size per bucket that meets ``[lo, hi]``: its upper bound, or ``hi`` in
        the last one."""
        out, size = [], max(1, lo)
        while size <= hi:
            top = min(self.bucket(size)[1], hi)
            out.append(top)
            size = top + 1
        return out

    def describe(self) -> str:
        return "powers of two" if not self.bounds else f"upper bounds {list(self.bounds)}"
