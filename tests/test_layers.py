"""Imports point one way (DESIGN §2): a module imports only from its own layer or the
layers below it. Every import counts (module level, inside functions, under
``TYPE_CHECKING``): a function-local import that points up is still a dependency.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "pypto"

#: bottom to top; a module may import its own layer and the layers before it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "native", "version"),
    ("targets",),
    ("ir",),
    ("schedule_space",),
    ("codegen",),
    ("sim",),
    ("cost_model",),
    ("db",),
    ("compile",),
    ("frontend",),
    ("report",),
    ("tuner",),
    ("cli", "cli_db", "cli_output", "__init__"),
)


@dataclass(frozen=True)
class Violation:
    path: str
    line: int
    imported: str
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.imported} ({self.why})"


def layer_of(module: str, layers: tuple[tuple[str, ...], ...] = LAYERS) -> int | None:
    """The layer index of ``pypto.<part>...``, None for a module outside the layers."""
    parts = module.split(".")
    if parts[0] != "pypto":
        return None
    top = parts[1] if len(parts) > 1 else "__init__"
    for i, names in enumerate(layers):
        if top in names:
            return i
    return None


def _module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts)


def _package_parts(root: Path) -> set[str]:
    return {p.stem if p.is_file() else p.name for p in root.iterdir()
            if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}


def _imported(node: ast.AST, module: str, is_package: bool, root: Path) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")
            base = base[:len(base) - node.level + (1 if is_package else 0)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if target == "pypto":  # a submodule, or a name from the package's root
            return [f"pypto.{alias.name}" if alias.name in _package_parts(root) else "pypto"
                    for alias in node.names]
        return [target]
    return []


def check_layers(root: Path, layers: tuple[tuple[str, ...], ...] = LAYERS) -> list[Violation]:
    """Every import under package ``root`` that points up the ``layers``, or names a
    top-level part of the package that is in no layer."""
    out = []
    for path in sorted(root.rglob("*.py")):
        module = _module_name(root, path)
        own = layer_of(module, layers)
        rel = str(path.relative_to(root.parent))
        if own is None:
            out.append(Violation(rel, 1, module, "the module is in no layer: add it to LAYERS"))
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            for name in _imported(node, module, path.name == "__init__.py", root):
                theirs = layer_of(name, layers)
                if name.split(".")[0] != "pypto":
                    continue
                if theirs is None:
                    out.append(Violation(rel, node.lineno, name, "in no layer"))
                elif theirs > own:
                    out.append(Violation(rel, node.lineno, name, "points up: "
                                         f"{'/'.join(layers[theirs])} is above "
                                         f"{'/'.join(layers[own])}"))
    return out


def test_imports_point_one_way():
    violations = check_layers(PACKAGE)
    assert not violations, "\n".join(map(str, violations))


def test_every_package_part_is_in_a_layer():
    parts = _package_parts(PACKAGE)
    known = {name for layer in LAYERS for name in layer}
    assert parts <= known, sorted(parts - known)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pypto"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_checker_catches_an_import_that_points_up(tmp_path: Path):
    root = _tree(tmp_path, {
        "__init__.py": "",
        "ir/__init__.py": "",
        "ir/graph.py": "import numpy\nfrom pypto.ir import dtypes\n\n"
                       "def f():\n    from pypto.frontend.tensor import Tensor\n",
        "ir/dtypes.py": "",
        "frontend/__init__.py": "",
        "frontend/tensor.py": "from pypto.ir.graph import f\nfrom ..ir import dtypes\n",
    })
    [violation] = check_layers(root)
    assert violation.path == "pypto/ir/graph.py"
    assert violation.line == 5
    assert violation.imported == "pypto.frontend.tensor"
    assert "points up" in str(violation) and "frontend is above ir" in str(violation)


@pytest.mark.parametrize("source", [
    "from ..tuner import loop\n",                  # relative, up
    "import pypto.cli\n",                          # absolute, up
    "from pypto import tuner\n",                   # a submodule through the package
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pypto.db import x\n",
])
def test_every_form_of_upward_import_is_caught(tmp_path: Path, source: str):
    root = _tree(tmp_path, {"__init__.py": "", "sim/__init__.py": "", "sim/a.py": source})
    assert [v.path for v in check_layers(root)] == ["pypto/sim/a.py"]


def test_a_module_in_no_layer_is_reported(tmp_path: Path):
    root = _tree(tmp_path, {"__init__.py": "", "misc.py": ""})
    [violation] = check_layers(root)
    assert "in no layer" in violation.why
