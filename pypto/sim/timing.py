"""``simulate(program, target)``: time a program with the Cython engine, or with the
reference engine when the extension is not built or ``PYPTO_SIM=ref`` asks for it."""

from __future__ import annotations

import os
import warnings

from pypto.codegen.program import Program
from pypto.sim.result import SimResult
from pypto.targets import Target

_warned = False


def engine_name() -> str:
    """``"cython"`` or ``"reference"``: which engine ``simulate`` will use."""
    global _warned
    if os.environ.get("PYPTO_SIM", "").lower() in ("ref", "reference"):
        return "reference"
    try:
        from pypto.sim import _engine  # noqa: F401
    except ImportError:
        if not _warned:
            warnings.warn("PyPTO's Cython timing engine is not built; using the slow reference "
                          "engine. Run `pip install -e .` to build it.", stacklevel=3)
            _warned = True
        return "reference"
    return "cython"


def simulate(program: Program, target: Target, *, bound_cycles: int | None = None,
             trace: bool = False, hazards: bool = False, engine: str | None = None) -> SimResult:
    """Time ``program`` on ``target`` (no numbers are computed).

    ``bound_cycles`` is the roofline bound to report (by default from the program);
    ``trace`` keeps per-instruction start/end; ``hazards`` checks the timed trace for
    races (implies ``trace``).
    """
    from pypto.sim.check import check_program
    from pypto.sim.roofline import program_bound

    use = engine or engine_name()
    if use not in ("cython", "reference"):
        raise ValueError(f"unknown engine {use!r}: use 'cython' or 'reference'")
    # The Cython engine checks the program in its own first pass over it; otherwise (or
    # when the bound, which reads the program too, is wanted first) check it here.
    checked = use == "reference" or bound_cycles is None
    if checked:
        check_program(program, target)
    if bound_cycles is None:
        bound_cycles = program_bound(program, target)
    want_trace = trace or hazards
    if use == "reference":
        from pypto.sim.reference import simulate as run_reference

        result = run_reference(program, target, bound_cycles, trace=want_trace)
    else:
        from pypto.sim.fast import simulate as run_fast

        result = run_fast(program, target, bound_cycles, trace=want_trace, check=not checked)
    if hazards:
        from pypto.sim.hazards import find_hazards

        result.hazards = find_hazards(program, result.trace)  # type: ignore[arg-type]
        if not trace:
            result.trace = result.trace if trace else None
    return result
