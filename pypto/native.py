"""One switch between PyPTO's compiled implementations and their Python specifications.

Several components have a readable Python specification and a compiled (Cython) twin
that must give exactly the same results: the timing engine (``sim/_engine.pyx`` and
``sim/reference.py``), the static program check (``_engine.check`` and NumPy in
``sim/check.py``), the instruction statistics (``sim/_stats.pyx`` and ``sim/stats.py``),
the stream builder and the synchronization pass (``codegen/_sync.pyx`` and
``codegen/program.py``, ``codegen/sync.py``), the matmul K loop
(``codegen/_matmul.pyx`` and ``codegen/matmul.py``), the vector tile loop
(``codegen/_vector.pyx`` and ``codegen/vector.py``) and the scans before a simulation
(``sim/_scan.pyx`` and ``sim/check.py``, ``sim/scalar.py``). The environment variable
``PYPTO_IMPL`` selects for all of them at once:

* ``compiled`` (the default): the compiled extensions; an extension that is not built
  falls back to its specification, with one warning per process;
* ``python``: the Python specifications everywhere (slow; to check or debug them).

Each component asks ``extension(module)`` for its compiled module and uses its
specification when that returns ``None``. Tests switch with ``force_python()`` and see
the fallback with ``not_built(module)``.

Example:
    >>> from pypto import native
    >>> with native.force_python():
    ...     native.extension("pypto.sim._stats") is None
    True
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import ModuleType

from pypto.errors import PyptoError

#: The environment variable that selects the implementation.
ENV = "PYPTO_IMPL"
COMPILED = "compiled"
PYTHON = "python"
#: Its accepted values, the default first.
CHOICES = (COMPILED, PYTHON)


class ImplementationError(PyptoError, ValueError):
    """``PYPTO_IMPL`` holds a value it does not accept."""


_forced: list[str] = []                       # force_python() / force() nest
_loaded: dict[str, ModuleType | None] = {}    # module name -> module, None: not built
_warned = False


def implementation() -> str:
    """``"compiled"`` or ``"python"``: what the components use now.

    Raises:
        ImplementationError: ``PYPTO_IMPL`` is set to something else.
    """
    if _forced:
        return _forced[-1]
    value = os.environ.get(ENV, "").strip().lower()
    if value in CHOICES:
        return value
    if not value:
        return COMPILED
    raise ImplementationError(
        f"environment variable {ENV}={os.environ[ENV]!r} is not one of "
        f"{', '.join(CHOICES)}: set {ENV}=compiled (the default: compiled extensions) or "
        f"{ENV}=python (the Python specifications), or unset it")


def extension(module: str, *, stacklevel: int = 1) -> ModuleType | None:
    """The compiled module ``module`` (e.g. ``"pypto.sim._engine"``), or ``None`` when
    the Python specification is to run instead: ``PYPTO_IMPL=python``, or the module is
    not built. The first such miss in the process warns; ``stacklevel`` is as for
    ``warnings.warn``, counted from the caller of this function (1: that caller's line).

    Raises:
        ImplementationError: ``PYPTO_IMPL`` holds an unknown value.
    """
    if implementation() == PYTHON:
        return None
    if module in _loaded:
        return _loaded[module]
    try:
        found: ModuleType | None = importlib.import_module(module)
    except ImportError as error:
        found = None
        _warn_not_built(module, error, stacklevel + 1)
    _loaded[module] = found
    return found


@contextmanager
def force(choice: str) -> Iterator[None]:
    """Use ``choice`` (one of ``CHOICES``) inside the block, whatever ``PYPTO_IMPL`` says."""
    if choice not in CHOICES:
        raise ImplementationError(f"unknown implementation {choice!r}: use one of "
                                  f"{', '.join(CHOICES)}")
    _forced.append(choice)
    try:
        yield
    finally:
        _forced.pop()


def force_python() -> AbstractContextManager[None]:
    """Run the Python specifications inside the block (as ``PYPTO_IMPL=python``)."""
    return force(PYTHON)


@contextmanager
def not_built(*modules: str) -> Iterator[None]:
    """Inside the block, the compiled ``modules`` import as if they were not built, and
    the process has not warned yet (for tests of the fallback)."""
    global _warned
    saved = {name: sys.modules.get(name, _ABSENT) for name in modules}
    warned = _warned
    _loaded.clear()
    _warned = False
    for name in modules:
        sys.modules[name] = None  # type: ignore[assignment]  # None: importing it fails
    try:
        yield
    finally:
        for name, module in saved.items():
            if module is _ABSENT:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module  # type: ignore[assignment]
        _loaded.clear()
        _warned = warned


_ABSENT = object()


def _warn_not_built(module: str, error: ImportError, stacklevel: int) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    warnings.warn(f"PyPTO's compiled extension {module} is not built ({error}); using its "
                  "Python specification, which is much slower (so will any other extension "
                  "that is missing). Run `pip install -e .` in the source tree to build them.",
                  RuntimeWarning, stacklevel=stacklevel + 1)

