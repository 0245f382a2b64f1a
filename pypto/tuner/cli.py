"""``pypto tune``: capture the workloads of a script, tune each, print the outcome.

Kept apart from ``pypto.cli`` so that the command line module stays thin; Rich and
Optuna load only here.
"""

from __future__ import annotations

import contextlib
import io
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pypto.tuner import TuneError
from pypto.tuner.options import TuneOptions


def _open_store(db: str | None) -> Any:
    from pypto.db import open_store, resolve_url
    from pypto.db.location import display_url, sqlite_path
    from pypto.errors import DatabaseError

    url = resolve_url(db)
    path = sqlite_path(url)
    if path is not None and not path.parent.is_dir():
        raise TuneError(f"cannot use database {display_url(url)}: directory {path.parent} "
                        "does not exist")
    store = open_store(url)
    try:
        store.stats()
    except DatabaseError as e:
        raise TuneError(f"cannot use database {display_url(url)}: {e}") from None
    return store, url


def _fmt_us(task: Any, cycles: int | None) -> str:
    return "-" if cycles is None else f"{task.us(cycles):,.2f}"


def run_tune(file: Path, *, kernels: list[str] | None, target: str | None, trials: int,
             strategy: str, db: str | None, timeout: float | None,
             early_stopping: int | None, seed: int | None,
             capture: Callable[..., list[Any]], workers: int = 1, transfer: bool = True,
             shapes: list[str] | None = None) -> int:
    """The ``tune`` command; returns the exit code. Raises ``PyptoError`` for bad input.

    ``trials`` is the total each workload should have on the target, whoever measures it:
    this run's ``workers`` processes, or other runs sharing the database. ``transfer``:
    start each workload from the adapted best schedules of its nearest tuned shapes.
    ``shapes``: ``--shapes`` options, more shapes of the dynamic kernels to tune
    (``pypto.tuner.shapes``).

    SIGINT (Ctrl-C) and SIGTERM stop the run cleanly (``pypto.tuner.interrupt``): one line
    says how many trials are kept and the command that resumes, the summary so far
    follows, and the exit code is 128 + the signal's number (130, 143)."""
    from pypto.tuner.interrupt import catch_signals

    with catch_signals():
        return _run_tune(file, kernels=kernels, target=target, trials=trials,
                         strategy=strategy, db=db, timeout=timeout,
                         early_stopping=early_stopping, seed=seed, capture=capture,
                         workers=workers, transfer=transfer, shapes=shapes)


def _run_tune(file: Path, *, kernels: list[str] | None, target: str | None, trials: int,
              strategy: str, db: str | None, timeout: float | None,
              early_stopping: int | None, seed: int | None,
              capture: Callable[..., list[Any]], workers: int, transfer: bool,
              shapes: list[str] | None) -> int:
    from rich.table import Table

    from pypto.db.location import display_url
    from pypto.frontend.capture import time_limit
    from pypto.report.console import console
    from pypto.tuner.interrupt import Interrupted, interruptible, requested
    from pypto.tuner.shapes import parse_shapes, with_shapes
    from pypto.tuner.strategies import get_strategy
    from pypto.tuner.tasks import extract_tasks
    from pypto.tuner.workers import Pool, check_workers

    get_strategy(strategy, seed)          # unknown name or missing dependency: fail now
    shape_options = parse_shapes(shapes or [])
    if target is not None:
        from pypto.targets import load_target

        load_target(target)
    store, url = _open_store(db)
    check_workers(workers, url)
    out, err = console(), console(stderr=True)
    previous = os.environ.get("PYPTO_DB")
    os.environ["PYPTO_DB"] = url
    try:   # the script's own prints hidden; it runs under --timeout too, and a signal ends it
        with contextlib.redirect_stdout(io.StringIO()), time_limit(timeout, file), \
                interruptible():
            tasks = extract_tasks(with_shapes(capture(file, kernels, target), shape_options))
    except Interrupted as stop:
        err.print(f"interrupted by {stop.signal_name} while running {file} to find its "
                  "kernels: nothing was tuned", markup=False, highlight=False)
        return _exit_code(stop.signal_name)
    finally:
        if previous is None:
            os.environ.pop("PYPTO_DB", None)
        else:
            os.environ["PYPTO_DB"] = previous

    table = Table(title=f"{len(tasks)} workload(s) to tune from {file}")
    for col in ("task", "workload", "target", "space size"):
        table.add_column(col, overflow="fold")
    for t in tasks:
        table.add_row(t.label, t.workload.describe().split(" ", 1)[-1], t.target.name,
                      str(t.space.size()))
    out.print(table)
    err.print(f"strategy {strategy}, {trials} trials per workload, database "
              f"{display_url(url)}" + (f", {workers} worker processes" if workers > 1 else "")
              + (f", seed {seed}" if seed is not None else ""))

    command = _command_line()
    options = TuneOptions(strategy, trials, seed=seed, early_stopping=early_stopping,
                          deadline=time.perf_counter() + timeout if timeout else None,
                          command=command, host=socket.gethostname(), transfer=transfer)
    pool = None
    try:
        if workers > 1:
            pool = Pool(tasks, store, options, workers=workers)
        results = _tune_all(tasks, store, pool, err, options)
    except BaseException:
        if pool is not None:
            pool.close(abort=True)
            pool.end_unfinished("failed")
        raise
    if pool is not None:
        pool.close()
        pool.end_unfinished()       # the tasks a signal kept the run from
    for line in pool.lost() if pool is not None else []:
        err.print(f"{line}; the other workers went on", markup=False)

    summary = Table(title="Tuning results" + (" so far" if requested() else ""))
    for col in ("task", "default µs", "tuned µs", "speedup", "vs roofline", "trials",
                "time s"):
        summary.add_column(col, justify="left" if col == "task" else "right")
    for res in results:
        t = res.task
        summary.add_row(t.label, _fmt_us(t, res.default_cycles),
                        _fmt_us(t, res.best_cycles),
                        f"{res.speedup:.2f}x" if res.speedup else "-",
                        f"{res.efficiency:.0%}" if res.efficiency else "-",
                        str(res.trials_total), f"{res.elapsed:.1f}")
    signal_name = requested()
    if signal_name is not None:
        kept = sum(r.trials_run for r in results)
        resume = command or _resume(file, url, trials)
        err.print(f"interrupted by {signal_name}: {kept} trial(s) measured by this run are "
                  f"kept in {display_url(url)}; resume with: {resume}",
                  markup=False, highlight=False, soft_wrap=True)
    out.print(summary)
    if signal_name is not None:
        return _exit_code(signal_name)
    failed = [r.task.label for r in results if r.status == "failed"]
    if failed:
        err.print(f"error: the workers stopped before {', '.join(failed)} reached {trials} "
                  "trials (see above); run the command again to go on", markup=False)
        return 1
    return 0


