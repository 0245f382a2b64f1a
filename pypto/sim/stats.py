"""Instruction statistics of a core's stream: per-pipe counts and per-path COPY bytes.

``program_stats`` runs the compiled ``pypto.sim._stats``, or ``python_program_stats``,
the plain-NumPy definition, when ``PYPTO_IMPL=python`` asks for it or the extension is
not built (see ``pypto.native``).

Example:
    >>> from pypto.codegen.isa import Mem, Op, Pipe
    >>> from pypto.codegen.program import Operand, StreamBuilder
    >>> from pypto.ir.dtypes import float16
    >>> stream = StreamBuilder()
    >>> dst, src = Operand(Mem.STAGE, 0, 16, 16, 16), Operand(Mem.GM, 0, 16, 16, 16, gm=0)
    >>> _ = stream.emit(Op.COPY, dst, src, dtype=float16)
    >>> counts, paths = program_stats(stream.array())
    >>> int(counts[Pipe.MTE2]), int(paths[Mem.GM, Mem.STAGE])
    (1, 512)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pypto import native
from pypto.codegen.isa import INSTR, Mem, Op, Pipe
from pypto.ir.dtypes import BY_CODE

NUM_PIPES = len(Pipe)
NUM_MEMS = len(Mem)
# Element size in bytes, indexed by dtype code (the extension has the same table in C).
ITEMSIZE_BY_CODE = np.array([BY_CODE[code].itemsize for code in range(len(BY_CODE))],
                            dtype=np.int64)

Stats = tuple[np.ndarray, np.ndarray]


def python_program_stats(instr: np.ndarray) -> Stats:
    """The reference: counts of instructions per pipe and COPY bytes per memory path.

    Args:
        instr: a 1-D array of ``pypto.codegen.isa.INSTR`` records (one core's stream).

    Returns:
        ``(per_pipe_counts, per_path_bytes)``: int64 arrays of shape ``(len(Pipe),)``
        and ``(len(Mem), len(Mem))``. ``per_path_bytes[src, dst]`` sums
        ``d_rows * d_cols * itemsize``
        over the COPY instructions from memory ``src`` (``a_mem``) to ``dst``
        (``d_mem``).

    Raises:
        TypeError: ``instr`` is not an ``INSTR`` array.
        ValueError: a pipe, or a COPY's memory or dtype code, is out of range.
    """
    _check_type(instr)
    _check_ranges(instr)
    counts = np.bincount(instr["pipe"], minlength=NUM_PIPES).astype(np.int64)
    copies = instr[instr["op"] == Op.COPY]
    nbytes = (copies["d_rows"].astype(np.int64) * copies["d_cols"].astype(np.int64)
              * ITEMSIZE_BY_CODE[copies["dtype"]])
    paths = np.zeros((NUM_MEMS, NUM_MEMS), dtype=np.int64)
    np.add.at(paths, (copies["a_mem"], copies["d_mem"]), nbytes)
    return counts, paths


def program_stats(instr: np.ndarray) -> Stats:
    """Same result as ``python_program_stats``, from the Cython extension when built."""
    _check_type(instr)  # the extension checks ranges itself, in its loop
    return _implementation()(instr)


def _check_type(instr: np.ndarray) -> None:
    if not isinstance(instr, np.ndarray) or instr.dtype != INSTR or instr.ndim != 1:
        raise TypeError(
            f"instr must be a 1-D array of pypto.codegen.isa.INSTR records, got "
            f"{type(instr).__name__} {getattr(instr, 'dtype', '')}; build one with "
            f"StreamBuilder.array()"
        )


def _check_ranges(instr: np.ndarray) -> None:
    is_copy = instr["op"] == Op.COPY
    bad = (instr["pipe"] >= NUM_PIPES) | (is_copy & (
        (instr["a_mem"] >= NUM_MEMS) | (instr["d_mem"] >= NUM_MEMS)
        | (instr["dtype"] >= len(ITEMSIZE_BY_CODE))))
    if bad.any():
        i = int(np.argmax(bad))
        row = instr[i]
        raise ValueError(
            f"instruction {i} is out of range (pipe={row['pipe']}, a_mem={row['a_mem']}, "
            f"d_mem={row['d_mem']}, dtype={row['dtype']}): pipes are 0..{NUM_PIPES - 1}, "
            f"memories 0..{NUM_MEMS - 1} and dtype codes 0..{len(ITEMSIZE_BY_CODE) - 1}, see "
            "pypto.codegen.isa"
        )


def _implementation() -> Callable[[np.ndarray], Stats]:
    ext = native.extension("pypto.sim._stats", stacklevel=3)
    return ext.program_stats if ext is not None else python_program_stats
