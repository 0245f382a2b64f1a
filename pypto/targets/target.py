"""Hardware targets: a TOML descriptor file, read into a frozen ``Target``.

Hardware is data. Each target is one file, ``pypto/targets/<name>.toml``, with the
source of every number in a comment. Code asks a target for memories by *role*
(``stage``, ``left``, ``right``, ``acc``, ``vector``, ``global``) and for data paths by
``(src, dst)``, never ``if target == ...``; so a target with other memory names is a
new file, not a new code path.

A descriptor is validated when it is read: a malformed file raises ``TargetError``
naming the file and the field, never a ``KeyError`` from in here.

Example:
    >>> from pypto.targets import load_target
    >>> t = load_target("ascend910b")
    >>> t.role("left").capacity, t.fractal("float16"), t.path("GM", "L1").pipe
    (65536, (16, 16, 16), 'MTE2')
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import pathlib
import re
import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pypto.errors import TargetError

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent

#: What code asks memories for. ``global`` is the off-chip memory every kernel reads;
#: ``registers`` holds raw mode's vector registers. PTO instructions code memories by
#: role, in this order (``pypto.codegen.isa.Mem``): a memory no role names is never used.
ROLES = ("global", "stage", "left", "right", "acc", "vector", "registers")

#: Pipe names a data path may run on; the same names as ``pypto.codegen.isa.Pipe``.
PIPES = ("SCALAR", "MTE2", "MTE1", "CUBE", "FIX", "VEC", "MTE3")

SECTIONS = ("target", "memories", "roles", "cube", "vector", "scalar", "sync", "l2", "gm",
            "paths")

# The scalar fields: (section, key in the file, Target attribute, kind). Kinds: "text",
# "int>0", "int>=0", "num>0", "num>=0" (a number is an integer or a float).
_SCALARS = (
    ("target", "name", "name", "text"),
    ("target", "vendor", "vendor", "text"),
    ("target", "description", "description", "text"),
    ("target", "clock_ghz", "clock_ghz", "num>0"),
    ("target", "cube_cores", "cube_cores", "int>0"),
    ("target", "vector_cores", "vector_cores", "int>0"),
    ("target", "launch_overhead_us", "launch_overhead_us", "num>=0"),
    ("cube", "issue_overhead", "cube_issue_overhead", "int>=0"),
    ("vector", "bytes_per_cycle", "vector_bytes_per_cycle", "num>0"),
    ("vector", "issue_overhead", "vector_issue_overhead", "int>=0"),
    ("scalar", "op_cycles", "scalar_op_cycles", "int>0"),
    ("sync", "event_ids", "event_ids", "int>0"),
    ("sync", "queue_depth", "queue_depth", "int>0"),
    ("sync", "sync_all_cycles", "sync_all_cycles", "int>0"),
    ("l2", "bytes", "l2_bytes", "int>0"),
    ("l2", "read_bytes_per_cycle", "l2_read_bytes_per_cycle", "num>0"),
    ("l2", "write_bytes_per_cycle", "l2_write_bytes_per_cycle", "num>0"),
    ("l2", "hit_latency", "l2_hit_latency", "int>=0"),
    ("l2", "miss_latency", "l2_miss_latency", "int>=0"),
    ("l2", "line_bytes", "l2_line_bytes", "int>0"),
    ("gm", "chip_bytes_per_cycle", "gm_bytes_per_cycle_chip", "num>0"),
    ("gm", "sustained_fraction", "gm_sustained_fraction", "num>0"),
)


@dataclass(frozen=True)
class Memory:
    """One memory of a core (or the chip, for the global memory).

    Attributes:
        name: as the target names it (``L1``, ``UB``, ``NRAM``...).
        capacity: bytes, per core for on-chip memories.
        alignment: bytes; every buffer address in this memory is a multiple of it.
    """

    name: str
    capacity: int
    alignment: int


@dataclass(frozen=True)
class Path:
    """A data path between two memories, and what moving bytes along it costs.

    Attributes:
        src, dst: memory names.
        bytes_per_cycle: sustained rate per core.
        latency: fixed cycles per transfer, before the first byte arrives.
        min_burst: bytes; a contiguous run shorter than this costs as much as this.
        pipe: the pipe that executes the transfer (``MTE2``, ``MTE1``, ``FIX``...).
        row_cycles: extra cycles per row moved (measured for the FIX drain), else 0.
    """

    src: str
    dst: str
    bytes_per_cycle: float
    latency: int
    min_burst: int
    pipe: str
    row_cycles: float = 0.0


@dataclass(frozen=True)
class Fractal:
    """The cube's native block for one input dtype: ``m x k`` times ``k x n`` per pass."""

    m: int
    k: int
    n: int
    passes: int = 1

    @property
    def macs_per_cycle(self) -> float:
        return self.m * self.k * self.n / self.passes