def _command_line() -> str:
    """This ``pypto tune`` command as typed (shell-quoted, passwords masked), or "" when
    not run from the command line."""
    import shlex

    from pypto.db.location import mask_urls

    if sys.argv[1:2] != ["tune"] and "tune" not in sys.argv[1:]:
        return ""
    return mask_urls(shlex.join(["pypto", *sys.argv[1:]]))


def _resume(file: Path, url: str, trials: int) -> str:
    import shlex

    from pypto.db.location import mask_url

    return shlex.join(["pypto", "tune", str(file), "--trials", str(trials),
                       "--db", mask_url(url)])


def _exit_code(signal_name: str) -> int:
    import signal

    return 128 + int(signal.Signals[signal_name])


def _tune_all(tasks: list[Any], store: Any, pool: Any, err: Any,
              options: TuneOptions) -> list[Any]:
    """Tune each task in turn (here, or by the workers of ``pool``), with a progress bar
    showing the trials of every worker."""
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from pypto.tuner.interrupt import requested
    from pypto.tuner.loop import tune_task

    trials = options.trials
    results = []
    for i, task in enumerate(tasks):
        if requested():
            break
        with Progress(TextColumn("{task.description}"), BarColumn(),
                      TextColumn("{task.completed}/{task.total} trials"),
                      TextColumn("{task.fields[best]}"), TextColumn("{task.fields[rate]}"),
                      TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                      console=err, transient=False) as progress:
            bar = progress.add_task(task.label, total=trials, best="", rate="")
            first = [True]

            def show(res: Any, bar: Any = bar, progress: Any = progress,
                     first: list[bool] = first) -> None:
                if first[0]:  # the trials done before: no part of the rate behind the ETA
                    first[0] = False
                    progress.reset(bar, completed=res.trials_total)
                best = ""
                if res.best_cycles is not None:
                    best = f"best {res.best_cycles:,} cyc ({_fmt_us(res.task, res.best_cycles)} µs)"
                    if res.speedup:
                        best += f" x{res.speedup:.2f} vs default"
                progress.update(bar, completed=res.trials_total, best=best,
                                rate=f"{res.rate:.1f} trials/s")

            if pool is not None:
                res = pool.tune(i, on_progress=show)
            else:
                res = tune_task(task, store, options, on_start=show, on_progress=show)
            show(res)
        if res.status == "complete":
            err.print(f"{task.label}: already has {res.trials_before} trials on "
                      f"{task.target.name} (asked {trials}): nothing to do")
        else:
            err.print(f"{task.label}: {res.status}: " + ", ".join(_notes(res, pool is not None)))
        results.append(res)
    return results


def _notes(res: Any, pooled: bool = False) -> list[str]:
    """What a task's run did, for its closing line. ``pooled``: workers of this run
    measured it together."""
    notes = [f"{res.trials_run} measured"]
    others = res.trials_total - res.trials_before - res.trials_run
    if others > 0:
        notes.append(f"{others} by other processes")
    if res.rejected:
        notes.append(f"{res.rejected} infeasible point(s) rejected unmeasured")
    if res.duplicates:
        where = "measured or in flight elsewhere" if pooled or others > 0 else \
            "measured already"
        notes.append(f"{res.duplicates} proposal(s) {where} skipped")
    if res.transferred:
        notes.append(f"{res.transferred} schedule(s) transferred from tuned shapes queued")
    if res.mutated or res.uniform:
        notes.append(f"{res.mutated} mutation(s) of the best and {res.uniform} uniform "
                     "point(s) queued after stuck proposals")
    if res.requeued:
        notes.append(f"{res.requeued} schedule(s) of dead workers re-queued")
    if res.errors:
        notes.append(f"{res.errors} failed")
    return notes
