"""``pypto db ...``: look into, share and maintain the schedule database (Typer sub-app).

Every command takes ``--db URL`` (a SQLAlchemy URL or a SQLite file path; default
``$PYPTO_DB``, else the database ``pypto.db.location`` finds). Errors: one line on stderr,
exit 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pypto.cli_output import echo
from pypto.db.location import DEFAULT_HELP
from pypto.errors import PyptoError

if TYPE_CHECKING:
    from pypto.db.store import ScheduleStore

db_app = typer.Typer(help="The schedule database: stats, list, show, best, export, import, "
                          "prune, upgrade.", no_args_is_help=True, add_completion=False,
                     pretty_exceptions_enable=False)

DbOpt = Annotated[str | None, typer.Option(
    "--db", help=f"Database URL or SQLite file ({DEFAULT_HELP}).", show_default=False)]
KeyArg = Annotated[str, typer.Argument(help="A workload key, or a unique prefix of one "
                                            "(`pypto db list` shows them).",
                                       show_default=False)]
FileArg = Annotated[Path, typer.Argument(help="A JSON-lines file.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead "
                                                     "of text (for scripts).")]


def _echo_json(value: object) -> None:
    import json

    # json escapes every control character: the text is printable as it is
    typer.echo(json.dumps(value, indent=2, sort_keys=True))


def _record_json(record, workload) -> dict:  # type: ignore[no-untyped-def]
    """A record as the JSON-lines logs write it, without its workload (given once)."""
    from pypto.db.jsonl import record_to_json

    out = record_to_json(record, workload)
    del out["workload"], out["version"]
    out["run_id"] = record.run_id
    return out


def _fail(message: str) -> typer.Exit:
    echo(f"error: {message}", err=True)
    return typer.Exit(1)


@contextmanager
def _store(url: str | None) -> Iterator[ScheduleStore]:
    """The store at ``url``; any PyPTO error (or OS error) becomes one line and exit 1."""
    from pypto.db import open_store

    try:
        store = open_store(url)
        try:
            yield store
        finally:
            store.close()
    except PyptoError as e:
        raise _fail(str(e)) from None
    except BrokenPipeError:
        # the reader went away (`pypto db list | head`): what it read is what it wanted
        _quiet_stdout()
        raise typer.Exit(141) from None
    except OSError as e:
        raise _fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": ")) from None


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail again."""
    import os
    import sys

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass   # not a real file (a test's captured output)


def _where(store: ScheduleStore) -> str:
    from pypto.db.location import display_url

    return display_url(store.url)


def _current() -> str:
    from pypto.sim import MODEL_VERSION

    return MODEL_VERSION


def _version_note(version: str) -> str:
    return "" if version == _current() else " (stale)"


@db_app.command()
def stats(db: DbOpt = None, as_json: JsonOpt = False) -> None:
    """Which database is used and why; counts of workloads, targets, records (by status
    and model version), runs."""
    from pypto.db.cost_models import RECENT, prediction_quality
    from pypto.db.location import locate, sqlite_path

    where = locate(db)
    with _store(where.url) as store:
        s = store.stats()
        quality = prediction_quality(store) if s.exists else []
        if as_json:
            path = sqlite_path(where.url)
            _echo_json({"url": s.url, "path": str(path) if path else None, "why": where.why,
                        "exists": s.exists, "workloads": s.workloads,
                        "targets": s.targets, "records": s.records, "runs": s.runs,
                        "cost_models": s.cost_models, "by_status": dict(s.by_status),
                        "by_model_version": dict(s.by_model_version),
                        "current_model_version": _current(), "stale": s.stale(),
                        "predictions": [{"target": q.target_name, "family": q.family,
                                         "workloads": q.workloads, "records": q.records,
                                         "spearman": q.spearman, "worst": q.worst}
                                        for q in quality]})
            return
        if not s.exists:
            echo(f"{s.url}: no database yet ({where.why}; nothing tuned: `pypto tune "
                       "FILE` or `pypto db import FILE.jsonl` creates it)")
            return
        echo(f"database   {s.url}\n  ({where.why})")
        echo(f"workloads  {s.workloads}\ntargets    {s.targets}\nrecords    {s.records}")
        for status, n in s.by_status:
            echo(f"  {status:<9} {n}")
        echo(f"model versions (current {_current()}):")
        for version, n in s.by_model_version:
            echo(f"  {version:<20} {n}{_version_note(version)}")
        echo(f"runs       {s.runs}\ncost models {s.cost_models}")
        if quality:
            echo(f"cost-model predictions (Spearman of score and speed per workload, "
                       f"its {RECENT} newest scored records; median, worst):")
            for q in quality:
                echo(f"  {q.target_name} {q.family:<8} {q.spearman:+.2f} "
                           f"(worst {q.worst:+.2f}) over {q.workloads} workload(s), "
                           f"{q.records} records")
        if s.stale():
            echo(f"{s.stale()} stale record(s) are kept but not used for lookup; "
                       "`pypto db prune --stale` deletes them")


