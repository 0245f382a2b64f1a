"""The compiled extensions were built with the numbers Python defines: ``setup.py``
generates ``pypto/_constants.pxi`` from ``pypto/codegen/isa.py`` and
``pypto/ir/dtypes.py``, and every extension includes it (a stale build fails here)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pypto.codegen import isa
from pypto.ir.dtypes import BY_CODE

ROOT = Path(__file__).resolve().parent.parent
EXTENSIONS = ("pypto.sim._engine", "pypto.sim._stats", "pypto.codegen._sync",
              "pypto.codegen._matmul", "pypto.codegen._vector", "pypto.sim._scan")


def python_constants() -> dict[str, object]:
    values: dict[str, object] = {"NUM_PIPES": len(isa.Pipe), "NUM_MEMS": len(isa.Mem),
                                 "NUM_DTYPES": len(BY_CODE)}
    for prefix, enum in (("PIPE", isa.Pipe), ("MEM", isa.Mem), ("OP", isa.Op)):
        values.update({f"{prefix}_{member.name}": int(member) for member in enum})
    values.update({name: getattr(isa, name) for name in dir(isa)
                   if name.startswith("F_") and isinstance(getattr(isa, name), int)})
    values["ITEMSIZE"] = [BY_CODE[code].itemsize for code in range(len(BY_CODE))]
    return values


@pytest.mark.parametrize("module", EXTENSIONS)
def test_extension_was_built_with_the_python_constants(module: str) -> None:
    compiled = importlib.import_module(module).CONSTANTS
    assert compiled == python_constants()


def test_no_pyx_file_spells_a_shared_number_by_hand() -> None:
    """The numbers come from the .pxi: no ``.pyx`` declares a count, code or size of
    pipes, memories, opcodes, flags or dtypes itself."""
    names = set(python_constants()) | {"NPIPES", "NMEMS"}
    for pyx in sorted(ROOT.glob("pypto/**/*.pyx")):
        text = pyx.read_text()
        assert 'include "_constants.pxi"' in text, pyx
        for name in names:
            assert not re.search(rf"^\s*(cdef\s+\w+\s+)?{name}\s*=", text, re.MULTILINE), \
                f"{pyx.name} defines {name} itself"


def test_setup_reads_the_constants_without_importing_pypto() -> None:
    """The two files setup.py runs by path import nothing from the package."""
    probe = ("import runpy, sys; "
             f"isa = runpy.run_path({str(ROOT / 'pypto/codegen/isa.py')!r}); "
             f"dt = runpy.run_path({str(ROOT / 'pypto/ir/dtypes.py')!r}); "
             "print(len(isa['Mem']), len(dt['BY_CODE']), "
             "any(m == 'pypto' or m.startswith('pypto.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], cwd="/", capture_output=True,
                         text=True, timeout=60, check=True)
    assert out.stdout.split() == [str(len(isa.Mem)), str(len(BY_CODE)), "False"]


def test_engine_and_reference_share_the_l2_ways() -> None:
    """The engine's L2 set holds 16 ways in a fixed layout; the reference must agree."""
    from pypto.sim import _engine, reference  # type: ignore[attr-defined]

    assert _engine.MODEL["L2_WAYS"] == reference.L2_WAYS
