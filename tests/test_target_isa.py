"""Every target file against the ISA: the memories, roles, pipes and paths a target
names exist in ``pypto.codegen.isa`` (and what the ISA needs of a target is there), and
the hardware facts live in the target files only: code names memories by role."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from pypto.codegen import isa
from pypto.codegen.isa import ROLE, Mem, Pipe
from pypto.codegen.memories import isa_view, memory_map
from pypto.sim.result import target_facts
from pypto.targets import ROLES, Target, available_targets, load_target
from pypto.targets.target import PIPES

ROOT = Path(__file__).resolve().parent.parent
TARGETS = available_targets()


def test_the_isa_codes_memories_by_the_targets_roles() -> None:
    assert tuple(ROLE.values()) == ROLES                  # one code per role, in order
    assert [code for code in Mem if code != Mem.NONE] == list(ROLE)
    assert ROLE[Mem.GM] == "global"
    assert PIPES == tuple(pipe.name for pipe in Pipe)     # the pipes a path may name


@pytest.mark.parametrize("name", TARGETS)
def test_target_names_only_what_the_isa_has(name: str) -> None:
    target = load_target(name)
    memories = memory_map(target)
    assert set(target.roles) == set(ROLES)                # every role is played
    # Every memory plays a role, so has a code; distinct memories, distinct codes.
    assert sorted(memories.names.values()) == sorted(target.memories)
    assert len(set(memories.names)) == len(target.memories)
    for role, memory in target.roles.items():
        assert memories.names[memories.roles[role]] == memory
        assert memories.code(memory) == memories.roles[role]
    assert memories.roles["global"] == Mem.GM
    # Every path joins two coded memories on a pipe of the ISA that moves data.
    assert len(memories.copy_pipes) == len(target.paths)
    for (src, dst), path in target.paths.items():
        pipe = memories.copy_pipe(memories.code(src), memories.code(dst))
        assert pipe.name == path.pipe and pipe not in (Pipe.SCALAR, Pipe.CUBE), (src, dst)
    # The pipes a report counts as copying are the path pipes that do not compute.
    _, copy_pipes = target_facts(target)
    assert {Pipe(p).name for p in copy_pipes} == \
        {p.pipe for p in target.paths.values()} - {p.name for p in isa.COMPUTE_PIPES}


def test_the_isa_view_agrees_with_every_packaged_target() -> None:
    view = isa_view()
    for name in TARGETS:
        for pair, pipe in memory_map(load_target(name)).copy_pipes.items():
            assert view.copy_pipes[pair] == pipe, (name, pair)
    assert {view.names[code] for code in ROLE} == {code.name for code in ROLE}


def test_a_memory_without_a_role_has_no_code() -> None:
    """Code reaches memories only through roles: one no role names is never used."""
    data = load_target("ascend910b").to_dict()
    data["target"]["name"] = "spare"
    data["memories"]["L2X"] = {"capacity": 1024, "alignment": 32}
    data["paths"]["GM->L2X"] = dict(data["paths"]["GM->L1"])
    memories = memory_map(Target.from_dict(data))
    assert memories.code("L2X") is None and "L2X" not in memories.names.values()
    assert memories.copy_pipes == memory_map(load_target("ascend910b")).copy_pipes


# Modules that must not name a target's memories: what they need comes from
# pypto/targets through pypto.codegen.memories.
ROLE_ONLY = ["pypto/codegen/isa.py", "pypto/codegen/memories.py", "pypto/codegen/program.py",
             "pypto/codegen/asm.py", "pypto/codegen/sync.py", "pypto/codegen/place.py",
             "pypto/codegen/vector.py", "pypto/codegen/vector_chain.py",
             "pypto/report/profile_text.py", *sorted(str(p.relative_to(ROOT))
                                                     for p in (ROOT / "pypto/sim").glob("*.py"))]


def _code_words(path: Path) -> set[str]:
    """Identifiers and the words of string constants, docstrings excepted."""
    tree = ast.parse(path.read_text())
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant):
            docstrings.add(id(node.body[0].value))
    words: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docstrings:
            words.update(re.findall(r"\w+", node.value))
    return words


@pytest.mark.parametrize("module", ROLE_ONLY)
def test_code_names_memories_by_role(module: str) -> None:
    names = {m for t in TARGETS for m in load_target(t).memories} - {"GM"}
    found = _code_words(ROOT / module) & names
    assert not found, f"{module} names target memories {sorted(found)}; ask the target"