@db_app.command("list")
def list_(db: DbOpt = None,
          limit: Annotated[int, typer.Option(help="At most this many rows.", min=0)] = 100,
          as_json: JsonOpt = False) -> None:
    """One line per workload, target and model version: records and best cycles."""
    with _store(db) as store:
        rows = store.summary()
        if as_json:
            _echo_json([{"workload": r.workload.key, "family": r.workload.family,
                         "describe": r.workload.describe(), "target": r.target_name,
                         "target_key": r.target_key, "model_version": r.model_version,
                         "stale": r.model_version != _current(), "records": r.records,
                         "ok": r.ok, "best_cycles": r.best_cycles} for r in rows[:limit]])
            return
        if not rows:
            echo(f"{_where(store)}: no records")
            return
        echo(f"{'workload':<14}{'target':<12}{'ok/all':>10}{'best cycles':>13}  "
                   "model version / workload")
        for row in rows[:limit]:
            best = f"{row.best_cycles:,}" if row.best_cycles is not None else "-"
            echo(f"{row.workload.key[:12]:<14}{row.target_name:<12}"
                       f"{f'{row.ok}/{row.records}':>10}{best:>13}  {row.model_version}"
                       f"{_version_note(row.model_version)}  {row.workload.describe()}")
        if len(rows) > limit:
            echo(f"... {len(rows) - limit} more (--limit)")


@db_app.command()
def show(key: KeyArg, db: DbOpt = None,
         limit: Annotated[int, typer.Option(help="Records shown per target and model "
                                                 "version.", min=0)] = 10,
         as_json: JsonOpt = False) -> None:
    """A workload: its spec and its records, fewest cycles first."""
    with _store(db) as store:
        wl = store.workload(key)
        if as_json:
            import json

            counts: dict[tuple[str, str], int] = {}
            records = []
            for r in store.iter_records(workload_key=wl.key):
                group = (r.target_key, r.model_version)
                counts[group] = counts.get(group, 0) + 1
                if counts[group] <= limit:
                    records.append(_record_json(r, wl))
            _echo_json({"workload": {"key": wl.key, "family": wl.family,
                                     "family_key": wl.family_key, "flops": wl.flops,
                                     "sizes": list(wl.sizes), "describe": wl.describe(),
                                     "spec": json.loads(wl.spec)},
                        "records": records})
            return
        echo(f"workload   {wl.key}\nfamily key {wl.family_key}\n{wl.describe()}\n"
                   f"flops      {wl.flops:,}\nsizes      {list(wl.sizes)}")
        shown: dict[tuple[str, str], int] = {}
        for r in store.iter_records(workload_key=wl.key):
            group = (r.target_key, r.model_version)
            if group not in shown:
                echo(f"\n{r.target_name} ({r.target_key[:12]}), model "
                           f"{r.model_version}{_version_note(r.model_version)}:")
                shown[group] = 0
            shown[group] += 1
            if shown[group] <= limit:
                result = f"{r.cycles:>12,} cycles" if r.cycles is not None else \
                    f"{r.status:>19}"
                error = f"  ({r.error})" if r.error else ""
                echo(f"  {result}  {r.source:<6} {r.schedule.to_json()}{error}")
        if not shown:
            echo("no records")


@db_app.command()
def best(key: KeyArg, db: DbOpt = None,
         target: Annotated[str | None, typer.Option(help="Only this target.")] = None,
         as_json: JsonOpt = False) -> None:
    """The best schedule of a workload per target (current model version): a line per
    target with its name, cycles and the schedule as JSON, tab-separated; with --json,
    one JSON list of {target, target_key, cycles, schedule, ...}."""
    with _store(db) as store:
        wl = store.workload(key)
        found = []
        for t in store.targets():
            if target is not None and t.name != target:
                continue
            r = store.best(wl.key, t.key)
            if r is not None:
                found.append(r)
                if not as_json:
                    echo(f"{t.name}\t{r.cycles}\t{r.schedule.to_json()}")
        if found and as_json:
            _echo_json([{"target": r.target_name, "target_key": r.target_key,
                         "cycles": r.cycles, "schedule": dict(r.schedule),
                         "schedule_key": r.schedule_key, "model_version": r.model_version,
                         "source": r.source, "run_id": r.run_id} for r in found])
        if not found:
            where = f" on {target}" if target else ""
            raise _fail(f"workload {wl.key[:12]} has no ok record{where} for model version "
                        f"{_current()}")


@db_app.command("export")
def export(file: FileArg, db: DbOpt = None) -> None:
    """Write every record as JSON lines (shareable through git)."""
    with _store(db) as store:
        count = store.export_jsonl(file)
        echo(f"exported {count} record(s) from {_where(store)} to {file}")


@db_app.command("import")
def import_(file: FileArg, db: DbOpt = None,
            skip_bad: Annotated[bool, typer.Option(
                "--skip-bad", help="Import the good lines of a file with malformed ones "
                                   "(default: reject the whole file).")] = False) -> None:
    """Add the records of a JSON-lines file (importing twice adds nothing)."""
    with _store(db) as store:
        report = store.import_jsonl(file, skip_bad=skip_bad)
        echo(f"{report.describe()} (into {_where(store)})")


@db_app.command()
def prune(db: DbOpt = None,
          stale: Annotated[bool, typer.Option(
              "--stale", help="Delete records of other timing-model versions.")] = False
          ) -> None:
    """Delete records that lookups no longer use."""
    if not stale:
        raise _fail("say what to prune: --stale deletes records measured by another "
                    "timing-model version")
    with _store(db) as store:
        count = store.prune_stale()
        echo(f"deleted {count} stale record(s) (model versions other than "
                   f"{_current()})")


@db_app.command()
def upgrade(db: DbOpt = None) -> None:
    """Migrate the database's schema to this PyPTO's (Alembic)."""
    from pypto.db.location import display_url, resolve_url
    from pypto.db.migrate import upgrade as run_upgrade

    try:
        before, after = run_upgrade(db)
    except PyptoError as e:
        raise _fail(str(e)) from None
    where = display_url(resolve_url(db))
    if before == after:
        echo(f"{where}: schema revision {after}, up to date")
    else:
        echo(f"{where}: schema revision {before or 'none'} -> {after}")
