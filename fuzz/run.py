"""A bounded fuzz campaign over PTO programs, in child processes, with figures at the end.

    python fuzz/run.py --programs 100000 --workers 2      # mutated programs, by count
    python fuzz/run.py --seconds 600                      # ... or for a time
    python fuzz/run.py --atheris --seconds 300            # libFuzzer through Atheris

Each mutated program (``fuzz/pto.py``: a seed of ``fuzz/seeds/`` changed by 1-4 edits,
reproducible from ``--seed`` and its index) goes through parse -> check -> the functional
executor -> both timing engines. The children run the programs; this process only
watches them, so a native crash (a signal) kills one child, not the campaign: the input
it was running is saved under ``OUT/findings/`` and a new child goes on after it. A
Python exception other than a ``PyptoError`` is saved there too, with its traceback; a
program still running after ``--timeout`` seconds is saved as a hang. The summary
(``OUT/summary.json``) counts programs, outcomes, crashes, exceptions and hangs.

With ``--atheris`` the campaign is libFuzzer's (coverage-guided, ``fuzz/atheris_pto.py``,
``pip install -e .[fuzz]``), started from the seeds; its crash inputs land in
``OUT/findings/`` as libFuzzer writes them.
"""

from __future__ import annotations

import argparse
import collections
import faulthandler
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


class _Hang(Exception):
    pass


def program_text(seeds: list[str], seed: int, index: int) -> str:
    """The ``index``-th mutated program of a campaign seeded ``seed`` (reproducible)."""
    from pto import mutate

    rng = random.Random(f"{seed}:{index}")
    return mutate(rng.choice(seeds), rng, seeds)


# -- a child: runs programs start, start + step, ... ---------------------------------------


def work(args: argparse.Namespace) -> None:
    from pto import run_text, seed_texts

    faulthandler.enable()      # a native crash prints where it was to stderr
    seeds = seed_texts()
    out = Path(args.out)
    current = out / f"current-{args.child}.pto"
    findings = out / "findings"
    deadline = time.monotonic() + args.seconds if args.seconds else None

    def alarm(*_: object) -> None:
        raise _Hang()

    signal.signal(signal.SIGALRM, alarm)
    index = args.start
    while index < args.programs and (deadline is None or time.monotonic() < deadline):
        text = program_text(seeds, args.seed, index)
        current.write_text(f"; index {index}\n{text}")
        if index == args.crash_at:   # the driver's own test: a native crash, on purpose
            os.kill(os.getpid(), signal.SIGSEGV)
        signal.alarm(args.timeout)
        try:
            outcome = run_text(text)
        except _Hang:
            outcome = "HANG"
            (findings / f"hang-{index}.pto").write_text(text)
        except Exception:  # noqa: BLE001 - any non-PyPTO exception is what we look for
            outcome = "EXCEPTION"
            (findings / f"exception-{index}.pto").write_text(text)
            (findings / f"exception-{index}.txt").write_text(traceback.format_exc())
        finally:
            signal.alarm(0)
        print(outcome, flush=True)    # one line per program: the campaign counts them
        index += args.step


# -- the campaign: children, crashes, figures ----------------------------------------------


