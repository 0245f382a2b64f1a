"""``simulate(program, target)``: time a program with the Cython engine, or with the
reference engine (its specification) when ``PYPTO_IMPL=python`` asks for it or the
extension is not built (see ``pypto.native``). Both time what the scalar unit issues
(``pypto.sim.scalar.issue``): a raw block's loops unrolled, its addresses resolved."""

from __future__ import annotations

import functools
from types import ModuleType

from pypto import native
from pypto.codegen.program import Program
from pypto.sim.result import SimResult
from pypto.targets import Target


def engine_name() -> str:
    """``"cython"`` or ``"reference"``: which engine ``simulate`` will use."""
    return "cython" if native.extension("pypto.sim._engine", stacklevel=3) else "reference"


def simulate(program: Program, target: Target, *, bound_cycles: int | None = None,
             trace: bool = False, hazards: bool = False, engine: str | None = None) -> SimResult:
    """Time ``program`` on ``target`` (no numbers are computed).

    ``bound_cycles`` is the roofline bound to report (by default from the program);
    ``trace`` keeps per-instruction start/end; ``hazards`` checks the timed trace for
    races (implies ``trace``).
    """
    from pypto.sim.scalar import issue

    use = engine or engine_name()
    if use not in ("cython", "reference"):
        raise ValueError(f"unknown engine {use!r}: use 'cython' or 'reference'")
    program = issue(program)   # what each core issues (raw mode's loops and registers)
    # The Cython engine checks the program in its own first pass over it; otherwise (or
    # when the bound, which reads the program too, is wanted first) check it here.
    checked = use == "reference" or bound_cycles is None
    if checked:
        from pypto.sim.check import check_program

        check_program(program, target)
    if bound_cycles is None:
        from pypto.sim.roofline import program_bound

        bound_cycles = program_bound(program, target)
    want_trace = trace or hazards
    if use == "reference":
        from pypto.sim.reference import simulate as run_reference

        result = run_reference(program, target, bound_cycles, trace=want_trace)
    else:
        result = _fast().simulate(program, target, bound_cycles, trace=want_trace,
                                  check=not checked)
    if hazards:
        from pypto.sim.hazards import find_hazards

        result.hazards = find_hazards(program, result.trace)  # type: ignore[arg-type]
        if not trace:
            result.trace = None
    return result


@functools.cache
def _fast() -> ModuleType:
    from pypto.sim import fast

    return fast
