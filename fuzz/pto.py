"""PTO programs as fuzz inputs: the seeds, a mutator, and ``run_text``, the one function
every fuzzer here calls (the Hypothesis tests, the Atheris harness, ``fuzz/run.py``).

``run_text`` takes assembly text through everything a user's program meets: parse ->
``check_program`` -> the functional executor (on GM arrays of the program's tensors) ->
the Cython timing engine -> the reference timing engine. It returns what happened
(``"ok"`` or the name of the ``PyptoError`` subclass that refused the program); any other
exception escapes, and a native crash kills the process: both are findings.

Imports only the standard library, NumPy and PyPTO: the harness must load in a bare
interpreter (Atheris runs it as a script).
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np

SEEDS = Path(__file__).resolve().parent / "seeds"

#: GM bytes the harness allocates for one program's tensors: a mutated ``.tensor`` line
#: can declare any size, and allocating it is the harness's doing, not PyPTO's.
MAX_GM_BYTES = 1 << 26

#: values mutations put into numbers: the edges of every integer field of an instruction
#: (i1, i2, i4, i8), of float64's integers, and past int64
INTERESTING = (0, 1, -1, 2, 3, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255, 256, 511, 512,
               1023, 1024, 4095, 4096, 4999, 5000, 32767, 32768, 65535, 65536, 2**31 - 1,
               2**31, 2**32 - 1, 2**32, 2**53, 2**53 + 1, 2**62, 2**63 - 8, 2**63 - 1, 2**63,
               2**64 - 1, 2**64, 10**30)

_NUMBER = re.compile(r"-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?)")
_MNEMONICS = ("COPY", "MMAD", "SET_FLAG", "WAIT_FLAG", "BARRIER", "SYNC_ALL", "VADD", "VSUB",
              "VMUL", "VDIV", "VMAX", "VMIN", "VSEL", "VCMPEQ", "VCMPLT", "VADDS", "VMULS",
              "VMAXS", "VCOPY", "VRELU", "VEXP", "VLN", "VSQRT", "VRSQRT", "VRECIP", "VGELU",
              "VCAST", "VDUP", "VREDSUM", "VREDMAX", "MOV", "ADD", "SUB", "MUL", "BNE", "BLT",
              "VLD", "VST", "NOP")
_WORDS = ("GM", "L1", "L0A", "L0B", "L0C", "UB", "SRAM", "NRAM", "WRAM", "Q", "MTE1", "MTE2",
          "MTE3", "CUBE", "FIX", "VEC", "SCALAR", "F16", "F32", "S8", "S32", "BF16", "U8",
          "R0", "R31", "R32", "Q0", "Q31", "Q32", ".core", ".tensor", ".program", "in", "out",
          "tmp", "#", "[", "]", ":", ",", "x", "+", "-", ";")


def seed_texts() -> list[str]:
    """The seed programs (``fuzz/seeds/*.pto``, written by ``fuzz/make_seeds.py``)."""
    return [p.read_text() for p in sorted(SEEDS.glob("*.pto"))]


def mutate(text: str, rng: random.Random, others: list[str] | None = None,
           rounds: int | None = None) -> str:
    """``text`` changed by 1-4 random edits: numbers set to edge values or nudged,
    mnemonics and words swapped, lines deleted, duplicated, swapped or spliced in from
    ``others``, characters flipped, the text cut short."""
    lines = text.splitlines()
    for _ in range(rounds if rounds is not None else rng.randint(1, 4)):
        if not lines:
            lines = [""]
        i = rng.randrange(len(lines))
        kind = rng.randrange(10)
        if kind <= 2:
            lines[i] = _number(lines[i], rng)
        elif kind == 3:
            lines[i] = _swap_word(lines[i], rng, _MNEMONICS)
        elif kind == 4:
            lines[i] = _swap_word(lines[i], rng, _WORDS)
        elif kind == 5:
            del lines[i]
        elif kind == 6:
            lines.insert(i, lines[rng.randrange(len(lines))])
        elif kind == 7 and others:
            donor = rng.choice(others).splitlines()
            if donor:
                lines.insert(i, rng.choice(donor))
        elif kind == 8:
            line = lines[i]
            at = rng.randrange(len(line) + 1)
            lines[i] = line[:at] + chr(rng.choice((0, 9, 10, 13, 27, 32, 35, 44, 58, 91, 93,
                                                    rng.randrange(32, 127), 0xFFFD,
                                                    rng.randrange(0x80, 0x3000)))) + line[at + 1:]
        else:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
    out = "\n".join(lines)
    if rng.random() < 0.02:
        out = out[:rng.randrange(len(out) + 1)]
    return out


def _number(line: str, rng: random.Random) -> str:
    found = list(_NUMBER.finditer(line))
    if not found:
        return line
    m = rng.choice(found)
    old = m.group()
    try:
        value = int(old, 0) if "." not in old else int(float(old))
    except ValueError:
        value = 0
    choice = rng.randrange(4)
    if choice == 0:
        new = rng.choice(INTERESTING)
    elif choice == 1:
        new = value + rng.choice((-1, 1, -16, 16, 32, -32, 512))
    elif choice == 2:
        new = -rng.choice(INTERESTING)
    else:
        new = value * rng.choice((2, 3, 16, 1 << 20))
    text = hex(new) if old.startswith(("0x", "-0x")) and new >= 0 else str(new)
    return line[:m.start()] + text + line[m.end():]


def _swap_word(line: str, rng: random.Random, words: tuple[str, ...]) -> str:
    found = list(re.finditer(r"[A-Za-z_.#\[\]:,+;-][A-Za-z0-9_]*", line))
    if not found:
        return line + " " + rng.choice(words)
    m = rng.choice(found)
    return line[:m.start()] + rng.choice(words) + line[m.end():]


def gm_arrays(program, seed: int = 0) -> list[np.ndarray] | None:  # type: ignore[no-untyped-def]
    """Random flat arrays for the program's tensors (None when they would take more than
    ``MAX_GM_BYTES``: the harness does not allocate what a text merely declares)."""
    if sum(s.size * s.dtype.itemsize for s in program.symbols) > MAX_GM_BYTES:
        return None
    rng = np.random.default_rng(seed)
    out = []
    for s in program.symbols:
        values = rng.integers(-4, 5, size=s.size)
        out.append(values.astype(s.dtype.np))
    return out


def mutate_program(program, rng: random.Random, edits: int = 3):  # type: ignore[no-untyped-def]
    """A copy of ``program`` with ``edits`` fields of random instructions set to edge
    values of their type (what a program built in code, not parsed, may hold)."""
    import dataclasses

    cores = [stream.copy() for stream in program.cores]
    for _ in range(edits):
        stream = rng.choice(cores) if cores else None
        if stream is None or not len(stream):
            continue
        field = rng.choice(stream.dtype.names)
        info = np.iinfo(stream.dtype[field]) if stream.dtype[field].kind in "iu" else None
        value = rng.choice(INTERESTING) * rng.choice((1, -1))
        if info is not None:
            value = min(max(value, info.min), info.max)
        stream[field][rng.randrange(len(stream))] = value
    return dataclasses.replace(program, cores=tuple(cores))


def run_text(text: str, *, engines: tuple[str, ...] = ("cython", "reference")) -> str:
    """Parse, check, execute and time ``text`` (see the module doc); the outcome."""
    from pypto.codegen.asm import parse
    from pypto.errors import PyptoError

    try:
        program = parse(text)
    except PyptoError as e:
        return type(e).__name__
    return run_program(program, engines=engines)


def run_program(program, *, engines: tuple[str, ...] = ("cython", "reference")) -> str:  # type: ignore[no-untyped-def]
    """Check, execute and time ``program`` on its target; the outcome (as ``run_text``)."""
    from pypto.errors import PyptoError
    from pypto.sim.check import check_program
    from pypto.sim.executor import execute
    from pypto.sim.timing import simulate
    from pypto.targets import load_target

    try:
        target = load_target(program.target)
        check_program(program, target)
        gm = gm_arrays(program)
        if gm is not None:
            execute(program, target, gm)
        for engine in engines:
            simulate(program, target, engine=engine)
    except PyptoError as e:
        return type(e).__name__
    return "ok" if gm is not None else "ok (not executed: GM too large)"
