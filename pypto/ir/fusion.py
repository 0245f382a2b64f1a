"""The fusion policy: which producers may take elementwise tails (plain data; the
partitioner reads it, ``@pypto.kernel(fuse=...)`` builds it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pypto.errors import KernelError
from pypto.ir.graph import ELEMENTWISE

# Op families a fuse= pattern may name, with their aliases.
_FUSE_NAMES = {"conv": "conv2d", "conv2d": "conv2d", "matmul": "matmul", "gemm": "matmul"}


@dataclass(frozen=True)
class FusePolicy:
    """Which producer ops may take elementwise tails (``None``: all; empty: none)."""

    epilogue_producers: frozenset[str] | None = None
    vector_chains: bool = True

    @staticmethod
    def from_option(fuse: Any) -> FusePolicy:
        if fuse is None or fuse is True:
            return FusePolicy()
        if fuse is False:
            return FusePolicy(frozenset(), vector_chains=False)
        if not isinstance(fuse, Mapping):
            raise KernelError(f"fuse= must be a dict like {{'conv': 'relu'}}, True or False; "
                              f"got {fuse!r}")
        producers = set()
        for producer, consumer in fuse.items():
            if producer not in _FUSE_NAMES:
                raise KernelError(f"fuse={fuse!r}: unknown producer {producer!r}; use one of "
                                  f"{', '.join(sorted(_FUSE_NAMES))}")
            consumers = consumer if isinstance(consumer, (list, tuple)) else [consumer]
            for c in consumers:
                if c not in ELEMENTWISE:
                    raise KernelError(f"fuse={fuse!r}: {c!r} cannot be fused as an epilogue; "
                                      f"use elementwise ops such as relu, add, gelu")
            producers.add(_FUSE_NAMES[producer])
        return FusePolicy(frozenset(producers))
