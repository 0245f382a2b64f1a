"""Software pipelining of the cube kernels' K loop (matmul, conv2d as implicit GEMM)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pypto.codegen.program import StreamBuilder

Chunk = TypeVar("Chunk")


def software_pipeline(sb: StreamBuilder, chunks: Sequence[Chunk], l1_depth: int,
                      load: Callable[[StreamBuilder, Chunk], None],
                      compute: Callable[[StreamBuilder, Chunk, Any], Any], state: Any) -> Any:
    """Emit ``load`` and ``compute`` of every chunk so that the loads of chunk
    ``j + l1_depth - 1`` are issued before the compute of chunk ``j``: the scalar unit
    never sits behind compute that waits for data while the next loads are not yet
    issued. ``compute`` threads ``state`` (buffer-slot counters) through; the final
    state is returned."""
    ahead = l1_depth - 1
    for j, chunk in enumerate(chunks):
        first = 0 if j == 0 else j + ahead
        for ld in range(first, min(j + ahead, len(chunks) - 1) + 1):
            load(sb, chunks[ld])
        state = compute(sb, chunk, state)
    return state
