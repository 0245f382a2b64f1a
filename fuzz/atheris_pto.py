"""Atheris (libFuzzer) harness: PTO assembly text -> parse -> check -> execute -> both
timing engines (``fuzz/pto.py``'s ``run_text``). A ``PyptoError`` is the program being
refused, as it should be; any other exception, or a native crash, is a finding that
libFuzzer saves as ``crash-*`` under ``-artifact_prefix``.

Inputs are structure-aware: the custom mutator applies ``fuzz/pto.py``'s edits (edge
values in numbers, swapped mnemonics and memories, spliced lines) most of the time and
libFuzzer's byte mutations otherwise, so most inputs get past the parser.

    pip install -e .[fuzz]
    python fuzz/atheris_pto.py fuzz/seeds -max_total_time=300    # or: fuzz/run.py --atheris
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports(include=["pypto"]):
    import pypto.codegen.asm  # noqa: F401 - instrumented for coverage
    import pypto.sim.check  # noqa: F401
    import pypto.sim.executor  # noqa: F401
    import pypto.sim.reference  # noqa: F401
    import pypto.sim.timing  # noqa: F401

from pto import mutate, run_text, seed_texts  # noqa: E402

SEEDS = seed_texts()


def test_one_input(data: bytes) -> None:
    run_text(data.decode("utf-8", errors="replace"))


def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    if rng.random() < 0.2:
        return atheris.Mutate(data, max_size)
    text = data.decode("utf-8", errors="replace") or rng.choice(SEEDS)
    return mutate(text, rng, SEEDS).encode("utf-8")[:max_size]


def main() -> None:
    atheris.Setup(sys.argv, test_one_input, custom_mutator=custom_mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
