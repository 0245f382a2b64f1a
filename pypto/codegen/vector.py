"""Lowering of vector workloads: row blocks (and column chunks) over the vector cores,
each tile loaded into UB, computed, stored; ``depth`` slots rotate so loads of the next
tile overlap compute of this one.

The tile loop below is the specification; when the compiled one (``_vector.pyx``) is
built and selected (``pypto.native``), ``emit`` runs that instead, over a ``Plan``
(``vector_plan``) made from the same ``ChainEmitter``: byte for byte the same streams.
"""

from __future__ import annotations

from types import ModuleType

from pypto import native
from pypto.codegen import vector_plan
from pypto.codegen.memories import memory_map
from pypto.codegen.place import Arena
from pypto.codegen.program import StreamBuilder
from pypto.codegen.vector_chain import REDUCE_OPS, ChainEmitter, Tile
from pypto.ir.workload import Workload
from pypto.schedule_space.chain import analyze
from pypto.schedule_space.schedule import Schedule
from pypto.targets import Target


def emit(wl: Workload, s: Schedule, target: Target, gm_in: dict[int, int],
         gm_out: dict[int, int]) -> list[StreamBuilder]:
    chain = analyze(wl, inplace=s["inplace"])
    tr, tc = s["tile_rows"], s["tile_cols"]
    chunked = tc < chain.cols
    ub = target.role("vector")
    arena = Arena(memory_map(target).roles["vector"], ub.capacity, ub.alignment, ub.name)
    emitter = ChainEmitter(wl, chain, tr, tc, s["depth"], arena, gm_in, gm_out, chunked)
    has_reduction = any(n.op in REDUCE_OPS for n in wl.nodes)
    compiled = _compiled_loop()
    if compiled is not None:
        # the same tiles as below, counted instead of listed: a tile is one column chunk
        # (then loads run ahead) or a row block with all its chunks
        chunk_tiles = chunked and not has_reduction
        one_chunk = chunk_tiles or not chunked
        plan = vector_plan.plan(emitter, memory_map(target), loaded=one_chunk and s["depth"] > 1)
        if plan is not None:
            return _builders(target, compiled.emit(
                plan, chain.rows, tr, tc, chunked, chunk_tiles,
                s["depth"] - 1 if one_chunk else 0, s["cores"]))
    row_blocks = [(r0, min(tr, chain.rows - r0)) for r0 in range(0, chain.rows, tr)]
    chunks = [(c0, min(tc, chain.cols - c0)) for c0 in range(0, chain.cols, tc)]
    if chunked and not has_reduction:
        tiles = [(rb, [cc]) for rb in row_blocks for cc in chunks]
    else:
        tiles = [(rb, chunks) for rb in row_blocks]
    # Software pipelining (one-chunk tiles): the loads of tile t + depth - 1 are issued
    # before the compute of tile t, so they never wait behind it in program order.
    ahead = s["depth"] - 1 if all(len(c) == 1 for _, c in tiles) else 0
    streams = []
    for core in range(s["cores"]):
        sb = StreamBuilder(target)
        mine = tiles[core::s["cores"]]
        slot = 0
        for t, ((r0, rows), tile_chunks) in enumerate(mine):
            if ahead:
                for ld in range(0 if t == 0 else t + ahead, min(t + ahead, len(mine) - 1) + 1):
                    (lr0, lrows), lchunks = mine[ld]
                    emitter.emit_loads(sb, Tile(lr0, lrows, *lchunks[0]), ld)
            slot = emitter.emit_tile(sb, Tile(r0, rows, 0, 0), tile_chunks, slot, t,
                                     loaded=bool(ahead))
        streams.append(sb)
    return streams


def _compiled_loop() -> ModuleType | None:
    """The compiled tile loop (``_vector.pyx``), or ``None`` for this module's own (the
    specification): ``PYPTO_IMPL=python``, or the extension is not built."""
    return native.extension("pypto.codegen._vector", stacklevel=3)


def _builders(target: Target, arrays: list) -> list[StreamBuilder]:
    """The compiled loop's ``INSTR`` arrays, one per core, as stream builders."""
    out = []
    for array in arrays:
        sb = StreamBuilder(target)
        if len(array):
            sb.extend(array)
        out.append(sb)
    return out
