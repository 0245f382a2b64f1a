"""Soak test of the simulator's physics: the checks of tests/test_sim_physics.py
(cycles >= roofline bound, cold-L2 DRAM reads >= compulsory input bytes, DRAM writes >=
compulsory output bytes, each pipe's busy <= its core's cycles) on many more random
programs: every op family on every target, in turn, with random shapes and schedules.

Run: python scripts/sim_physics_soak.py [COUNT] [--seed S] [--schedules N]
COUNT (default 20,000) is the number of programs to check; the first failure stops the
run and prints the family, target, seed and the assertion.
"""

from __future__ import annotations

import argparse
import itertools
import pathlib
import random
import sys
import time
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from pypto.targets import available_targets  # noqa: E402
from tests.test_sim_physics import FAMILIES, Pick, run_case  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("count", nargs="?", type=int, default=20_000,
                        help="programs to check (default 20,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--schedules", type=int, default=8,
                        help="random schedules per lowered instance")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    cases = itertools.cycle([(f, t) for f in sorted(FAMILIES) for t in available_targets()])
    checked, start = 0, time.perf_counter()
    per_case: dict[str, int] = {}
    while checked < args.count:
        family, target = next(cases)
        seed = rng.randrange(2**32)
        try:
            n = run_case(family, target, Pick(rng=random.Random(seed)), seed,
                         args.schedules)
        except AssertionError:
            print(f"FAILED: {family} on {target}, seed {seed}")
            traceback.print_exc()
            raise SystemExit(1) from None
        checked += n
        per_case[family] = per_case.get(family, 0) + n
    elapsed = time.perf_counter() - start
    print(f"{checked:,} programs checked in {elapsed:.0f} s, none beats physics: "
          + ", ".join(f"{f} {n:,}" for f, n in sorted(per_case.items())))


if __name__ == "__main__":
    main()
