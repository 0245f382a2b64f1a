"""``@pypto.kernel``: trace a Python function once per input signature, compile, run.

A kernel caches what it compiled per input signature (shapes, dtypes, layouts, scalar
arguments) and target; a new signature re-traces and compiles (logged at debug level on
the ``pypto`` logger). A dynamic kernel (``dynamic_shape=True``) keeps its compiled
variants per shape bucket (``pypto.compile.buckets``: powers of two of each dim, or
``buckets=``), at most ``VARIANTS_PER_BUCKET`` of them each, most recently used kept,
and takes each variant's schedules from the nearest tuned shape in its bucket. A
kernel that returns nothing (``None``, or the ``...`` of a stub body) runs and returns
``None``.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pypto.compile.buckets import Buckets
from pypto.compile.compiled import CompileOptions, pack_outputs
from pypto.compile.listeners import listeners
from pypto.errors import KernelError, PyptoError
from pypto.frontend.context import current_context
from pypto.frontend.tensor import Tensor
from pypto.ir import dtypes
from pypto.ir.dtypes import DType
from pypto.ir.fusion import FusePolicy
from pypto.ir.graph import INLINE_ASM, Graph
from pypto.ir.layouts import check_layout

if TYPE_CHECKING:
    from pypto.compile.compiled import Compiled
    from pypto.ir.graph import Node
    from pypto.targets import Target

log = logging.getLogger("pypto")
VARIANTS_PER_BUCKET = 8  # compiled exact-shape variants a dynamic kernel keeps per bucket


@dataclass(frozen=True)
class Spec:
    """A placeholder for ``kernel.lower``: the shape, dtype and layout of an argument."""

    shape: tuple[int, ...]
    dtype: DType
    layout: str = "ND"


def spec(shape: Sequence[int], dtype: Any, layout: str | None = None) -> Spec:
    """Describe an argument without data, for ``kernel.lower(pypto.spec(...), ...)``."""
    from pypto.frontend.tensor import _shape_arg

    shp = _shape_arg(shape)
    return Spec(shp, dtypes.as_dtype(dtype), check_layout(layout, len(shp)))


class Kernel:
    """A traced NPU kernel. Use as ``@pypto.kernel`` or ``@pypto.kernel(fuse=..., ...)``."""

    def __init__(self, fn: Callable[..., Any], *, fuse: Any = None, dynamic_shape: bool = False,
                 buckets: Any = None, target: str | None = None, schedule: Any = None,
                 name: str | None = None) -> None:
        if not callable(fn):
            raise KernelError(f"@pypto.kernel needs a function, got {type(fn).__name__}")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "kernel")
        self.fuse = FusePolicy.from_option(fuse)
        self.dynamic_shape = bool(dynamic_shape)
        if buckets is not None and not self.dynamic_shape:
            raise KernelError(f"kernel {self.name!r}: buckets= groups the shapes of a dynamic "
                              "kernel; pass dynamic_shape=True with it")
        self.buckets = Buckets.from_option(buckets) if self.dynamic_shape else None
        self.target_name = target
        self.schedule = schedule
        self.options = CompileOptions(self.fuse, schedule, self.dynamic_shape, self.buckets)
        # (signature or bucket, target key) -> compiled; a dynamic kernel's entries are
        # the bucket's variants by exact signature, least recently used first
        self._cache: dict[tuple, Compiled] = {}
        self._variants: dict[tuple, OrderedDict[tuple, Compiled]] = {}
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"<pypto.kernel {self.name}>"

    # -- signatures and tracing -----------------------------------------------------------
    def _signature(self, args: tuple[Any, ...]) -> tuple:
        sig = []
        for i, a in enumerate(args):
            if isinstance(a, (Tensor, Spec)):
                sig.append(("T", a.shape, a.dtype.name, a.layout))
            elif isinstance(a, np.ndarray):
                raise KernelError(f"{self.name}: argument {i} is a NumPy array; wrap it with "
                                  "pypto.tensor(array, dtype=...)")
            else:
                try:
                    hash(a)
                except TypeError:
                    raise KernelError(f"{self.name}: argument {i} ({type(a).__name__}) is "
                                      "neither a tensor nor a hashable constant") from None
                sig.append(("S", type(a).__name__, a))
        return tuple(sig)

    def trace(self, *args: Any) -> tuple[Graph, Any]:
        """Run the function on symbolic tensors; return the graph and the output structure."""
        graph = Graph(name=self.name)
        names = _param_names(self.fn, len(args))
        sym_args = []
        for i, a in enumerate(args):
            if isinstance(a, (Tensor, Spec)):
                node = graph.add("input", (), {"index": len(graph.inputs)}, a.shape, a.dtype,
                                 a.layout)
                graph.inputs.append(node.id)
                graph.input_names.append(names[i])
                sym_args.append(Tensor(a.shape, a.dtype, a.layout, graph=graph, node=node.id))
            else:
                sym_args.append(a)
        from pypto.frontend.ops.trace import tracing

        try:
            with tracing(graph):
                result = self.fn(*sym_args)
        except PyptoError:
            raise
        if result is None and any(n.op == INLINE_ASM for n in graph.nodes):
            outputs, structure = [], None   # it runs raw blocks for what they do
        else:
            outputs, structure = _flatten_outputs(self.name, result, _is_stub(self.fn))
        for t in outputs:
            if t._graph is not graph:
                from pypto.frontend.ops.trace import _node_id

                if t.is_symbolic:
                    raise KernelError(f"{self.name}: returned a tensor from another trace")
                t = Tensor(t.shape, t.dtype, graph=graph, node=_node_id(graph, t))
            graph.outputs.append(t._node)  # type: ignore[arg-type]
        graph.sealed = True
        return graph, structure

    def lower(self, *args: Any, target: str | Target | None = None) -> Compiled:
        """Compile for ``args`` (tensors or ``pypto.spec`` placeholders) without running.

        Example:
            >>> import pypto
            >>> k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
            >>> c = k.lower(pypto.spec((64, 64), "float16"), pypto.spec((64, 64), "float16"))
            >>> c.sources
            ['default']
        """
        tgt = _resolve_target(target or self.target_name)
        sig = self._signature(args)
        compiled = self._cached(sig, tgt)
        if compiled is None:
            from pypto.compile.driver import compile_graph

            graph, structure = self.trace(*args)
            compiled = compile_graph(graph, structure, tgt, kernel_name=self.name,
                                     options=self.options, io=TENSOR_IO)
            compiled.for_shapes = functools.partial(self._for_shapes, sig)
            self._keep(sig, tgt, compiled)
        return compiled

    def _bucket_of(self, sig: tuple) -> tuple:
        assert self.buckets is not None
        return tuple(("T", self.buckets.key(e[1]), *e[2:]) if e[0] == "T" else e for e in sig)

    def _cached(self, sig: tuple, tgt: Target) -> Compiled | None:
        """The compiled variant of ``sig`` on ``tgt``, if kept; a miss is logged."""
        if self.buckets is None:
            hit = self._cache.get((sig, tgt.key))
            if hit is None:
                before = sum(1 for _, t in self._cache if t == tgt.key)
                log.debug("kernel %r: %s input signature %s on %s; tracing%s",
                          self.name, "new" if before else "first", _describe(sig), tgt.name,
                          f" again ({before} signature(s) compiled before; a kernel that "
                          "serves many shapes can be @pypto.kernel(dynamic_shape=True))"
                          if before else "")
            return hit
        bucket = self._bucket_of(sig)
        variants = self._variants.get((bucket, tgt.key))
        if variants is not None and sig in variants:
            variants.move_to_end(sig)
            return variants[sig]
        log.debug("kernel %r (dynamic): input signature %s on %s, bucket %s of %s; "
                  "tracing a variant (%d kept in this bucket)", self.name, _describe(sig),
                  tgt.name, _describe(bucket, bucket=True), self.buckets.describe(),
                  len(variants or ()))
        return None

    def _keep(self, sig: tuple, tgt: Target, compiled: Compiled) -> None:
        if self.buckets is None:
            self._cache[(sig, tgt.key)] = compiled
            return
        variants = self._variants.setdefault((self._bucket_of(sig), tgt.key), OrderedDict())
        variants[sig] = compiled
        while len(variants) > VARIANTS_PER_BUCKET:
            variants.popitem(last=False)

    def _for_shapes(self, sig: tuple, shapes: Sequence[tuple[int, ...]],
                    target: Target) -> Compiled:
        """This kernel compiled for the call of signature ``sig`` with its tensor
        arguments reshaped to ``shapes`` (for tuning other shapes of a dynamic kernel)."""
        tensors = iter(shapes)
        args = [Spec(tuple(next(tensors)), dtypes.as_dtype(e[2]), e[3]) if e[0] == "T"
                else e[2] for e in sig]
        return self.lower(*args, target=target)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from pypto.frontend.ops.trace import _symbolic_graph

        if kwargs:
            raise KernelError(f"{self.name}: pass tensors positionally; keyword arguments "
                              f"({', '.join(kwargs)}) are not supported")
        if _symbolic_graph(args) is not None:  # called inside another kernel: inline it
            return self.fn(*args)
        if any(isinstance(a, Spec) for a in args):
            raise KernelError(f"{self.name}: pypto.spec placeholders have no data; call "
                              f"{self.name}.lower(...) to compile without running")
        ctx = current_context()
        tensors = [a for a in args if isinstance(a, Tensor)]
        if ctx.device_type == "cpu":
            graph, structure = self.trace(*args)
            from pypto.compile.compiled import reference_outputs

            outs = reference_outputs(graph, [t.numpy() for t in tensors],
                                     _resolve_target(self.target_name or ctx.target), self.name)
            return pack_outputs(graph, structure, outs, TENSOR_IO)
        compiled = self.lower(*args, target=self.target_name or ctx.target)
        if not compiled.programs:  # nothing to run on the device (it returns nothing)
            return compiled(*tensors)
        observers = listeners()
        # A listener that keeps kernels off the device (capture mode) takes the call
        # alone: there is no device run for the others (a profiler) to see.
        off_device = [o for o in observers if not o.runs_on_device]
        for observer in off_device or observers:
            observer.kernel_called(compiled)
        if off_device:
            return compiled.run_reference(*tensors)
        return compiled(*tensors)


class _TensorIO:
    """PyPTO tensors in and out of a ``Compiled`` (which works on arrays)."""

    def to_array(self, value: Any) -> np.ndarray | None:
        if isinstance(value, Tensor) and not value.is_symbolic:
            return value._data
        return None

    def from_array(self, array: np.ndarray, node: Node) -> Tensor:
        return Tensor(array.shape, dtypes.as_dtype(node.dtype), node.layout, data=array)


TENSOR_IO = _TensorIO()


def kernel(fn: Callable[..., Any] | None = None, *, fuse: Any = None, dynamic_shape: bool = False,
           buckets: Any = None, target: str | None = None, schedule: Any = None) -> Any:
    """Decorate a function of tensors to make it an NPU kernel.

    Example:
        >>> import pypto
        >>> @pypto.kernel
        ... def gemm(A, B):
        ...     return pypto.matmul(A, B)

    Options: ``fuse`` (``{'conv': 'relu'}`` names the producers that may take elementwise
    tails and forces those fusions; ``False`` disables fusion; by default each optional
    fusion is a schedule knob the tuner decides), ``dynamic_shape`` (the kernel serves
    many shapes: compiled variants kept per shape bucket, schedules from the nearest
    tuned shape in the bucket), ``buckets`` (with ``dynamic_shape``: the buckets' upper
    bounds, e.g. ``[64, 256, 1024]``; default powers of two), ``target`` (a target name,
    overriding the context's), ``schedule`` (an explicit schedule: a mapping of knobs for
    a one-workload kernel, or a list with one entry (or None) per workload).

    Example (a stub body returns nothing, so the kernel returns None):
        >>> @pypto.kernel(dynamic_shape=True)
        ... def flexible_op(x):
        ...     ...
        >>> flexible_op(pypto.ones((3, 5), dtype="float32")) is None
        True
    """
    def wrap(f: Callable[..., Any]) -> Kernel:
        return Kernel(f, fuse=fuse, dynamic_shape=dynamic_shape, buckets=buckets,
                      target=target, schedule=schedule)

    if fn is not None:
        return wrap(fn)
    return wrap


def _resolve_target(target: Any) -> Target:
    from pypto.targets import Target, load_target

    if isinstance(target, Target):
        return target
    if target is None:
        return current_context().target
    return load_target(target)


def _param_names(fn: Callable[..., Any], n: int) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    names = [p if p.isidentifier() else f"in{i}" for i, p in enumerate(params[:n])]
    return names + [f"in{i}" for i in range(len(names), n)]


def _stub() -> None: ...


def _is_stub(fn: Callable[..., Any]) -> bool:
    """Whether ``fn``'s body does nothing (``...`` or ``pass``, as a placeholder)."""
    code = getattr(fn, "__code__", None)
    return code is not None and code.co_code == _stub.__code__.co_code


