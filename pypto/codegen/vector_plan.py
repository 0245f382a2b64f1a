"""What the compiled vector emitter (``_vector.pyx``) needs from a ``ChainEmitter``, as
plain integer arrays: a ``Plan``.

The Python emitter (``vector.emit`` over ``vector_chain.ChainEmitter``) is the
specification. Everything it decides once per workload (which ops a tile runs in which
order, which values a pass recomputes, where each buffer lies) is decided here the same
way, in Python; what it does per tile (operands, DMA runs, slot rotation) the compiled
loop does. ``tests/test_vector_compiled.py`` checks the two byte for byte.

A row block runs *steps*: in ``body`` once per column chunk, in ``end`` once after its
last chunk. ``plan`` returns ``None`` for a chain with an op it does not know (an op
whose lowering is not one of the tables of ``vector_chain``): the Python emitter then
runs, so a new op is correct before it is fast.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pypto.codegen.isa import VECTOR, Mem, Op
from pypto.codegen.memories import MemoryMap
from pypto.codegen.place import Slots, broadcast_strides
from pypto.codegen.program import pipe_of
from pypto.codegen.vector_chain import (
    BINARY_OPS,
    COMBINE_OPS,
    COMPARE_OPS,
    REDUCE_OPS,
    SCALAR_OPS,
    UNARY_OPS,
    ChainEmitter,
)
from pypto.ir.dtypes import BY_NAME
from pypto.schedule_space.chain import stages

# node kinds (column K_KIND)
NONE, LOAD, UNARY, BINARY, COMPARE, WHERE, SCALAR, REDUCE = range(8)
# node columns
(K_KIND, K_OP, K_OP2, K_DCODE, K_ISZ, K_ARG0, K_ARG1, K_ARG2, K_SCODE, K_ROW, K_ROW_BCAST,
 K_COL_BCAST, K_BASE, K_SIZE, K_COUNT, K_ACC0_BASE, K_ACC0_SIZE, K_ACC0_COUNT, K_ACC1_BASE,
 K_ACC1_SIZE, K_ACC1_COUNT, K_IN_SYM, K_OUT_SYM, K_OFFSET, K_CS, K_ACC_DCODE,
 K_FINAL_OP) = range(27)
NODE_FIELDS = 27

# step actions
S_LOAD, S_COMPUTE, S_STORE = range(3)
# the chunk index and ``last_chunk`` a compute step passes to ``ChainEmitter.compute``
CHUNK_J, CHUNK_ZERO = range(2)
LAST_IS_LAST, LAST_FALSE, LAST_TRUE = range(3)
# which slot a store (or the store after a compute) uses
STORE_NONE, STORE_SLOT, STORE_ROW_SLOT = range(3)
# step columns: node, action, chunk, last, store after, only at the first chunk
STEP_FIELDS = 6


@dataclass(frozen=True)
class Plan:
    """A vector workload's emission as integer arrays (see the module doc).

    ``nodes`` is ``[node, NODE_FIELDS]``; ``imm`` each node's immediate; ``row_strides``
    each load's GM element strides over the row dimensions of the row space (broadcast:
    0), ``row_dims`` those dimensions; ``passes`` the row block's passes over its chunks,
    each ``(body, end)`` of ``[step, STEP_FIELDS]``; ``loads`` the loads issued ahead
    (software pipelining); ``pipes`` the pipe of each vector opcode."""

    nodes: np.ndarray
    imm: np.ndarray
    row_strides: np.ndarray
    row_dims: np.ndarray
    passes: tuple[tuple[np.ndarray, np.ndarray], ...]
    loads: np.ndarray
    pipes: np.ndarray
    mem: int
    align: int
    cols: int
    load_pipe: int
    store_pipe: int


def plan(em: ChainEmitter, memories: MemoryMap, loaded: bool) -> Plan | None:
    """The plan of ``em``'s tiles (``loaded``: the loads of one-chunk tiles are issued
    ahead by ``emit_loads``), or ``None`` when a node's op is not in the tables."""
    wl, chain = em.wl, em.chain
    space = chain.space
    imm = [0.0] * len(wl.nodes)
    rows: list[list[int]] = []
    row_strides = np.zeros((len(wl.nodes), max(len(space) - 1, 1)), dtype=np.int64)
    for i, n in enumerate(wl.nodes):
        row = [0] * NODE_FIELDS
        row[K_ARG0] = row[K_ARG1] = row[K_ARG2] = row[K_IN_SYM] = row[K_OUT_SYM] = -1
        rows.append(row)
        if i not in em.values:
            continue
        v, dt = em.values[i], em.dtype(i)
        kind = _kind(n.op)
        if kind is None:
            return None
        row[K_KIND] = kind
        row[K_DCODE], row[K_ISZ] = dt.code, dt.itemsize
        row[K_SCODE] = em.dtype(n.args[0]).code if n.args else dt.code
        row[K_ROW], row[K_ROW_BCAST], row[K_COL_BCAST] = (v.phase == "row", v.row_bcast,
                                                          v.col_bcast)
        for k, a in enumerate(n.args[:3]):
            row[K_ARG0 + k] = a
        _put_slots(row, K_BASE, em.slots[i])
        if i in em.gm_outputs:
            row[K_OUT_SYM] = em.gm_outputs[i]
        if kind == LOAD:
            strides = broadcast_strides(n.shape, n.attr("strides"), space)
            row[K_IN_SYM] = em.gm_inputs[n.attr("input")]
            row[K_OFFSET], row[K_CS] = n.attr("offset"), strides[-1]
            row_strides[i, :len(space) - 1] = strides[:-1]
        elif kind == REDUCE:
            row[K_OP], row[K_OP2] = REDUCE_OPS[n.op], COMBINE_OPS[n.op]
            acc_dt = BY_NAME["float32" if dt.is_float else "int32"]
            row[K_ACC_DCODE] = acc_dt.code
            row[K_FINAL_OP] = Op.VCAST if acc_dt != dt else Op.VCOPY
            if i in em.acc:
                _put_slots(row, K_ACC0_BASE, em.acc[i][0])
                _put_slots(row, K_ACC1_BASE, em.acc[i][1])
        elif kind == WHERE:
            row[K_OP], row[K_OP2] = Op.VCAST, Op.VSEL
        else:
            row[K_OP] = {UNARY: UNARY_OPS, BINARY: BINARY_OPS, COMPARE: COMPARE_OPS,
                         SCALAR: SCALAR_OPS}[kind][n.op]
            if kind == SCALAR:
                imm[i] = float(n.attr("value"))
    nodes = np.array(rows, dtype=np.int64).reshape(len(wl.nodes), NODE_FIELDS)
    loads = np.array([i for i in range(len(wl.nodes))
                      if i in em.values and wl.nodes[i].op == "load"], dtype=np.int64)
    passes = _passes(em) if em.chunked and chain.needs_full_rows else (_tile_steps(em, loaded),)
    return Plan(nodes, np.array(imm, dtype=np.float64), row_strides,
                np.array(space[:-1] or (1,), dtype=np.int64), passes, loads,
                _pipes(memories, em.mem), int(em.mem), em.align, chain.cols,
                int(memories.copy_pipe(Mem.GM, em.mem)), int(memories.copy_pipe(em.mem, Mem.GM)))


