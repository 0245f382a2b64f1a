"""How a target's memories and data paths appear in PTO instructions.

The ISA codes memories by role (``isa.Mem``); a target's ``[roles]`` name the memory
that plays each. ``MemoryMap`` is one target's side of that: the code of each of its
memories (that of the first role it plays, in ``ROLES`` order: a memory that holds the
left operand, the accumulator and the vector buffers is ``Mem.LEFT``), the name the
assembly prints for a code, and the pipe a COPY between two codes runs on (its data
path's ``pipe`` in the target file).

``isa_view()`` is the map of no particular target, for programs whose target is not a
packaged one: the assembly spells memories by role (``STAGE[...]``), and a COPY runs on
the pipe the packaged targets' data paths give its pair of codes (they agree on every
pair; ``tests/test_target_isa.py`` checks).

Example:
    >>> from pypto.targets import load_target
    >>> mlu = memory_map(load_target("mlu370"))
    >>> mlu.roles["vector"].name, mlu.names[Mem.LEFT], mlu.copy_pipe(Mem.GM, Mem.STAGE).name
    ('LEFT', 'NRAM', 'MTE2')
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from pypto.codegen.isa import ROLE, Mem, Pipe
from pypto.errors import TargetError
from pypto.targets import Target, available_targets, load_target

NO_PIPE = 255  # in ``copy_table``: no data path between the two memories


@dataclass(frozen=True, eq=False)
class MemoryMap:
    """One target's memories as PTO instructions code them.

    Attributes:
        target: the target's name; empty for ``isa_view()``.
        names: the memory name of each code the target has (what the assembly prints).
        roles: the code of each role's memory.
        copy_pipes: the pipe of a COPY from the first code to the second, for every data
            path of the target.
        copy_table: ``copy_pipes`` for compiled code: ``[src * len(Mem) + dst]`` is the
            pipe, ``NO_PIPE`` where there is no path.
    """

    target: str
    names: Mapping[Mem, str]
    roles: Mapping[str, Mem]
    copy_pipes: Mapping[tuple[Mem, Mem], Pipe]
    copy_table: bytes = field(init=False, repr=False)
    _codes: Mapping[str, Mem] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        table = bytearray([NO_PIPE]) * (len(Mem) * len(Mem))
        for (src, dst), pipe in self.copy_pipes.items():
            table[src * len(Mem) + dst] = pipe
        object.__setattr__(self, "copy_table", bytes(table))
        codes = {name.upper(): code for code, name in self.names.items()}
        object.__setattr__(self, "_codes", MappingProxyType(codes))

    def code(self, name: str) -> Mem | None:
        """The code of memory ``name`` (any case), or ``None`` if there is none."""
        return self._codes.get(name.upper())

    def name(self, code: int) -> str:
        """The name of memory ``code`` for a message: the target's, else the role's."""
        if code in self.names:
            return self.names[code]  # type: ignore[index]
        try:
            return Mem(code).name
        except ValueError:
            return f"memory code {code}"

    def copy_pipe(self, src: int, dst: int) -> Pipe:
        """The pipe of a COPY from memory ``src`` to ``dst``.

        Raises:
            ValueError: there is no data path between them.
        """
        try:
            return self.copy_pipes[(src, dst)]  # type: ignore[index]
        except (KeyError, TypeError):
            where = f" on {self.target}" if self.target else ""
            raise ValueError(f"no copy path from {self.name(src)} to {self.name(dst)}{where}"
                             ) from None

    def paths(self) -> str:
        """The COPY paths, as ``SRC->DST`` names (for messages)."""
        return ", ".join(f"{self.name(s)}->{self.name(d)}" for s, d in self.copy_pipes)


@functools.lru_cache(maxsize=32)
def memory_map(target: Target) -> MemoryMap:
    """How ``target``'s memories appear in instructions (built once per target)."""
    code_of: dict[str, Mem] = {}
    roles: dict[str, Mem] = {}
    for code, role in ROLE.items():
        roles[role] = code_of.setdefault(target.roles[role], code)
    pipes: dict[tuple[Mem, Mem], Pipe] = {}
    for path in target.paths.values():
        if path.src in code_of and path.dst in code_of:
            pipes[(code_of[path.src], code_of[path.dst])] = Pipe[path.pipe]
    names = {code: name for name, code in code_of.items()}
    return MemoryMap(target.name, MappingProxyType(names), MappingProxyType(roles),
                     MappingProxyType(pipes))


@functools.cache
def isa_view() -> MemoryMap:
    """The map of no particular target: memories by role name, COPY pipes from the
    packaged targets' data paths."""
    pipes: dict[tuple[Mem, Mem], Pipe] = {}
    for name in available_targets():
        for pair, pipe in memory_map(load_target(name)).copy_pipes.items():
            if pipes.setdefault(pair, pipe) != pipe:
                raise TargetError(f"target {name!r} runs a COPY from {pair[0].name} to "
                                  f"{pair[1].name} on {pipe.name}, another packaged target "
                                  f"on {pipes[pair].name}: the ISA view needs one pipe")
    return MemoryMap("", MappingProxyType({code: code.name for code in ROLE}),
                     MappingProxyType({role: code for code, role in ROLE.items()}),
                     MappingProxyType(pipes))


def for_target(name: str) -> MemoryMap:
    """The map of the packaged target called ``name``, else ``isa_view()``."""
    return memory_map(load_target(name)) if name in _packaged() else isa_view()


@functools.cache
def _packaged() -> frozenset[str]:
    return frozenset(available_targets())