@dataclass(frozen=True, eq=False)
class Target:
    """A hardware target: memories, data paths, compute rates; read from a TOML file.

    Use ``load_target(name)``; the fields mirror the descriptor's sections. Two targets
    are equal when their contents are (``key``, a sha256 of the canonical JSON of
    ``to_dict()``); where a target was loaded from (``source``) does not count.

    Rates are per core and in cycles of ``clock_ghz`` unless the name says ``chip``.
    """

    name: str
    vendor: str
    description: str
    clock_ghz: float
    cube_cores: int
    vector_cores: int
    launch_overhead_us: float
    memories: Mapping[str, Memory]
    roles: Mapping[str, str]
    fractals: Mapping[str, Fractal]
    cube_issue_overhead: int
    vector_bytes_per_cycle: float
    vector_issue_overhead: int
    vector_op_cycles: Mapping[str, float]
    scalar_op_cycles: int
    event_ids: int
    queue_depth: int
    sync_all_cycles: int
    l2_bytes: int
    l2_read_bytes_per_cycle: float
    l2_write_bytes_per_cycle: float
    l2_hit_latency: int
    l2_miss_latency: int
    l2_line_bytes: int
    gm_bytes_per_cycle_chip: float
    gm_sustained_fraction: float
    paths: Mapping[tuple[str, str], Path]
    source: str = field(default="<dict>", compare=False)
    key: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True, allow_nan=False)
        object.__setattr__(self, "key", hashlib.sha256(blob.encode()).hexdigest())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Target):
            return NotImplemented
        return self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        return f"Target({self.name!r}, key={self.key[:12]})"

    # -- memories ---------------------------------------------------------------------

    def memory(self, name: str) -> Memory:
        """The memory called ``name``; ``TargetError`` naming it if there is none."""
        try:
            return self.memories[name]
        except KeyError:
            raise TargetError(f"target {self.name!r} has no memory {name!r}; its memories "
                              f"are {', '.join(self.memories)}") from None

    def role(self, role: str) -> Memory:
        """The memory that plays ``role`` (one of ``ROLES``), e.g. ``role("left")``."""
        try:
            return self.memories[self.roles[role]]
        except KeyError:
            raise TargetError(f"unknown memory role {role!r}; roles are "
                              f"{', '.join(ROLES)}") from None

    # -- data paths -------------------------------------------------------------------

    def path(self, src: str, dst: str) -> Path:
        """The data path from memory ``src`` to ``dst``; ``TargetError`` if none."""
        try:
            return self.paths[(src, dst)]
        except KeyError:
            known = ", ".join(f"{s}->{d}" for s, d in self.paths)
            raise TargetError(f"target {self.name!r} has no data path {src}->{dst}; "
                              f"its paths are {known}") from None

    def has_path(self, src: str, dst: str) -> bool:
        return (src, dst) in self.paths

    @property
    def dram_bytes_per_cycle(self) -> float:
        """What DRAM sustains, chip-wide, in bytes per cycle: the nominal
        ``gm_bytes_per_cycle_chip`` times ``gm_sustained_fraction``. The simulator's DRAM
        server moves bytes at this rate; the roofline bound uses the nominal figure."""
        return self.gm_bytes_per_cycle_chip * self.gm_sustained_fraction

    @property
    def fix_fixed_cycles(self) -> int:
        """Fixed cycles of one accumulator drain (the ``acc -> global`` path)."""
        return self.path(self.roles["acc"], self.roles["global"]).latency

    @property
    def fix_cycles_per_row(self) -> float:
        """Cycles per row of one accumulator drain (the ``acc -> global`` path)."""
        return self.path(self.roles["acc"], self.roles["global"]).row_cycles

    # -- compute ----------------------------------------------------------------------

    def fractal(self, dtype_name: str) -> tuple[int, int, int]:
        """``(m, k, n)`` of the cube's block for input dtype ``dtype_name``."""
        f = self._fractal(dtype_name)
        return (f.m, f.k, f.n)

    def fractal_passes(self, dtype_name: str) -> int:
        """How many cube passes one fractal of ``dtype_name`` takes (fp32: 2)."""
        return self._fractal(dtype_name).passes

    def macs_per_cycle(self, dtype_name: str) -> float:
        """Multiply-accumulates per cycle of one cube core for ``dtype_name``."""
        return self._fractal(dtype_name).macs_per_cycle

    @property
    def cube_macs_per_cycle(self) -> float:
        """Multiply-accumulates per cycle of one cube core for float16."""
        return self.macs_per_cycle("float16")

    def peak_flops(self, dtype_name: str) -> float:
        """Peak cube flop/s of the whole chip for ``dtype_name`` (a MAC is 2 flops)."""
        return 2.0 * self.macs_per_cycle(dtype_name) * self.cube_cores * self.clock_ghz * 1e9

    def vector_op_cost(self, op: str) -> float:
        """Relative cost of vector op class ``op`` (``add`` is 1) per full-width pass."""
        try:
            return self.vector_op_cycles[op]
        except KeyError:
            raise TargetError(f"target {self.name!r} has no vector cost for op {op!r}; "
                              f"known ops: {', '.join(self.vector_op_cycles)}") from None

    @property
    def launch_overhead_cycles(self) -> int:
        """Kernel launch overhead in cycles (the file gives microseconds)."""
        return round(self.launch_overhead_us * self.clock_ghz * 1e3)

    def _fractal(self, dtype_name: str) -> Fractal:
        try:
            return self.fractals[dtype_name]
        except KeyError:
            raise TargetError(f"target {self.name!r}: the cube does not take dtype "
                              f"{dtype_name!r}; it takes {', '.join(self.fractals)}") from None

    # -- serialisation ----------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The descriptor as plain data, in the TOML file's structure (normalised)."""
        data: dict[str, Any] = {section: {} for section in SECTIONS}
        for section, key, attr, _ in _SCALARS:
            data[section][key] = getattr(self, attr)
        data["memories"] = {m.name: {"capacity": m.capacity, "alignment": m.alignment}
                            for m in self.memories.values()}
        data["roles"] = dict(self.roles)
        data["cube"]["fractal"] = {d: {"m": f.m, "k": f.k, "n": f.n, "passes": f.passes}
                                   for d, f in self.fractals.items()}
        data["vector"]["op_cycles"] = dict(self.vector_op_cycles)
        data["paths"] = {f"{p.src}->{p.dst}": {"pipe": p.pipe, "bytes_per_cycle": p.bytes_per_cycle,
                                               "latency": p.latency, "min_burst": p.min_burst,
                                               "row_cycles": p.row_cycles}
                         for p in self.paths.values()}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "<dict>") -> Target:
        """Build and validate a target from descriptor data (as ``to_dict`` returns)."""
        return _parse(data, source)


