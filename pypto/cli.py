"""The ``pypto`` command line (Typer). Thin: parses, calls library functions, prints.

Exit codes: 0 success; 1 bad input (a message on stderr, no traceback); 2 bad usage.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from pypto import cli_output
from pypto.cli_db import db_app
from pypto.cli_output import LEVELS, GlobalOptionsGroup, check_tune_options, writable_file
from pypto.db.location import DEFAULT_HELP, display_url, locate
from pypto.db.logs import import_pending
from pypto.errors import PyptoError

app = typer.Typer(help="PyPTO: NPU kernels as NumPy-style Python, scheduled by search. "
                       "The options below may come before or after the command.",
                  no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False,
                  cls=GlobalOptionsGroup)
app.add_typer(db_app, name="db")

FileArg = Annotated[Path, typer.Argument(help="A Python script that calls @pypto.kernel "
                                              "functions.", show_default=False)]
KernelOpt = Annotated[list[str] | None, typer.Option(
    "--kernel", "-k", help="Only kernels with this name (repeatable).")]
TargetOpt = Annotated[str | None, typer.Option(
    "--target", "-t", help="Target to compile for (default: the script's context).")]


def _show_version(value: bool) -> None:
    if value:
        typer.echo(cli_output.version_text())
        raise typer.Exit()


@app.callback()
def main_options(
        verbose: Annotated[int, typer.Option(
            "--verbose", "-v", count=True, help="Say more on stderr: -v what PyPTO does "
                                                "(info), -vv details (debug).")] = 0,
        log_level: Annotated[str | None, typer.Option(
            "--log-level", help=f"The least important messages shown: {', '.join(LEVELS)} "
                                "(default warning).", show_default=False)] = None,
        traceback: Annotated[bool, typer.Option(
            "--traceback", help="On an error, show the whole traceback (a failed script's "
                                "own) before the one-line message.")] = False,
        version: Annotated[bool, typer.Option(
            "--version", callback=_show_version, is_eager=True,
            help="Print the version and exit.")] = False) -> None:
    """The options of every command (``GlobalOptionsGroup`` takes them anywhere)."""
    cli_output.configure(verbose, log_level, traceback)


fail = cli_output.fail


def _captured(file: Path, kernels: list[str] | None, target: str | None):  # type: ignore[no-untyped-def]
    """Run FILE in capture mode; the compiled kernels it calls (deduplicated)."""
    import warnings

    from pypto.errors import ScheduleFallbackWarning

    with warnings.catch_warnings(), cli_output.script_output():
        # which workloads lack a tuned schedule is what `space` and `asm` show anyway
        warnings.simplefilter("ignore", ScheduleFallbackWarning)
        return _capture_calls(file, kernels, target)


def _capture_calls(file: Path, kernels: list[str] | None, target: str | None):  # type: ignore[no-untyped-def]
    from pypto.frontend.capture import capture, run_script

    with capture() as cap:
        run_script(file)
    calls = cap.unique()
    logging.getLogger("pypto.cli").info("%s ran %d kernel call(s), %d distinct", file,
                                        len(cap.calls), len(calls))
    if not calls:
        raise fail(f"{file} ran no @pypto.kernel on the NPU (define a kernel and call it "
                   "under pypto.Context(device_type='npu'), the default)")
    if kernels:
        calls = [c for c in calls if c.name in kernels]
        if not calls:
            names = sorted({c.name for c in cap.calls})
            raise fail(f"no kernel named {', '.join(kernels)} ran; kernels that ran: "
                       f"{', '.join(names)}")
    if target is not None:
        from pypto.targets import load_target

        tgt = load_target(target)
        calls = [c.retarget(tgt) for c in calls]  # the kernel's own options are kept
    return calls


@app.command()
def targets() -> None:
    """List the hardware targets PyPTO knows."""
    from pypto.targets import available_targets, load_target

    for name in available_targets():
        t = load_target(name)
        typer.echo(f"{name:<12} {t.vendor:<10} {t.cube_cores} cube + {t.vector_cores} vector "
                   f"cores @ {t.clock_ghz} GHz, {t.peak_flops('float16') / 1e12:.0f} TFLOP/s "
                   f"fp16, key {t.key[:12]}  {t.description}")


@app.command()
def space(file: FileArg, kernel: KernelOpt = None, target: TargetOpt = None) -> None:
    """Show each workload FILE runs: its schedule axes and the size of its space."""
    from pypto.schedule_space import space_for

    try:
        for c in _captured(file, kernel, target):
            for i, wl in enumerate(c.workloads):
                if c.sources[i] == "raw":
                    typer.echo(f"[{c.name} workload {i}] a raw block (pypto.inline_asm): it "
                               "runs as written, with no schedule space\n")
                    continue
                typer.echo(f"[{c.name} workload {i}] {space_for(wl, c.target).describe()}")
                typer.echo(f"  schedule ({c.sources[i]}): {c.schedules[i].to_json()}\n")
    except PyptoError as exc:
        raise fail(str(exc)) from None


@app.command()
def asm(file: FileArg, kernel: KernelOpt = None, target: TargetOpt = None) -> None:
    """Print the PTO assembly of the kernels FILE runs."""
    try:
        for c in _captured(file, kernel, target):
            typer.echo(f"; kernel {c.name} on {c.target.name}")
            typer.echo(c.asm())
    except PyptoError as exc:
        raise fail(str(exc)) from None


@app.command()
def run(file: FileArg,
        profile: Annotated[bool, typer.Option(help="Profile every kernel call.")] = False,
        html: Annotated[Path | None, typer.Option(help="With --profile: write the HTML "
                                                       "timeline here.")] = None,
        trace: Annotated[Path | None, typer.Option(help="With --profile: write Chrome "
                                                        "trace JSON here.")] = None) -> None:
    """Run FILE on the simulated NPU (with --profile, report where the time goes)."""
    from pypto.frontend.capture import run_script
    from pypto.report.profiler import Profiler

    if (html or trace) and not profile:
        raise fail("--html and --trace need --profile")
    for path, option in ((html, "--html"), (trace, "--trace")):
        if path is not None:  # before the script runs: it may run for minutes
            writable_file(path, option)
    try:
        if not profile:
            run_script(file)
            return
        with Profiler() as prof:
            run_script(file)
    except PyptoError as exc:
        raise fail(str(exc)) from None
    typer.echo(prof.report())
    if html:
        typer.echo(f"HTML timeline: {prof.visualize(html)}")
    if trace:
        typer.echo(f"Chrome trace: {prof.export_chrome_trace(trace)}")


@app.command()
def report(db: Annotated[str | None, typer.Option(
               help=f"Schedule database URL ({DEFAULT_HELP}).")] = None,
           target: Annotated[str | None, typer.Option(
               "--target", "-t", help="Only this target's records.")] = None,
           workload: Annotated[list[str] | None, typer.Option(
               "--workload", "-w", help="Only this workload (a key or a unique prefix; "
                                        "repeatable).")] = None,
           output: Annotated[Path, typer.Option(
               "--output", "-o", help="The HTML file to write.")] = Path("tuning_report.html"),
           ) -> None:
    """Write the tuning report: one self-contained HTML page (summary table, best-so-far
    curves, all trials, parameter importance, top schedules, roofline)."""
    writable_file(output, "--output")
    _write_report(db, target, workload or [], output)


def _write_report(db: str | None, target: str | None, workloads: list[str],
                  output: Path) -> None:
    from pypto.db import display_url, open_store
    from pypto.report.tuning_html import write_report

    try:
        with open_store(db) as store:
            if not store.stats().exists:
                raise fail(f"no schedule database at {display_url(store.url)}: tune first "
                           "(`pypto tune FILE`) or give --db")
            if target is not None and target not in {t.name for t in store.targets()}:
                known = ", ".join(t.name for t in store.targets()) or "none"
                raise fail(f"no records for target {target!r} in {display_url(store.url)} "
                           f"(targets there: {known})")
            keys = [store.workload(w).key for w in workloads]
            path = write_report(store, output, target=target, workloads=keys)
    except PyptoError as exc:
        raise fail(str(exc)) from None
    typer.echo(f"tuning report: {path}")


@app.command()
def dashboard(db: Annotated[str | None, typer.Option(
                  help="Schedule database URL (default: $PYPTO_DB, else "
                       "tuning_logs/pypto.db).")] = None,
              host: Annotated[str, typer.Option(help="Address to serve on.")] = "127.0.0.1",
              port: Annotated[int, typer.Option(help="Port to serve on.", min=1,
                                                max=65535)] = 8080) -> None:
    """Open the database's Optuna studies in optuna-dashboard (pip install
    optuna-dashboard): a study per workload and target, trials with real schedule values."""
    from pypto.tuner.dashboard import run_dashboard

    try:
        run_dashboard(db, host=host, port=port, echo=typer.echo)
    except PyptoError as exc:
        raise fail(str(exc)) from None


@app.command()
def tune(file: FileArg, kernel: KernelOpt = None, target: TargetOpt = None,
         trials: Annotated[int, typer.Option(
             "--trials", "-n", help="Measured trials each workload should have on the target "
                                    "in total (a rerun measures only the remainder).")] = 100,
         strategy: Annotated[str, typer.Option(
             "--strategy", "-s", help="Search strategy: random, tpe, grid, gp, cmaes, model (a "
                                    "learned cost model ranks candidate pools).")] = "model",
         db: Annotated[str | None, typer.Option(
             help=f"Schedule database URL ({DEFAULT_HELP}).")] = None,
         timeout: Annotated[float | None, typer.Option(
             help="Stop tuning after this many seconds (all workloads).")] = None,
         early_stopping: Annotated[int | None, typer.Option(
             "--early-stopping", help="Stop a workload after this many trials in a row "
                                      "without a better schedule, counted once one has "
                                      "beaten the default (until then it goes on to "
                                      "--trials).")] = None,
         seed: Annotated[int | None, typer.Option(help="Seed: a seeded run is "
                                                       "reproducible.")] = None,
         workers: Annotated[int, typer.Option(
             "--workers", "-j", help="Worker processes on this machine tuning each workload "
                                     "together (other runs on the same --db join in too).")
                            ] = 1,
         transfer: Annotated[bool, typer.Option(
             "--transfer/--no-transfer", help="Start each workload from the best schedules "
                                              "of the nearest tuned shapes of its family, "
                                              "adapted.")] = True,
         report: Annotated[Path | None, typer.Option(
             "--report", help="Afterwards write the tuning report of the database (as "
                              "`pypto report`) to this HTML file.")] = None,
         shapes: Annotated[list[str] | None, typer.Option(
             "--shapes", help="More shapes of a dynamic kernel (dynamic_shape=True) to "
                              "tune, besides those the script ran (repeatable; options "
                              "combine). ARG.DIM=LO..HI tunes one size per shape bucket "
                              "in LO..HI (the bucket's upper bound: 64, 128, ... with "
                              "power-of-two buckets); ARG.DIM=N,N,... these sizes. ARG is "
                              "a parameter name or position; a prefix KERNEL: limits it "
                              "to one kernel; several ARG.DIM, comma-separated, take the "
                              "same size. E.g. --shapes x.0=1..4096, --shapes "
                              "gemm:a.1,b.0=256,1024.")] = None) -> None:
    """Tune the schedules of the workloads FILE runs; results go to the database."""
    from pypto.tuner.cli import run_tune

    check_tune_options(trials=trials, workers=workers, timeout=timeout,
                       early_stopping=early_stopping, seed=seed)
    if report is not None:
        writable_file(report, "--report")
    # the database as the script finds it when it runs (pypto.db.location), said once
    where = locate(db, script=file)
    logging.getLogger("pypto.cli").info("database %s (%s)", display_url(where.url), where.why)
    try:
        if where.logs is not None:  # as the script's first compile would: --trials counts them
            import_pending(where.url, where.logs)
        code = run_tune(file, kernels=kernel, target=target, trials=trials, strategy=strategy,
                        db=where.url, timeout=timeout, early_stopping=early_stopping,
                        seed=seed, capture=_captured, workers=workers, transfer=transfer,
                        shapes=shapes)
    except PyptoError as exc:
        raise fail(str(exc)) from None
    if report is not None:
        _write_report(where.url, None, [], report)
    if code:
        raise typer.Exit(code)


def main() -> None:  # pragma: no cover - the console script
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