_PIPES: dict[tuple[bytes, int], np.ndarray] = {}


def _pipes(memories: MemoryMap, mem: Mem) -> np.ndarray:
    """The pipe of each vector opcode on operands in ``mem`` (``StreamBuilder.emit``'s),
    by opcode (kept per memory map: a plan is made per lowering)."""
    key = (memories.copy_table, int(mem))
    if key not in _PIPES:
        pipes = np.zeros(256, dtype=np.uint8)
        for op in VECTOR:
            pipes[int(op)] = pipe_of(op, mem, mem, memories)
        _PIPES[key] = pipes
    return _PIPES[key]


def _kind(op: str) -> int | None:
    if op == "load":
        return LOAD
    if op == "where":
        return WHERE
    for kind, table in ((UNARY, UNARY_OPS), (BINARY, BINARY_OPS), (COMPARE, COMPARE_OPS),
                        (SCALAR, SCALAR_OPS), (REDUCE, REDUCE_OPS)):
        if op in table:
            return kind
    return None


def _put_slots(row: list[int], at: int, s: Slots) -> None:
    row[at], row[at + 1], row[at + 2] = s.base, s.size, s.count


def _steps(steps: list[tuple[int, ...]]) -> np.ndarray:
    return np.array(steps, dtype=np.int64).reshape(len(steps), STEP_FIELDS)