# -- loading ------------------------------------------------------------------------------


def available_targets() -> list[str]:
    """Names of the targets shipped with PyPTO (``pypto/targets/*.toml``)."""
    return sorted(p.stem for p in PACKAGE_DIR.glob("*.toml"))


def load_target(name_or_path: str | pathlib.Path | Target) -> Target:
    """Return a target given its name, the path of a descriptor file, or a ``Target``.

    A bare name (``"ascend910b"``) loads the packaged descriptor, once per process; a
    path (anything with a directory part or ending in ``.toml``) reads that file.

    Raises:
        TargetError: unknown name (lists the available ones), unreadable or malformed file.
    """
    if isinstance(name_or_path, Target):
        return name_or_path
    if isinstance(name_or_path, pathlib.PurePath):
        return _load_file(pathlib.Path(name_or_path))
    if not isinstance(name_or_path, str):
        raise TargetError(f"target must be a name, a path or a Target, "
                          f"not {type(name_or_path).__name__}")
    text = name_or_path.strip()
    if text.endswith(".toml") or "/" in text or "\\" in text:
        return _load_file(pathlib.Path(text))
    return _load_packaged(text.lower())


@functools.cache
def _load_packaged(name: str) -> Target:
    names = available_targets()
    if name not in names:
        raise TargetError(f"unknown target {name!r}: available targets are "
                          f"{', '.join(names)} (or pass the path of a .toml descriptor)")
    return _load_file(PACKAGE_DIR / f"{name}.toml")


