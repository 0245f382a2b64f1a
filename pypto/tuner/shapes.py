"""``pypto tune --shapes``: more shapes of a dynamic kernel to tune than its script ran.

A dynamic kernel (``@pypto.kernel(dynamic_shape=True)``) takes each shape's schedules
from the nearest tuned shape in its bucket, so tuning one shape per bucket covers it.
Each ``--shapes`` option names dims of the kernel's tensor arguments and their sizes::

    [KERNEL:]ARG.DIM[,ARG.DIM...]=LO..HI     one size per bucket meeting [LO, HI]
    [KERNEL:]ARG.DIM[,ARG.DIM...]=N[,N...]   these sizes

``ARG`` is a parameter name (or position) of the kernel, ``DIM`` a dim index (negative
counts from the end); dims listed together take the same size (``a.1,b.0=64..4096`` for
the K of ``a @ b``). A bucket's size is its upper bound (``LO..HI`` with power-of-two
buckets gives 64, 128, ..., HI), the kernel's ``buckets=`` when it has them. Each call
of a dynamic kernel the script made is compiled again for every combination of the
options that apply to it (at most ``MAX_VARIANTS`` per call); ``KERNEL:`` limits an
option to the kernel of that name.

Example:
    >>> parse_shapes(["gemm:a.0=1..4096"])[0].dims
    (('a', 0),)
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pypto.tuner import TuneError

if TYPE_CHECKING:
    from pypto.compile.compiled import Compiled

MAX_VARIANTS = 256  # shapes per captured call: every one is tuned
_OPTION = re.compile(r"^(?:(?P<kernel>[A-Za-z_]\w*):)?(?P<dims>[^=]+)=(?P<values>.+)$")
_DIM = re.compile(r"^(?P<arg>[A-Za-z_]\w*|\d+)\.(?P<dim>-?\d+)$")
_RANGE = re.compile(r"^(?P<lo>\d+)\.\.(?P<hi>\d+)$")


@dataclass(frozen=True)
class ShapeOption:
    """One ``--shapes`` option: the dims it sets (argument, dim) and their sizes
    (``values``) or size range (``lo``, ``hi``: one size per bucket)."""

    text: str
    kernel: str | None
    dims: tuple[tuple[str, int], ...]
    values: tuple[int, ...] = ()
    lo: int = 0
    hi: int = 0

    def sizes(self, compiled: Compiled) -> list[int]:
        if self.values:
            return list(self.values)
        from pypto.compile.buckets import Buckets

        return (compiled.options.buckets or Buckets()).representatives(self.lo, self.hi)


def parse_shapes(options: list[str]) -> list[ShapeOption]:
    """The ``--shapes`` options, checked; ``TuneError`` names a bad one and the syntax."""
    return [_parse(text) for text in options]


def _parse(text: str) -> ShapeOption:
    syntax = ("use [KERNEL:]ARG.DIM[,ARG.DIM...]=LO..HI or =N[,N...], e.g. "
              "--shapes x.0=1..4096 or --shapes gemm:a.1,b.0=256,1024")
    m = _OPTION.match(text.replace(" ", ""))
    if m is None:
        raise TuneError(f"--shapes {text!r}: {syntax}")
    dims = []
    for part in m["dims"].split(","):
        d = _DIM.match(part)
        if d is None:
            raise TuneError(f"--shapes {text!r}: {part!r} is not ARG.DIM; {syntax}")
        dims.append((d["arg"], int(d["dim"])))
    rng = _RANGE.match(m["values"])
    if rng is not None:
        lo, hi = int(rng["lo"]), int(rng["hi"])
        if not 1 <= lo <= hi:
            raise TuneError(f"--shapes {text!r}: the range {lo}..{hi} must have "
                            "1 <= LO <= HI")
        return ShapeOption(text, m["kernel"], tuple(dims), lo=lo, hi=hi)
    try:
        values = tuple(int(v) for v in m["values"].split(","))
    except ValueError:
        raise TuneError(f"--shapes {text!r}: sizes must be positive ints; {syntax}") from None
    if any(v < 1 for v in values):
        raise TuneError(f"--shapes {text!r}: sizes must be positive ints; {syntax}")
    return ShapeOption(text, m["kernel"], tuple(dims), values=values)


def with_shapes(calls: list[Compiled], options: list[ShapeOption]) -> list[Compiled]:
    """``calls`` followed by each dynamic kernel call compiled for the shapes
    ``options`` give it (duplicates of a signature already there left out).

    Raises:
        TuneError: an option applies to no dynamic kernel that ran, or names an
            argument or dim the kernel does not have, or gives too many shapes.
    """
    if not options:
        return calls
    dynamic = [c for c in calls if c.options.dynamic_shape and c.for_shapes is not None]
    for option in options:
        if not any(_applies(option, c) for c in dynamic):
            ran = ", ".join(sorted({f"{c.name}({', '.join(c.graph.input_names)})"
                                    + ("" if c.options.dynamic_shape else " static")
                                    for c in calls})) or "none"
            raise TuneError(f"--shapes {option.text!r} applies to no dynamic kernel "
                            f"(@pypto.kernel(dynamic_shape=True)) the script ran; kernels "
                            f"that ran: {ran}")
    out, seen = list(calls), {_signature(c) for c in calls}
    for call in dynamic:
        for compiled in _variants(call, [o for o in options if _applies(o, call)]):
            if _signature(compiled) not in seen:
                seen.add(_signature(compiled))
                out.append(compiled)
    return out


def _applies(option: ShapeOption, call: Compiled) -> bool:
    return (option.kernel in (None, call.name)) and all(
        arg in call.graph.input_names or (arg.isdigit() and int(arg) < len(call.graph.inputs))
        for arg, _ in option.dims)


def _variants(call: Compiled, options: list[ShapeOption]) -> list[Compiled]:
    shapes = [list(call.graph.nodes[i].shape) for i in call.graph.inputs]
    names = call.graph.input_names
    sizes = [o.sizes(call) for o in options]
    count = 1
    for s in sizes:
        count *= len(s)
    if count > MAX_VARIANTS:
        raise TuneError(f"--shapes gives {call.name} {count} shapes to tune (at most "
                        f"{MAX_VARIANTS}): narrow the ranges or give fewer options")
    out = []
    for combo in itertools.product(*sizes):
        new = [list(s) for s in shapes]
        for option, size in zip(options, combo):
            for arg, dim in option.dims:
                index = int(arg) if arg.isdigit() else names.index(arg)
                rank = len(new[index])
                if not -rank <= dim < rank:
                    raise TuneError(f"--shapes {option.text!r}: {call.name}'s argument "
                                    f"{names[index]} has {rank} dim(s), no dim {dim}")
                new[index][dim] = size
        assert call.for_shapes is not None
        out.append(_compile(call, [tuple(s) for s in new], option_texts=options))
    return out


def _compile(call: Compiled, shapes: list[tuple[int, ...]], option_texts: Any) -> Compiled:
    """``call`` compiled for ``shapes``, for its workloads: these are about to be tuned, so
    that none has a tuned schedule yet is no news (no ``ScheduleFallbackWarning``)."""
    import warnings

    from pypto.errors import PyptoError, ScheduleFallbackWarning

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScheduleFallbackWarning)
            return call.for_shapes(shapes, call.target)  # type: ignore[misc]
    except PyptoError as e:
        given = " ".join(f"--shapes {o.text!r}" for o in option_texts)
        raise TuneError(f"{call.name} does not compile for argument shapes "
                        f"{[list(s) for s in shapes]} ({given}): {e}") from None


def _signature(c: Compiled) -> tuple[str, str, tuple[str, ...]]:
    return (c.name, c.target.key, tuple(wl.key for wl in c.workloads))
