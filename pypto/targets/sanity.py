"""Whether a well-formed target descriptor describes a machine PyPTO can compile for.

``pypto.targets.target`` checks that each field has the right type and sign; this module
checks what the code that uses a target relies on, so that an absurd file is refused
when it is loaded, naming the field, instead of failing every trial of a tuning run:

* every number within a range no real chip comes near (1000x past today's), so that the
  engines' int64 and float arithmetic stays exact (a ``clock_ghz = 1e300`` once gave an
  ``OverflowError`` deep in the launch overhead);
* the global memory at least as large as any on-chip memory (``capacity = 1`` held no
  tensor at all);
* the data paths lowering moves data along (``global -> stage`` ...), a cube fractal for
  float16, and a cost for every vector op class the ISA has.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from pypto.errors import TargetError

if TYPE_CHECKING:
    from pypto.targets.target import Target

#: The vector op classes a target prices (``[vector.op_cycles]``): one per vector opcode
#: of ``pypto.codegen.isa`` (``VADD`` -> ``add``); ``tests/test_bad_inputs.py`` checks that
#: the two agree.
VECTOR_OPS = ("abs", "add", "adds", "cast", "cmpeq", "cmpge", "cmpgt", "cmple", "cmplt",
              "cmpne", "copy", "div", "dup", "exp", "gelu", "ln", "max", "maxs", "min", "mins",
              "mul", "muls", "neg", "recip", "redmax", "redmin", "redsum", "relu", "rsqrt",
              "sel", "sigmoid", "sqrt", "sub", "tanh")

#: The (from role, to role) data paths lowering emits copies along.
ROUTES = (("global", "stage"), ("global", "vector"), ("stage", "left"), ("stage", "right"),
          ("acc", "global"), ("acc", "vector"), ("vector", "global"))

CYCLES = 10**7          # a latency, an overhead, one op: at most this many cycles
RATE = 10**7            # bytes per cycle, anywhere
CAPACITY = 1 << 48      # bytes of one memory (256 TiB)
#: (section, key in the file, Target attribute, largest plausible value)
_LIMITS = (
    ("target", "clock_ghz", "clock_ghz", 100.0),
    ("target", "cube_cores", "cube_cores", 4096),
    ("target", "vector_cores", "vector_cores", 4096),
    ("target", "launch_overhead_us", "launch_overhead_us", 1e6),
    ("cube", "issue_overhead", "cube_issue_overhead", CYCLES),
    ("vector", "bytes_per_cycle", "vector_bytes_per_cycle", RATE),
    ("vector", "issue_overhead", "vector_issue_overhead", CYCLES),
    ("scalar", "op_cycles", "scalar_op_cycles", CYCLES),
    ("sync", "event_ids", "event_ids", 127),   # an instruction keeps its event in int8
    ("sync", "queue_depth", "queue_depth", 1 << 20),
    ("sync", "sync_all_cycles", "sync_all_cycles", CYCLES),
    ("l2", "bytes", "l2_bytes", 1 << 40),
    ("l2", "read_bytes_per_cycle", "l2_read_bytes_per_cycle", RATE),
    ("l2", "write_bytes_per_cycle", "l2_write_bytes_per_cycle", RATE),
    ("l2", "hit_latency", "l2_hit_latency", CYCLES),
    ("l2", "miss_latency", "l2_miss_latency", CYCLES),
    ("l2", "line_bytes", "l2_line_bytes", 1 << 20),
    ("gm", "chip_bytes_per_cycle", "gm_bytes_per_cycle_chip", RATE),
)


def check_target(target: Target) -> None:
    """Raise ``TargetError`` (naming the file and the field) unless ``target`` is one the
    compiler and both engines can use (see the module doc)."""
    source = target.source

    def fail(field: str, problem: str) -> NoReturn:
        raise TargetError(f"{source}: field '{field}' {problem}")

    for section, key, attr, limit in _LIMITS:
        value = getattr(target, attr)
        if value > limit:
            fail(f"{section}.{key}", f"is {value!r}, more than any chip has: it must be at most "
                 f"{limit:g}")
    for name, memory in target.memories.items():
        if memory.capacity > CAPACITY:
            fail(f"memories.{name}.capacity", f"is {memory.capacity} bytes: a memory holds at "
                 f"most {CAPACITY} (2**48)")
        if memory.alignment > memory.capacity:
            fail(f"memories.{name}.alignment", f"is {memory.alignment}, more than the memory's "
                 f"{memory.capacity} bytes")
    if target.l2_line_bytes > target.l2_bytes:
        fail("l2.line_bytes", f"is {target.l2_line_bytes}, more than the L2's "
             f"{target.l2_bytes} bytes")
    gm = target.roles["global"]
    largest = max((m for n, m in target.memories.items() if n != gm),
                  key=lambda m: m.capacity, default=None)
    if largest is not None and target.memories[gm].capacity < largest.capacity:
        fail(f"memories.{gm}.capacity", f"is {target.memories[gm].capacity} byte(s), less than "
             f"{largest.name}'s {largest.capacity}: the global memory holds every tensor a "
             "kernel reads and writes")
    _check_paths(target, fail)
    _check_compute(target, fail)


def _check_paths(target: Target, fail) -> None:  # type: ignore[no-untyped-def]
    for src, dst in ROUTES:
        a, b = target.roles[src], target.roles[dst]
        if not target.has_path(a, b):
            fail(f'paths."{a}->{b}"', f"is missing: kernels copy from the {src} memory ({a}) "
                 f"to the {dst} memory ({b}); declare the path, e.g. \"{a}->{b}\" = "
                 "{ pipe = ..., bytes_per_cycle = ..., latency = ..., min_burst = ... }")
    for (src, dst), path in target.paths.items():
        where = f'paths."{src}->{dst}"'
        if path.bytes_per_cycle > RATE:
            fail(f"{where}.bytes_per_cycle", f"is {path.bytes_per_cycle:g}: at most {RATE:g}")
        if path.latency > CYCLES:
            fail(f"{where}.latency", f"is {path.latency}: at most {CYCLES:g} cycles")
        if path.min_burst > 1 << 20:
            fail(f"{where}.min_burst", f"is {path.min_burst}: at most {1 << 20} bytes")
        if path.row_cycles > CYCLES:
            fail(f"{where}.row_cycles", f"is {path.row_cycles:g}: at most {CYCLES:g} cycles")


def _check_compute(target: Target, fail) -> None:  # type: ignore[no-untyped-def]
    if "float16" not in target.fractals:
        fail("cube.fractal.float16", "is missing: the cube's rates are quoted for float16")
    for dtype, f in target.fractals.items():
        for key in ("m", "k", "n", "passes"):
            if getattr(f, key) > 1024:
                fail(f"cube.fractal.{dtype}.{key}", f"is {getattr(f, key)}: at most 1024")
    missing = [op for op in VECTOR_OPS if op not in target.vector_op_cycles]
    if missing:
        fail(f"vector.op_cycles.{missing[0]}",
             f"is missing: every vector op class needs a cost (missing: {', '.join(missing)})")
    for op, cost in target.vector_op_cycles.items():
        if cost > 1e4:
            fail(f"vector.op_cycles.{op}", f"is {cost:g}: at most 10000 times an add")
