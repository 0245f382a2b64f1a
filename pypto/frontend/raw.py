"""Raw mode: PTO assembly written inside a kernel, between Python-style ops.

``with pypto.raw():`` opens the part of a kernel its author programs by hand;
``pypto.inline_asm(code, x=t, outputs={'out': pypto.spec(shape, dtype)})`` inside it
adds a raw block to the kernel's graph. The code is PTO assembly, the grammar
``pypto asm`` prints (``pypto.codegen.asm``), plus registers: ``GM[x]`` is tensor ``t``
(read-only), ``GM[out]`` a new tensor the block writes and returns, for later ops to
read. Instructions before any ``.core N`` line run on core 0.

The block runs as written: it is not tuned (its source is ``raw``), and it is executed,
timed and profiled like any workload. Synchronizing its pipes is its author's job:
races are ``HazardWarning``\\ s naming the lines. Everything else that is wrong with it
is an error naming the line of ``code`` (``pypto.compile.raw``).

Example:
    >>> import numpy as np, pypto
    >>> @pypto.kernel
    ... def plus_one(x):
    ...     with pypto.raw():
    ...         return pypto.inline_asm('''
    ...             COPY.F32 UB[0x0:1x64,64,1], GM[x][0:1x64,64,1]
    ...             SET_FLAG MTE2, VEC, 0
    ...             WAIT_FLAG MTE2, VEC, 0
    ...             VADDS.F32 UB[0x0:1x64,64,1], UB[0x0:1x64,64,1], #1.0
    ...             SET_FLAG VEC, MTE3, 0
    ...             WAIT_FLAG VEC, MTE3, 0
    ...             COPY.F32 GM[out][0:1x64,64,1], UB[0x0:1x64,64,1]
    ...         ''', x=x, outputs={"out": pypto.spec((64,), "float32")})
    >>> float(plus_one(pypto.zeros((64,), dtype="float32")).numpy()[0])
    1.0
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

from pypto.errors import KernelError
from pypto.frontend.kernel import Spec
from pypto.frontend.ops.trace import _node_id, current_trace
from pypto.frontend.tensor import Tensor
from pypto.ir.dtypes import bool_
from pypto.ir.graph import ASM_OUTPUT, INLINE_ASM
from pypto.ir.raw import RawSpec

_RAW_DEPTH: ContextVar[int] = ContextVar("pypto_raw_depth", default=0)
_NAME = re.compile(r"[A-Za-z_][\w.]*")


@contextlib.contextmanager
def raw() -> Iterator[None]:
    """Open raw mode inside a ``@pypto.kernel`` function: the ``pypto.inline_asm`` blocks
    inside run as written, their synchronization their author's (see the module)."""
    if current_trace() is None:
        raise KernelError("pypto.raw() opens raw mode inside a @pypto.kernel function; "
                          "call it there (`with pypto.raw(): pypto.inline_asm(code)`)")
    token = _RAW_DEPTH.set(_RAW_DEPTH.get() + 1)
    try:
        yield
    finally:
        _RAW_DEPTH.reset(token)


def inline_asm(code: str, *, outputs: Mapping[str, Spec] | None = None,
               budget: int | None = None, **bindings: Any) -> Any:
    """Add a raw block to the kernel being traced (inside ``with pypto.raw():``).

    Args:
        code: PTO assembly (see ``pypto.codegen.asm``); line numbers in errors and
            warnings count from its first line.
        outputs: the tensors the block writes, by the name its code gives them
            (``GM[out]``), each a ``pypto.spec(shape, dtype)``.
        budget: how many instructions the block's cores may issue together, loops
            included, before it is called runaway (by default
            ``pypto.sim.scalar.DEFAULT_BUDGET``, 2**18).
        **bindings: tensors the block reads, by the name its code gives them (``GM[x]``).

    Returns:
        The declared output tensor, a tuple of them in declared order, or None.
    """
    graph = current_trace()
    if graph is None:
        raise KernelError("pypto.inline_asm() adds NPU assembly to a kernel: call it inside "
                          "a @pypto.kernel function, in `with pypto.raw():`")
    if _RAW_DEPTH.get() == 0:
        raise KernelError("pypto.inline_asm() goes inside `with pypto.raw():`, which says the "
                          "block runs as written, its synchronization its author's")
    if not isinstance(code, str):
        raise KernelError(f"pypto.inline_asm() takes the assembly as a str, got "
                          f"{type(code).__name__}")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                               or budget < 1):
        raise KernelError(f"pypto.inline_asm(budget=...) must be a positive int, got {budget!r}")
    declared = _outputs(outputs or {}, bindings)
    inputs = []
    for name, value in bindings.items():
        if not isinstance(value, Tensor):
            raise KernelError(f"pypto.inline_asm(): {name}= must be a PyPTO tensor (GM[{name}] "
                              f"names it), got {type(value).__name__}")
        if value.is_symbolic and value._graph is not graph:
            raise KernelError(f"pypto.inline_asm(): {name}= is a tensor of another kernel trace")
        inputs.append(_node_id(graph, value))
    spec = RawSpec(code, tuple(bindings), declared, budget)
    block = graph.add(INLINE_ASM, tuple(inputs), spec.attrs(), (), bool_)
    results = []
    for index, (name, spec_) in enumerate((outputs or {}).items()):
        node = graph.add(ASM_OUTPUT, (block.id,), {"index": index, "name": name},
                         spec_.shape, spec_.dtype, spec_.layout)
        results.append(Tensor(node.shape, spec_.dtype, spec_.layout, graph=graph, node=node.id))
    if not results:
        return None
    return results[0] if len(results) == 1 else tuple(results)


def _outputs(outputs: Mapping[str, Spec], bindings: Mapping[str, Any]
             ) -> tuple[tuple[str, tuple[int, ...], str], ...]:
    if not isinstance(outputs, Mapping):
        raise KernelError("pypto.inline_asm(outputs=...) is a dict of name -> "
                          "pypto.spec(shape, dtype)")
    declared = []
    for name, spec in outputs.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise KernelError(f"pypto.inline_asm(): output name {name!r} must be a name the "
                              "code can write as GM[NAME]")
        if name in bindings:
            raise KernelError(f"pypto.inline_asm(): {name!r} is both bound to an input and "
                              "declared as an output; give the output another name")
        if not isinstance(spec, Spec):
            raise KernelError(f"pypto.inline_asm(): output {name!r} must be a "
                              f"pypto.spec(shape, dtype), got {type(spec).__name__}")
        if 0 in spec.shape:
            raise KernelError(f"pypto.inline_asm(): output {name!r} has an empty shape "
                              f"{list(spec.shape)}")
        declared.append((name, spec.shape, spec.dtype.name))
    return tuple(declared)