def _tile_steps(em: ChainEmitter, loaded: bool) -> tuple[np.ndarray, np.ndarray]:
    """``ChainEmitter.emit_tile``'s steps (no ``preset`` values: a vector workload)."""
    wl, values, chunked = em.wl, em.values, em.chunked
    nodes = [i for i in range(len(wl.nodes)) if i in values]
    row_nodes = [i for i in nodes if values[i].phase == "row"
                 and wl.nodes[i].op not in REDUCE_OPS]
    outs = set(wl.outputs)
    body: list[tuple[int, ...]] = []
    for i in nodes:
        if wl.nodes[i].op == "load":
            if not loaded:
                body.append((i, S_LOAD, 0, 0, STORE_SLOT, 0))
        elif chunked and i in row_nodes:
            continue
        else:
            row_phase = values[i].phase == "row"
            store = STORE_NONE
            if i in outs and not (chunked and row_phase):
                store = STORE_ROW_SLOT if row_phase else STORE_SLOT
            body.append((i, S_COMPUTE, CHUNK_J, LAST_IS_LAST, store, 0))
    end: list[tuple[int, ...]] = []
    if chunked:
        end += [(i, S_COMPUTE, CHUNK_J, LAST_TRUE, STORE_NONE, 0) for i in row_nodes]
        end += [(i, S_STORE, 0, 0, STORE_ROW_SLOT, 0) for i in nodes
                if i in outs and values[i].phase == "row"]
    return _steps(body), _steps(end)


def _passes(em: ChainEmitter) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """``ChainEmitter.emit_passes``'s steps, pass by pass."""
    wl, stage, nodes, outs = em.wl, stages(em.wl, em.chain), em.nodes(), set(em.wl.outputs)
    out = []
    for k, reductions, first, last, needed in em.passes():
        row_store = STORE_ROW_SLOT  # a row value's store after its compute, if an output
        body: list[tuple[int, ...]] = []
        for i in nodes:
            if i in reductions:
                body.append((i, S_COMPUTE, CHUNK_J, LAST_IS_LAST, STORE_NONE, 0))
            elif i in first:
                body.append((i, S_COMPUTE, CHUNK_ZERO, LAST_TRUE,
                             row_store if i in outs else STORE_NONE, 1))
            elif i not in needed:
                continue
            elif wl.nodes[i].op == "load":
                body.append((i, S_LOAD, 0, 0, STORE_SLOT, 0))
            else:
                store = STORE_SLOT if i in outs and stage[i] == k else STORE_NONE
                body.append((i, S_COMPUTE, CHUNK_J, LAST_FALSE, store, 0))
        end: list[tuple[int, ...]] = []
        for i in nodes:
            if i in reductions and i in outs:
                end.append((i, S_STORE, 0, 0, STORE_ROW_SLOT, 0))
            elif i in last:
                end.append((i, S_COMPUTE, CHUNK_ZERO, LAST_TRUE,
                            row_store if i in outs else STORE_NONE, 0))
        out.append((_steps(body), _steps(end)))
    return tuple(out)
