"""The fusion policy: which producers may take elementwise tails, and which fusions the
kernel forces (plain data; the partitioner reads it, ``@pypto.kernel(fuse=...)``
builds it).

Without ``fuse=``, every fusion partition finds is optional: the fused workload's
schedule space has an axis that turns it off (``pypto.schedule_space.fusion``), which
``pypto tune`` searches. ``fuse={'conv': 'relu'}`` lets only the named producers take
tails and forces the named pairs: their workloads are marked (``FORCED_ATTR``, so the
space offers the fused schedules only), and a pair that cannot fuse in the kernel is
an error naming the ops (``check_forced``)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pypto.errors import KernelError
from pypto.ir.graph import ELEMENTWISE, Node

# Op families a fuse= pattern may name, with their aliases.
_FUSE_NAMES = {"conv": "conv2d", "conv2d": "conv2d", "matmul": "matmul", "gemm": "matmul"}
# Graph ops of each producer family.
_PRODUCER_OPS = {"conv2d": ("conv2d", "conv2d_nhwc", "conv2d_nchw"), "matmul": ("matmul",)}
#: The workload attribute of a fusion the kernel forces.
FORCED_ATTR = ("fusion", "forced")


@dataclass(frozen=True)
class FusePolicy:
    """Which producer ops may take elementwise tails (``None``: all; empty: none)."""

    epilogue_producers: frozenset[str] | None = None
    vector_chains: bool = True
    forced: frozenset[tuple[str, str]] = frozenset()  # (producer family, consumer op)
    option: str = ""                                  # the fuse= value, for messages

    def forces(self, family: str, ops: Collection[str]) -> bool:
        """Whether a ``family`` workload computing ``ops`` is a fusion the kernel forces."""
        return any((family, op) in self.forced for op in ops)

    @staticmethod
    def from_option(fuse: Any) -> FusePolicy:
        if fuse is None or fuse is True:
            return FusePolicy()
        if fuse is False:
            return FusePolicy(frozenset(), vector_chains=False)
        if not isinstance(fuse, Mapping):
            raise KernelError(f"fuse= must be a dict like {{'conv': 'relu'}}, True or False; "
                              f"got {fuse!r}")
        producers, forced = set(), set()
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
            forced.update((_FUSE_NAMES[producer], c) for c in consumers)
        return FusePolicy(frozenset(producers), forced=frozenset(forced), option=repr(fuse))


def check_forced(policy: FusePolicy, nodes: Mapping[int, Node], placed: Mapping[int, str],
                 base: Mapping[int, int]) -> None:
    """Raise ``KernelError`` for a pair of ``policy.forced`` that no workload fuses.

    ``nodes``: the live graph nodes by id; ``placed``: the family of the workload each
    computed node joined; ``base``: the node whose result each node's value views."""
    for family, op in sorted(policy.forced):
        if any(n.op == op and placed.get(i) == family for i, n in nodes.items()):
            continue
        producers = [i for i, n in nodes.items() if n.op in _PRODUCER_OPS[family]]
        consumers = [n for n in nodes.values() if n.op == op]
        if not producers:
            why = f"the kernel has no {family}"
        elif not consumers:
            why = f"the kernel has no {op}"
        else:
            why = _why_not(family, op, nodes, producers, consumers, base)
        raise KernelError(f"fuse={policy.option} asks to fuse {op} into {family}, but {why}; "
                          f"remove the pair from fuse= (or fuse=None to let the tuner decide)")


def _why_not(family: str, op: str, nodes: Mapping[int, Node], producers: list[int],
             consumers: list[Node], base: Mapping[int, int]) -> str:
    """Why no ``op`` joined a ``family`` workload, for the error message."""
    for n in consumers:
        for operand in n.inputs:
            src = base.get(operand, operand)
            if src in producers:
                shape = list(nodes[src].shape)
                if tuple(n.shape) != nodes[src].shape and len(n.shape) == len(shape):
                    return (f"the {op} of shape {list(n.shape)} reads the {family} result "
                            f"of shape {shape} through a view (an epilogue computes on the "
                            f"{family}'s output elements as they are)")
                return (f"the {op} reading the {family} result of shape {shape} cannot join "
                        f"its workload (its shape {list(n.shape)}, or an operand computed "
                        f"from the {family}'s own result, keeps it apart)")
    return (f"no {op} reads a {family} result or an elementwise chain on one (an epilogue "
            f"starts at the {family}'s output)")
