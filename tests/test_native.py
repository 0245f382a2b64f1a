"""``pypto.native``: one switch (``PYPTO_IMPL``) selects compiled implementations or
their Python specifications for every component that has both, and a missing extension
falls back with one warning per process."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import pypto
from pypto import native
from pypto.codegen import matmul, sync, vector
from pypto.codegen.isa import INSTR
from pypto.codegen.program import StreamBuilder, emit_reference
from pypto.sim import stats, timing

EXTENSIONS = ("pypto.sim._engine", "pypto.sim._stats", "pypto.codegen._sync",
              "pypto.codegen._matmul", "pypto.codegen._vector", "pypto.sim._scan")


def selected() -> dict[str, bool]:
    """Per component, whether it would run its compiled implementation now."""
    return {
        "timing engine": timing.engine_name() == "cython",
        "program check": native.extension("pypto.sim._engine") is not None,
        "statistics": stats._implementation() is not stats.python_program_stats,
        "sync pass": sync._extension() is not None,
        "stream builder": StreamBuilder().emit.__func__ is not emit_reference,
        "matmul K loop": matmul._compiled_loop() is not None,
        "vector tile loop": vector._compiled_loop() is not None,
        "simulation scans": native.extension("pypto.sim._scan") is not None,
    }


def test_every_extension_is_built() -> None:
    for module in EXTENSIONS:
        assert native.extension(module) is not None, f"{module} is not built"


def test_compiled_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native.ENV, raising=False)
    assert native.implementation() == "compiled"
    assert all(selected().values()), selected()
    monkeypatch.setenv(native.ENV, "")
    assert all(selected().values()), selected()


@pytest.mark.parametrize("value", ["python", "Python", " python "])
def test_python_selects_every_specification(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(native.ENV, value)
    assert native.implementation() == "python"
    assert not any(selected().values()), selected()
    monkeypatch.setenv(native.ENV, "compiled")
    assert all(selected().values()), selected()


def test_force_python_overrides_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(native.ENV, "compiled")
    with native.force_python():
        assert not any(selected().values())
        with native.force("compiled"):
            assert all(selected().values())
        assert not any(selected().values())
    assert all(selected().values())
    with pytest.raises(native.ImplementationError, match="compiled, python"):
        with native.force("cython"):
            pass


@pytest.mark.parametrize("value", ["ref", "reference", "cython", "1"])
def test_an_unknown_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(native.ENV, value)
    with pytest.raises(native.ImplementationError) as caught:
        native.extension("pypto.sim._engine")
    message = str(caught.value)
    assert "PYPTO_IMPL" in message and repr(value) in message
    assert "compiled" in message and "python" in message
    assert isinstance(caught.value, pypto.PyptoError) and isinstance(caught.value, ValueError)
    with pytest.raises(native.ImplementationError):
        timing.engine_name()


def test_missing_extensions_warn_once_per_process() -> None:
    instr = np.zeros(3, dtype=INSTR)
    with native.not_built(*EXTENSIONS), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not any(selected().values())
        stats.program_stats(instr)
        assert sync.insert_sync(instr, 8).tobytes() == instr.tobytes()
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert issubclass(caught[0].category, RuntimeWarning)
    assert "not built" in str(caught[0].message) and "pip install -e ." in str(caught[0].message)
    assert all(selected().values())  # found again once the block ends


def test_the_python_switch_does_not_warn() -> None:
    with native.not_built(*EXTENSIONS), native.force_python(), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not any(selected().values())