def _describe(sig: tuple, bucket: bool = False) -> str:
    """A signature for a log line, ``float16[64, 128], 2.0``, or a bucket of one:
    ``float16[<=64, <=128], 2.0``."""
    def dims(shape: tuple[int, ...]) -> str:
        return ", ".join(f"<={d}" if bucket else str(d) for d in shape)

    return ", ".join(f"{e[2]}[{dims(e[1])}]" if e[0] == "T" else repr(e[2]) for e in sig)


def _flatten_outputs(name: str, result: Any, stub: bool = False) -> tuple[list[Tensor], Any]:
    if isinstance(result, Tensor):
        return [result], "single"
    if isinstance(result, (tuple, list)) and result and all(isinstance(r, Tensor) for r in result):
        return list(result), type(result)
    if result is None and stub:
        raise KernelError(f"kernel {name!r} has an empty body (`...` or `pass`): write it, "
                          "returning the result tensor(s), e.g. `return pypto.relu(x)`")
    if result is None or result is Ellipsis:
        raise KernelError(f"kernel {name!r} returned {result!r} and runs no raw block, so it "
                          "would compute nothing; return the result tensor(s), e.g. "
                          "`return pypto.matmul(A, B)`")
    raise KernelError(f"kernel {name!r} returned {type(result).__name__}; a kernel must return "
                      "a PyPTO tensor, a tuple/list of tensors, or nothing when it runs raw blocks")