def campaign(args: argparse.Namespace) -> int:
    out = Path(args.out)
    (out / "findings").mkdir(parents=True, exist_ok=True)
    programs = args.programs if args.programs else 1 << 62
    started = time.monotonic()
    totals: collections.Counter[str] = collections.Counter()
    children: dict[int, tuple[subprocess.Popen[str], int]] = {}

    def spawn(child: int, start: int) -> None:
        left = args.seconds - (time.monotonic() - started) if args.seconds else 0
        if args.seconds and left <= 1:
            return
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(child),
               "--start", str(start), "--step", str(args.workers), "--seed", str(args.seed),
               "--programs", str(programs), "--timeout", str(args.timeout), "--out", str(out),
               "--crash-at", str(args.crash_at)]
        if args.seconds:
            cmd += ["--seconds", f"{left:.1f}"]
        stderr = open(out / f"stderr-{child}.txt", "w")  # noqa: SIM115 - the child's
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                env={**os.environ, "PYTHONPATH": _pythonpath()})
        children[child] = (proc, start)

    for child in range(args.workers):
        spawn(child, child)
    shown = 0.0
    while children:
        streams = {proc.stdout: child for child, (proc, _) in children.items()}
        for ready, _ in selectors_ready(list(streams)):
            child = streams[ready]
            line = ready.readline()
            if line:
                totals[line.strip()] += 1
                continue
            proc, _start = children.pop(child)
            if proc.wait() == 0:
                continue
            # died on a signal: the input it ran is a finding; a new child goes on after it
            current = out / f"current-{child}.pto"
            text = current.read_text() if current.exists() else ""
            found = re.match(r"; index (\d+)\n", text)
            index = int(found.group(1)) if found else -1
            saved = out / "findings" / f"crash-{index}.pto"
            saved.write_text(text[found.end():] if found else text)
            shutil.copy(out / f"stderr-{child}.txt", saved.with_suffix(".txt"))
            totals["CRASH"] += 1
            if index >= 0:
                spawn(child, index + args.workers)
        if not args.quiet and time.monotonic() - shown > 5:
            shown = time.monotonic()
            print(f"\r{sum(totals.values()):,} programs, {shown - started:,.0f} s",
                  end="", file=sys.stderr, flush=True)
    elapsed = time.monotonic() - started
    summary = {
        "programs": sum(totals.values()), "seconds": round(elapsed, 1),
        "per_second": round(sum(totals.values()) / max(elapsed, 1e-9), 1),
        "workers": args.workers, "seed": args.seed, "timeout": args.timeout,
        "native_crashes": totals["CRASH"], "non_pypto_exceptions": totals["EXCEPTION"],
        "hangs": totals["HANG"], "outcomes": dict(totals.most_common()),
        "findings": sorted(str(p) for p in (out / "findings").iterdir()),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(file=sys.stderr)
    _print_summary(summary)
    bad = summary["native_crashes"] + summary["non_pypto_exceptions"] + summary["hangs"]
    return 1 if bad else 0


def _print_summary(summary: dict) -> None:
    print(f"programs             {summary['programs']:,}")
    print(f"time                 {summary['seconds']:,} s ({summary['per_second']:,} "
          f"programs/s, {summary['workers']} worker(s))")
    print(f"native crashes       {summary['native_crashes']}")
    print(f"non-PyPTO exceptions {summary['non_pypto_exceptions']}")
    print(f"hangs (> {summary['timeout']} s)      {summary['hangs']}")
    print("outcomes             " + ", ".join(f"{k} {v:,}" for k, v in
                                             summary["outcomes"].items()))
    for path in summary["findings"]:
        print(f"  finding: {path}")


def selectors_ready(files: list) -> list:  # type: ignore[type-arg]
    """The files of ``files`` with a line (or their end) to read, waiting for one."""
    import selectors

    with selectors.DefaultSelector() as sel:
        for f in files:
            sel.register(f, selectors.EVENT_READ)
        return [(key.fileobj, mask) for key, mask in sel.select()]


def _pythonpath() -> str:
    parts = [str(HERE), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return os.pathsep.join(p for p in parts if p)


# -- Atheris ---------------------------------------------------------------------------------


def atheris_campaign(args: argparse.Namespace) -> int:
    out = Path(args.out)
    corpus, findings = out / "corpus", out / "findings"
    corpus.mkdir(parents=True, exist_ok=True)
    findings.mkdir(parents=True, exist_ok=True)
    for seed in sorted((HERE / "seeds").glob("*.pto")):
        shutil.copy(seed, corpus / seed.name)
    cmd = [sys.executable, str(HERE / "atheris_pto.py"), str(corpus),
           f"-artifact_prefix={findings}/", f"-timeout={args.timeout}", "-rss_limit_mb=4096",
           "-print_final_stats=1", f"-seed={args.seed or 1}"]
    if args.seconds:
        cmd.append(f"-max_total_time={int(args.seconds)}")
    if args.programs:
        cmd.append(f"-runs={args.programs}")
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": _pythonpath()})
    (out / "libfuzzer.txt").write_text(proc.stderr)
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", proc.stderr)
    summary = {"engine": "atheris", "returncode": proc.returncode,
               "programs": int(runs[-1]) if runs else None,
               "seconds": round(time.monotonic() - started, 1),
               "findings": sorted(str(p) for p in findings.iterdir()),
               "command": " ".join([Path(sys.executable).name, *sys.argv])}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0 if proc.returncode == 0 and not summary["findings"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--programs", type=int, default=0, help="how many programs (0: no "
                                                                "limit, give --seconds)")
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after this long")
    parser.add_argument("--workers", type=int, default=1, help="child processes")
    parser.add_argument("--seed", type=int, default=0, help="campaign seed")
    parser.add_argument("--timeout", type=int, default=60, help="seconds one program may take")
    parser.add_argument("--out", default="fuzz/out", help="findings and summary go here")
    parser.add_argument("--atheris", action="store_true", help="run the Atheris harness")
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    # a child's own options
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--step", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--crash-at", type=int, default=-1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not args.programs and not args.seconds:
        parser.error("give --programs N or --seconds S: a campaign is bounded")
    if args.workers < 1 or args.timeout < 1:
        parser.error("--workers and --timeout must be at least 1")
    if args.child is not None:
        sys.path.insert(0, str(HERE))
        work(args)
        return 0
    return atheris_campaign(args) if args.atheris else campaign(args)


if __name__ == "__main__":
    sys.exit(main())
