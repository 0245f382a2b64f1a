"""The op-family registries: one record per family on the schedule side
(``schedule_space.registry``) and one emitter per family in codegen
(``codegen.registry``), covering the same families; the hooks agree with the space;
the modules of ``schedule_space`` and ``codegen`` import each other without circles."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

import pypto
from pypto.codegen.lower import lower
from pypto.codegen.registry import EMITTERS, emitter_of
from pypto.ir.workload import Workload
from pypto.schedule_space import FAMILIES, family_of, space_for
from pypto.targets import available_targets, load_target

ROOT = Path(pypto.__file__).parent


def _workload(fn, *shapes, target="ascend910b"):  # type: ignore[no-untyped-def]
    compiled = pypto.kernel(fn).lower(*[pypto.spec(s, "float16") for s in shapes],
                                      target=target)
    return compiled.workloads[0], compiled.target


KERNELS = {
    "matmul": (lambda a, b, c: pypto.relu(a @ b + c), (300, 500), (500, 400), (400,)),
    "vector": (pypto.softmax, (512, 4000)),
    "conv2d": (lambda x, w: pypto.relu(pypto.conv2d(x, w, padding=1)), (1, 64, 28, 28),
               (128, 64, 3, 3)),
    "movement": (lambda a: pypto.pad(a, ((1, 2), (3, 4))), (300, 500)),
}


def test_both_registries_cover_the_same_families():
    assert set(FAMILIES) == set(EMITTERS) == set(KERNELS)
    for name, record in FAMILIES.items():
        assert record.name == name and EMITTERS[name].family == name


def test_an_unknown_family_is_a_clear_error_on_both_sides():
    wl, target = _workload(pypto.softmax, (4, 8))
    spec = wl.to_json()
    spec["family"] = "fft"
    odd = Workload.from_json(spec)
    with pytest.raises(pypto.UnsupportedError, match="fft workloads have no NPU schedule.*cpu"):
        family_of(odd)
    with pytest.raises(pypto.UnsupportedError, match="fft workloads have no NPU schedule"):
        space_for(odd, target)
    with pytest.raises(pypto.UnsupportedError, match="fft has no NPU code generation.*cpu"):
        emitter_of(odd)
    with pytest.raises(pypto.UnsupportedError, match="fft has no NPU code generation"):
        lower(odd, pypto.schedule_space.Schedule(), target)


@pytest.mark.parametrize("target", available_targets())
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_footprints_hook_is_the_arithmetic_the_space_checks(name, target):
    """Per memory, the roles' footprints of a valid point fit; of a point rejected for a
    memory, the roles of that memory overflow it."""
    fn, *shapes = KERNELS[name]
    wl, tgt = _workload(fn, *shapes, target=target)
    record = family_of(wl)
    space = space_for(wl, tgt)
    rng = random.Random(0)
    seen_valid = seen_full = 0
    for _ in range(300):
        point = {n: a.choices[rng.randrange(len(a.choices))] for n, a in space.axes.items()}
        per_memory: dict[str, int] = {}
        for role, nbytes in record.footprints(wl, point, tgt).items():
            mem = tgt.role(role).name
            per_memory[mem] = per_memory.get(mem, 0) + nbytes
        over = {m for m, n in per_memory.items() if n > tgt.memory(m).capacity}
        named = {p.split(":")[0] for p in space.validate(point) if " bytes but " in p}
        assert named == over, (point, named, over)
        seen_valid += not space.validate(point)
        seen_full += bool(over)
    assert seen_valid and seen_full, (seen_valid, seen_full)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_work_units_hook_counts_blocks_or_tiles(name):
    fn, *shapes = KERNELS[name]
    wl, tgt = _workload(fn, *shapes)
    space = space_for(wl, tgt)
    units = family_of(wl).work_units
    for s in [space.default(), *(space.sample(random.Random(i)) for i in range(20))]:
        assert 1 <= s["cores"] <= units(wl, s)


def test_space_for_is_cached_per_workload_and_target():
    wl, tgt = _workload(pypto.softmax, (50, 300))
    again, _ = _workload(pypto.softmax, (50, 300))
    assert again is not wl and space_for(again, load_target("ascend910b")) is space_for(wl, tgt)
    assert space_for(wl, load_target("ascend310")) is not space_for(wl, tgt)


def _imports(path: Path, package: str, nested: bool) -> set[str]:
    """The modules of ``package`` that ``path`` imports (with ``nested``, inside
    functions too)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree) if nested else tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == package:  # from pypto.x import submodule
                out |= {f"{package}.{a.name}" for a in node.names}
            elif node.module.startswith(package + "."):
                out.add(node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith(package + ".")}
    return out


# codegen: module-level imports (``Program.asm`` imports the printer when called)
@pytest.mark.parametrize("package, nested", [("schedule_space", True), ("codegen", False)])
def test_no_import_circles_inside_the_package(package, nested):
    full = f"pypto.{package}"
    modules = {f"{full}.{p.stem}": p for p in (ROOT / package).glob("*.py")
               if p.stem != "__init__"}
    graph = {m: {i for i in _imports(p, full, nested) if i in modules}
             for m, p in modules.items()}

    def visit(m: str, path: tuple[str, ...]) -> None:
        for dep in graph[m]:
            assert dep not in path, f"import circle: {' -> '.join((*path, dep))}"
            visit(dep, (*path, dep))

    for m in graph:
        visit(m, (m,))
