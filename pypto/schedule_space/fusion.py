"""Fusion as a knob: whether a fused workload runs as one pass or as two.

Where partition fused an optional pair, the workload keeps its key and its space gets
an axis that says whether the fusion happens (``pypto.ir.split`` builds the passes):

* ``fuse_tail`` (matmul, conv2d with an elementwise tail): ``True`` computes the tail
  on each output block as it leaves the accumulator (in UB, or in FIX for a ReLU);
  ``False`` stores the cube result to GM and runs the tail as a vector pass over it,
  after all cores finish (the tail then gets its own default tiling; a matmul may then
  split K, since partial sums can add up in GM before the tail reads them).
* ``split_at`` (vector chains): 0 runs the chain in one pass; ``n`` runs its first
  ``n`` ops as one pass that stores the values the rest reads, then the rest, both
  with the schedule's tiling (UB then needs only the larger pass's buffers). It is
  offered where UB is tight (``ub_pressure``); elsewhere its one choice is 0.

A kernel that forces a fusion (``@pypto.kernel(fuse={'conv': 'relu'})``) marks its
workload (``pypto.ir.fusion.FORCED_ATTR``) and the axis offers ``True`` only. Records
written before these axes existed were fused: ``neutral`` completes them so.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from pypto.ir.fusion import FORCED_ATTR
from pypto.ir.split import crossing_ok, op_nodes
from pypto.schedule_space.chain import analyze, footprint
from pypto.schedule_space.space import Axis, Constraint

if TYPE_CHECKING:
    from pypto.ir.workload import Workload
    from pypto.targets import Target

CUBE_OPS = ("matmul", "conv2d_nhwc", "conv2d_nchw")
AXES = ("fuse_tail", "split_at")
SHARE_ROWS = 64  # rows of one core's share that a one-pass chain should hold (at most)


def forced(wl: Workload) -> bool:
    """Whether the kernel asked for this workload's fusion (``fuse=`` names it)."""
    return wl.attr(FORCED_ATTR[0]) == FORCED_ATTR[1]


def has_tail(wl: Workload) -> bool:
    """A cube workload (matmul, conv2d) with elementwise ops after the cube op."""
    ops = [wl.nodes[i].op for i in op_nodes(wl)]
    return wl.family in ("matmul", "conv2d") and len(ops) > 1 and ops[0] in CUBE_OPS


def split_points(wl: Workload) -> tuple[int, ...]:
    """Where a vector chain may split: op counts ``n`` such that the first ``n`` ops
    can run as their own pass (``pypto.ir.split.crossing_ok``)."""
    if wl.family != "vector":
        return ()
    return tuple(n for n in range(1, len(op_nodes(wl))) if crossing_ok(wl, n))


def ub_pressure(wl: Workload, target: Target) -> bool:
    """Whether a vector chain in one pass cannot hold one core's share of the rows
    (whole rows, double-buffered) in UB: only then can splitting it pay (each pass
    then fits bigger tiles); otherwise it only adds a round trip through GM."""
    chain = analyze(wl)
    rows = min(math.ceil(chain.rows / target.vector_cores), SHARE_ROWS)
    ub = target.role("vector")
    return footprint(chain, rows, chain.cols, 2, ub.alignment) > ub.capacity


def axes(wl: Workload, target: Target) -> list[Axis]:
    """The fusion axis of ``wl``'s space on ``target`` (none when nothing could be
    unfused). It goes first, so that the other axes' checks may read it."""
    if has_tail(wl):
        choices = (True,) if forced(wl) else (True, False)
        return [Axis("fuse_tail", choices, "compute the elementwise tail on each block "
                     "(True) or in a vector pass of its own after the cube op (False)",
                     "the kernel forces this fusion (fuse=...)" if forced(wl) else "")]
    points = split_points(wl)
    if not points:
        return []
    doc = ("0: the chain in one pass; n: its first n ops in a pass of their own, then the "
           "rest (values cross via GM)")
    if ub_pressure(wl, target):
        return [Axis("split_at", (0, *points), doc)]
    return [Axis("split_at", (0,), doc, f"the whole chain fits {target.role('vector').name} "
                 "with one core's rows double-buffered, so a split would only add GM "
                 "traffic; use split_at=0")]


def neutral(wl: Workload) -> dict[str, Any]:
    """The fused values of the fusion axes ``wl`` has on any target (old records were
    fused)."""
    if has_tail(wl):
        return {"fuse_tail": True}
    return {"split_at": 0} if split_points(wl) else {}


def unfused(s: Any) -> bool:
    """Whether the cube schedule ``s`` runs its tail as a pass of its own."""
    return s.get("fuse_tail", True) is False


def head_ops(wl: Workload, s: Any) -> int:
    """How many ops the first pass computes under ``s`` (0: one fused pass)."""
    if has_tail(wl):
        return 1 if unfused(s) else 0
    return int(s.get("split_at", 0))


def unfused_tail_constraint(epilogue_axis: bool = False) -> Constraint:
    """With the tail in its own pass, the epilogue knobs do not apply: they keep their
    fused defaults (UB depth 2, epilogue on the vector unit), so that the space holds
    no two points with the same program."""
    def check(k: Any) -> list[str]:
        if not unfused(k):
            return []
        out = []
        if k["ub_depth"] != 2:
            out.append(f"ub_depth={k['ub_depth']} does not apply with fuse_tail=False "
                       "(the tail runs in its own pass); use ub_depth=2")
        if k.get("epilogue", "VEC") != "VEC":
            out.append(f"epilogue={k['epilogue']!r} does not apply with fuse_tail=False; "
                       "use 'VEC'")
        return out
    return Constraint(("fuse_tail", "ub_depth", *(("epilogue",) if epilogue_axis else ())),
                      check)
