"""Soak test of kills and interruptions: ``pypto tune`` stopped hundreds of times by
SIGKILL, SIGINT and SIGTERM at random moments, on SQLite and PostgreSQL, one process or
``--workers 2``, and resumed each time (``tests/faults.py`` says what is checked).

Run: python scripts/soak.py [--kills N] [--backends sqlite,postgresql] [--seed S]
PostgreSQL needs $PYPTO_TEST_PG_URL (e.g. postgresql+psycopg://postgres@127.0.0.1/test).
Prints the figures (kills survived, trials lost, duplicated, integrity) and writes them to
benchmarks/results/soak.json; the exit status is 1 if anything was lost, duplicated,
corrupted or left behind.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tests.faults import PG_ENV, Campaign, Figures, gemm_script, pg_schema  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "soak.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200,
                        help="signals to send in all (default 200)")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--trials", type=int, default=40, help="trials per campaign")
    parser.add_argument("--stops", type=int, default=8, help="stopped runs per campaign")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=pathlib.Path, default=RESULTS)
    args = parser.parse_args()
    backends = args.backends.split(",")
    if "postgresql" in backends and not os.environ.get(PG_ENV):
        print(f"PostgreSQL skipped: set {PG_ENV}", file=sys.stderr)
        backends.remove("postgresql")
    rng = random.Random(args.seed)
    total = Figures()
    by_case: dict[str, Figures] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="pypto-soak-") as tmp:
        script = gemm_script(pathlib.Path(tmp))
        n = 0
        while sum(total.kills.values()) < args.kills:
            backend = backends[n % len(backends)]
            workers = 2 if (n // len(backends)) % 2 else 1
            case = f"{backend}, {workers} worker(s)"
            n += 1
            if backend == "sqlite":
                campaign = Campaign(script, f"sqlite:///{tmp}/soak{n}.db", args.trials,
                                    rng=rng, workers=workers)
                figures = campaign.run(args.stops)
            else:
                with pg_schema(os.environ[PG_ENV]) as url:
                    figures = Campaign(script, url, args.trials, rng=rng,
                                       workers=workers).run(args.stops)
            total.add(figures)
            by_case.setdefault(case, Figures()).add(figures)
            print(f"campaign {n} ({case}): {dict(figures.kills)}, runs {figures.runs}, "
                  f"lost {figures.lost}, duplicated {figures.duplicated}, exact "
                  f"{figures.exact}/{figures.campaigns}"
                  + (f", problems: {figures.unclean_stops}" if figures.unclean_stops else ""),
                  flush=True)
    elapsed = time.perf_counter() - start
    kills = sum(total.kills.values())
    print(f"\n{kills} signals ({', '.join(f'{k} {v}' for k, v in sorted(total.kills.items()))})"
          f" over {total.campaigns} campaigns and {total.runs} runs in {elapsed:.0f} s")
    print(f"finished trials read before a signal: {total.trials_seen}; lost {total.lost}; "
          f"recorded twice {total.duplicated}; integrity failures "
          f"{total.integrity_failures}; hung {total.hung}; unclean SIGINT/SIGTERM stops "
          f"{len(total.unclean_stops)}; campaigns ending with exactly their trials "
          f"{total.exact}/{total.campaigns}; Optuna trials of killed workers still RUNNING "
          f"after the last run (failed by a later one) {total.orphans}")
    for case, f in sorted(by_case.items()):
        print(f"  {case}: {sum(f.kills.values())} signals, lost {f.lost}, duplicated "
              f"{f.duplicated}, exact {f.exact}/{f.campaigns}")
    for problem in total.unclean_stops:
        print(f"  problem: {problem}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "command": " ".join(["python", "scripts/soak.py", *sys.argv[1:]]),
        "signals": dict(total.kills), "campaigns": total.campaigns, "runs": total.runs,
        "trials_seen_before_signals": total.trials_seen, "lost": total.lost,
        "duplicated": total.duplicated, "integrity_failures": total.integrity_failures,
        "hung": total.hung, "unclean_stops": total.unclean_stops, "exact": total.exact,
        "orphans": total.orphans,
        "seconds": round(elapsed), "by_case": {c: {"signals": dict(f.kills), "lost": f.lost,
                                                   "duplicated": f.duplicated,
                                                   "exact": f.exact,
                                                   "campaigns": f.campaigns}
                                               for c, f in by_case.items()},
    }, indent=2) + "\n")
    return 0 if total.ok else 1


if __name__ == "__main__":
    sys.exit(main())