def _load_file(path: pathlib.Path) -> Target:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise TargetError(f"cannot read target descriptor {path}: {e.strerror or e}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise TargetError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise TargetError(f"{path}: invalid TOML: {e}") from None
    return _parse(data, str(path))


# -- validation ---------------------------------------------------------------------------


class _Table:
    """Typed reads from one TOML table; every error names the file and the dotted field.

    ``done()`` rejects the keys nobody read, so a misspelt field is an error, not a
    silently ignored line.
    """

    def __init__(self, source: str, data: object, where: str) -> None:
        self.source, self.where = source, where
        if not isinstance(data, Mapping):
            self.fail(where, f"must be a table, got {_kind(data)} {data!r}")
        self.data: Mapping[str, object] = data
        self.seen: set[str] = set()

    def fail(self, where: str, problem: str) -> NoReturn:
        raise TargetError(f"{self.source}: field '{where}' {problem}")

    def name(self, key: str) -> str:
        """The dotted TOML name of ``key`` in this table (quoted if TOML would quote it)."""
        if not _BARE_KEY.fullmatch(key):
            key = json.dumps(key)
        return f"{self.where}.{key}" if self.where else key

    def keys(self) -> list[str]:
        return list(self.data)

    def table(self, key: str) -> _Table:
        return _Table(self.source, self._get(key), self.name(key))

    def read(self, key: str, kind: str, default: float | None = None) -> Any:
        """The value of ``key``, checked against ``kind`` (see ``_SCALARS``)."""
        if default is not None and key not in self.data:
            self.seen.add(key)
            return default
        value, where = self._get(key), self.name(key)
        if kind == "text":
            if not isinstance(value, str) or not value.strip():
                self.fail(where, f"must be a non-empty string, got {_kind(value)} {value!r}")
            return value
        integer = kind.startswith("int")
        if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
            self.fail(where, f"must be {'an integer' if integer else 'a number'}, "
                      f"got {_kind(value)} {value!r}")
        if not math.isfinite(value):
            self.fail(where, f"must be finite, got {value!r}")
        if value < 0 or (kind.endswith(">0") and value == 0):
            self.fail(where, f"must be {'positive' if kind.endswith('>0') else '>= 0'}, "
                      f"got {value!r}")
        return value if integer else float(value)

    def done(self) -> None:
        extra = sorted(set(self.data) - self.seen)
        if extra:
            self.fail(self.name(extra[0]), f"is unknown (expected: {', '.join(sorted(self.seen))})")

    def _get(self, key: str) -> object:
        self.seen.add(key)
        if key not in self.data:
            raise TargetError(f"{self.source}: missing required field '{self.name(key)}'")
        return self.data[key]


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _kind(value: object) -> str:
    return {bool: "a boolean", str: "a string", int: "an integer", float: "a float",
            list: "an array", dict: "a table"}.get(type(value), type(value).__name__)


def _frozen(mapping: dict[Any, Any]) -> Mapping[Any, Any]:
    return types.MappingProxyType(mapping)


def _parse(data: Mapping[str, Any], source: str) -> Target:
    if not isinstance(data, Mapping):
        raise TargetError(f"{source}: a target descriptor must be a table, got {_kind(data)}")
    for section in data:
        if section not in SECTIONS:
            raise TargetError(f"{source}: unknown section [{section}] (known sections: "
                              f"{', '.join(SECTIONS)})")
    top = _Table(source, data, "")
    tables = {section: top.table(section) for section in SECTIONS}
    values: dict[str, Any] = {"source": source}
    for section, key, attr, kind in _SCALARS:
        values[attr] = tables[section].read(key, kind)
    if values["gm_sustained_fraction"] > 1:
        tables["gm"].fail("gm.sustained_fraction", "is a fraction of the nominal bandwidth: "
                          f"it must be in (0, 1], got {values['gm_sustained_fraction']!r}")

    memories = {name: _parse_memory(name, tables["memories"].table(name))
                for name in tables["memories"].keys()}
    if not memories:
        tables["memories"].fail("memories", "must declare at least one memory")
    values["memories"] = _frozen(memories)
    values["roles"] = _frozen(_parse_roles(tables["roles"], memories))
    fractals = tables["cube"].table("fractal")
    values["fractals"] = _frozen({dtype: _parse_fractal(fractals.table(dtype))
                                  for dtype in fractals.keys()})
    ops = tables["vector"].table("op_cycles")
    values["vector_op_cycles"] = _frozen({op: ops.read(op, "num>0") for op in ops.keys()})
    values["paths"] = _frozen(_parse_paths(tables["paths"], memories))
    for table in (top, *tables.values()):
        table.done()
    target = Target(**values)
    from pypto.targets.sanity import check_target

    check_target(target)
    return target


def _parse_memory(name: str, table: _Table) -> Memory:
    capacity, alignment = table.read("capacity", "int>0"), table.read("alignment", "int>0")
    if alignment & (alignment - 1):
        table.fail(table.name("alignment"), f"must be a power of two, got {alignment}")
    table.done()
    return Memory(name, capacity, alignment)


def _parse_roles(table: _Table, memories: Mapping[str, Memory]) -> dict[str, str]:
    roles = {role: table.read(role, "text") for role in ROLES}
    table.done()
    for role, memory in roles.items():
        if memory not in memories:
            table.fail(table.name(role), f"names memory {memory!r}, which [memories] does "
                       f"not declare (declared: {', '.join(memories)})")
    return roles


def _parse_fractal(table: _Table) -> Fractal:
    fractal = Fractal(*(table.read(key, "int>0") for key in ("m", "k", "n", "passes")))
    table.done()
    return fractal


def _parse_paths(table: _Table, memories: Mapping[str, Memory]) -> dict[tuple[str, str], Path]:
    paths: dict[tuple[str, str], Path] = {}
    for label in table.keys():
        spec = table.table(label)
        ends = [part.strip() for part in label.split("->")]
        if len(ends) != 2 or not all(ends):
            spec.fail(spec.where, "must be named 'SRC->DST', e.g. \"GM->L1\"")
        for end in ends:
            if end not in memories:
                spec.fail(spec.where, f"names memory {end!r}, which [memories] does not "
                          f"declare (declared: {', '.join(memories)})")
        if (ends[0], ends[1]) in paths:
            spec.fail(spec.where, f"declares the path {ends[0]}->{ends[1]} a second time")
        pipe = spec.read("pipe", "text")
        if pipe not in PIPES:
            spec.fail(spec.name("pipe"), f"must be one of {', '.join(PIPES)}, got {pipe!r}")
        paths[(ends[0], ends[1])] = Path(
            src=ends[0], dst=ends[1], bytes_per_cycle=spec.read("bytes_per_cycle", "num>0"),
            latency=spec.read("latency", "int>=0"), min_burst=spec.read("min_burst", "int>0"),
            pipe=pipe, row_cycles=spec.read("row_cycles", "num>=0", default=0.0))
        spec.done()
    return paths
