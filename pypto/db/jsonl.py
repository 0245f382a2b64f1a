"""Records as JSON lines: how tuning logs travel (through git, between databases).

One record per line, self-contained: the workload's canonical spec (its key is the
sha256 of that spec, checked on import), the target's name and key, the schedule, the
cycles or the error, the status and the timing-model version; where it came from
(``source``) and when (``created_at``); for a record of a tuning run, the run (strategy,
command, host, status, counts, start and end), which import finds or adds, so the run
history travels too. No code, no pickles.

    {"version": 1, "workload": {"key": ..., "spec": {...}}, "target": {"name": ...,
     "key": ...}, "schedule": {...}, "status": "ok", "cycles": 34044,
     "model_version": "sim-2026.12.2", "run": {"strategy": "tpe", ...}, ...}

Import validates every line before it stores anything; a file with a bad line is
rejected whole (naming each bad line) unless ``skip_bad`` is given.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pypto.db.records import (
    RUN_STATUSES,
    SOURCES,
    STATUSES,
    Record,
    Run,
    TargetInfo,
    WorkloadInfo,
)
from pypto.errors import DatabaseError, LogFormatError, PyptoError, ScheduleError
from pypto.schedule_space import complete, space_for
from pypto.schedule_space.schedule import Schedule
from pypto.schedule_space.space import Space
from pypto.sim import MODEL_VERSION
from pypto.sim.roofline import workload_bound

if TYPE_CHECKING:
    from pypto.db.store import ScheduleStore
    from pypto.ir.workload import Workload
    from pypto.targets import Target

FORMAT_VERSION = 1
MAX_LISTED = 10  # bad lines named in an error message
#: a line longer than this is refused without being parsed (a record is ~1 KiB)
MAX_LINE_BYTES = 1 << 24
#: the longest text each bounded column takes (``pypto.db.models``; a test checks the two
#: agree): checked on every line, so SQLite, which stores any length, refuses what
#: PostgreSQL would, and names the line
FIELD_LENGTHS = {"model_version": 64, "pypto_version": 32, "target.name": 64}
#: counts are stored as 64-bit integers
MAX_INT = 2**63 - 1


@dataclass(frozen=True)
class ImportReport:
    path: str
    lines: int                               # non-blank lines read
    added: int                               # records new to the database
    present: int                             # good records it already had
    skipped: tuple[tuple[int, str], ...]     # (line number, reason) of bad lines skipped
    runs: int = 0                            # tuning runs new to the database

    def describe(self) -> str:
        text = (f"{self.path}: {self.lines} line(s), {self.added} record(s) added, "
                f"{self.present} already present")
        if self.runs:
            text += f", {self.runs} run(s) added"
        if self.skipped:
            text += (f"; skipped {len(self.skipped)} bad line(s) (--skip-bad): "
                     + _list(list(self.skipped)))
        return text


def record_to_json(record: Record, workload: WorkloadInfo,
                   run: Run | None = None) -> dict[str, Any]:
    """The JSON line of ``record`` (``run``: the run that measured it, if known)."""
    line: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "workload": {"key": workload.key, "family": workload.family,
                     "family_key": workload.family_key, "flops": workload.flops,
                     "spec": json.loads(workload.spec)},
        "target": {"name": record.target_name, "key": record.target_key},
        "schedule": dict(record.schedule),
        "schedule_key": record.schedule_key,
        "status": record.status,
        "cycles": record.cycles,
        "error": record.error,
        "model_version": record.model_version,
        "pypto_version": record.pypto_version,
        "source": record.source,
        "created_at": record.created_at.isoformat() if record.created_at else None,
    }
    # only records the ``model`` strategy measured carry a score: logs of the others stay
    # as they were
    if record.model_score is not None:
        line["model_score"] = record.model_score
    if run is not None:
        line["run"] = {"strategy": run.strategy, "status": run.status,
                       "trials_asked": run.trials_asked, "trials_done": run.trials_done,
                       "best_cycles": run.best_cycles, "command": run.command,
                       "host": run.host, "started_at": _iso(run.started_at),
                       "finished_at": _iso(run.finished_at)}
    return line


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def export_records(store: ScheduleStore, path: Path) -> int:
    """Write every record of ``store`` to ``path`` (whole or not at all, with the mode any
    file the user writes gets: ``pypto.db.atomic``), grouped by workload, target and model
    version, fewest cycles first."""
    from pypto.db.atomic import atomic_write

    infos = {w.key: w for w in store.workloads()}
    runs = {r.id: r for r in store.runs()}
    count = 0
    with atomic_write(path) as out:
        for record in store.iter_records():
            run = runs.get(record.run_id) if record.run_id is not None else None
            line = record_to_json(record, infos[record.workload_key], run)
            out.write(json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n")
            count += 1
    return count


def parse_line(text: str, cache: dict[str, WorkloadInfo] | None = None
               ) -> tuple[Record, WorkloadInfo, TargetInfo, Run | None]:
    """One line's record, workload, target and run (None: the line names none; its
    ``id`` is 0: not yet stored); ``ValueError`` saying what is wrong."""
    try:
        obj = json.loads(text, parse_constant=_not_json)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise ValueError("not a record: JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    version = obj.get("version")
    if version is None:
        raise ValueError("no 'version' field")
    if version != FORMAT_VERSION:
        raise ValueError(f"format version {version!r}; this PyPTO reads version "
                         f"{FORMAT_VERSION} (upgrade PyPTO for newer logs)")
    wl_obj, tgt_obj = _field(obj, "workload", dict), _field(obj, "target", dict)
    key, spec = _field(wl_obj, "key", str, "workload."), _field(wl_obj, "spec", dict, "workload.")
    # the spec as the line gives it is part of the cache key: a later line with the same
    # key and another spec is checked (and refused), not taken for the first one
    seen = f"{key}:{json.dumps(spec, sort_keys=True)}" if cache is not None else ""
    workload = (cache or {}).get(seen)
    if workload is None:
        try:
            workload = WorkloadInfo.from_spec(spec, key)
        except (ValueError, TypeError, OverflowError, RecursionError) as e:
            raise ValueError(f"workload: {e}") from None
        if cache is not None:
            cache[seen] = workload
    target_key = _field(tgt_obj, "key", str, "target.")
    if len(target_key) != 64 or any(c not in "0123456789abcdef" for c in target_key):
        raise ValueError(f"target.key {target_key!r} is not a sha256 hex digest")
    target = _target(_field(tgt_obj, "name", str, "target."), target_key)
    try:
        schedule = Schedule(_field(obj, "schedule", dict))
    except ScheduleError as e:
        raise ValueError(str(e)) from None
    given_key = obj.get("schedule_key")
    if given_key is not None and given_key != schedule.key:
        raise ValueError("schedule_key does not match the schedule")
    status = _field(obj, "status", str)
    if status not in STATUSES:
        raise ValueError(f"status {status!r} must be one of {', '.join(STATUSES)}")
    cycles = obj.get("cycles")
    if isinstance(cycles, int) and not isinstance(cycles, bool) and cycles > MAX_INT:
        raise ValueError(f"cycles {cycles} is more than a 64-bit count holds")
    error = obj.get("error")
    if error is not None and not isinstance(error, str):
        raise ValueError("error must be a string or null")
    # a log keeps where each record came from and when it was measured; a line without
    # them (an older or hand-written log) counts as imported now
    source = obj.get("source") or "import"
    if source not in SOURCES:
        raise ValueError(f"source {source!r} must be one of {', '.join(SOURCES)}")
    created_at = obj.get("created_at")
    if created_at is not None:
        try:
            created_at = datetime.fromisoformat(_field(obj, "created_at", str))
        except ValueError:
            raise ValueError(f"created_at {created_at!r} is not an ISO 8601 time") from None
    model_score = obj.get("model_score")
    if model_score is not None and (isinstance(model_score, bool)
                                    or not isinstance(model_score, (int, float))):
        raise ValueError(f"model_score {model_score!r} must be a number or null")
    pypto_version = obj.get("pypto_version") or "?"
    if not isinstance(pypto_version, str):
        raise ValueError(f"'pypto_version' must be a str, got {type(pypto_version).__name__}")
    model_version = _field(obj, "model_version", str)
    for name, value in (("model_version", model_version), ("pypto_version", pypto_version),
                        ("target.name", target.name)):
        if len(value) > FIELD_LENGTHS[name]:
            raise ValueError(f"{name} is {len(value)} characters long; the database keeps "
                             f"{FIELD_LENGTHS[name]} at most")
    try:
        record = Record(key, target_key, schedule, cycles=cycles, status=status, error=error,
                        model_version=model_version,
                        source=source, pypto_version=pypto_version,
                        target_name=target.name, created_at=created_at,
                        model_score=None if model_score is None else float(model_score))
    except ValueError as e:
        raise ValueError(str(e)) from None
    run = obj.get("run")
    return record, workload, target, None if run is None else _run(run, record)


def _run(obj: Any, record: Record) -> Run:
    """The run of a line (of the line's workload and target)."""
    if not isinstance(obj, dict):
        raise ValueError(f"'run' must be an object, got {type(obj).__name__}")
    status = _field(obj, "status", str, "run.")
    if status not in RUN_STATUSES:
        raise ValueError(f"run.status {status!r} must be one of {', '.join(RUN_STATUSES)}")
    counts = [obj.get(k) for k in ("trials_asked", "trials_done", "best_cycles")]
    for name, n in zip(("trials_asked", "trials_done", "best_cycles"), counts):
        if n is not None and (isinstance(n, bool) or not isinstance(n, int)
                              or not 0 <= n <= MAX_INT):
            raise ValueError(f"run.{name} {n!r} must be a count (an integer, 0 to 2**63 - 1)")
    times = []
    for name in ("started_at", "finished_at"):
        text = obj.get(name)
        try:
            times.append(None if text is None else datetime.fromisoformat(text))
        except (TypeError, ValueError):
            raise ValueError(f"run.{name} {text!r} is not an ISO 8601 time") from None
    strategy, host = _field(obj, "strategy", str, "run."), _field(obj, "host", str, "run.")
    if len(strategy) > 32 or len(host) > 255:
        raise ValueError("run.strategy (32 characters at most) or run.host (255) is too long")
    return Run(0, strategy, status, counts[0] or 0, counts[1] or 0, counts[2],
               _field(obj, "command", str, "run."), host, record.workload_key,
               record.target_key, times[0], times[1])


def read_lines(path: Path) -> Iterator[tuple[int, str | None]]:
    """``(line number, text)`` of each line of the JSON-lines file at ``path``, read as it
    goes; the text is None for a line longer than ``MAX_LINE_BYTES`` (not read whole).
    Raises ``DatabaseError`` for a file that cannot be read or is no regular file (a
    device such as ``/dev/zero`` never ends), ``LogFormatError`` for one not UTF-8."""
    try:
        if path.exists() and not path.is_file():
            what = "a directory" if path.is_dir() else "not a regular file"
            raise DatabaseError(f"cannot import {path}: it is {what}; give a JSON-lines file")
        handle = path.open("rb")
    except OSError as e:
        raise DatabaseError(f"cannot read {path}: {e.strerror or e}") from None
    with handle:
        number = 0
        while True:
            try:
                raw = handle.readline(MAX_LINE_BYTES + 1)
            except OSError as e:
                raise DatabaseError(f"cannot read {path}: {e.strerror or e}") from None
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):   # the rest of the long line
                    raw = handle.readline(MAX_LINE_BYTES)
                yield number, None
                continue
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise LogFormatError(f"{path} is not UTF-8 text (line {number}: {e.reason} at "
                                     f"byte {e.start}); nothing imported", []) from None


def import_records(store: ScheduleStore, path: Path, *, skip_bad: bool = False) -> ImportReport:
    good: list[tuple[Record, WorkloadInfo, TargetInfo, Run | None]] = []
    bad: list[tuple[int, str]] = []
    cache: dict[str, WorkloadInfo] = {}
    lines = 0
    for number, line in read_lines(path):
        if line is not None and not line.strip():
            continue
        lines += 1
        try:
            if line is None:
                raise ValueError(f"longer than {MAX_LINE_BYTES} bytes: not a record")
            parsed = parse_line(line, cache)
            problem = physical_problem(*parsed[:3])
            if problem is not None:
                raise ValueError(problem)
            good.append(parsed)
        except ValueError as e:
            bad.append((number, str(e)))
    if bad and not skip_bad:
        raise LogFormatError(f"{path}: {len(bad)} malformed line(s), nothing imported: "
                             f"{_list(bad)}. Fix them, or pass --skip-bad to import the "
                             f"{len(good)} good line(s)", bad)
    workloads = {g[1].key: g[1] for g in good}.values()
    targets = {g[2].key: g[2] for g in good}.values()
    records, new_runs = _with_runs(store, good, workloads, targets)
    added = store.add_records(records, workloads=workloads, targets=targets)
    unique = len({(r.workload_key, r.target_key, r.schedule_key, r.model_version)
                  for r in records})
    return ImportReport(str(path), lines, added, unique - added, tuple(bad), new_runs)


def _with_runs(store: ScheduleStore,
               good: list[tuple[Record, WorkloadInfo, TargetInfo, Run | None]],
               workloads: Any, targets: Any) -> tuple[list[Record], int]:
    """The records of ``good`` with the ids of their runs in ``store`` (found or added,
    after their workloads and targets); and how many runs were added."""
    runs = list(dict.fromkeys(g[3] for g in good if g[3] is not None))
    # added oldest first, so that ids grow with time as in the database they came from
    runs.sort(key=lambda r: r.started_at.timestamp() if r.started_at else 0.0)
    if not runs:
        return [g[0] for g in good], 0
    store.add_records([], workloads=workloads, targets=targets)
    before = {r.id for r in store.runs()}
    ids = dict(zip(runs, store.add_runs(runs)))
    records = [g[0] if g[3] is None else dataclasses.replace(g[0], run_id=ids[g[3]])
               for g in good]
    return records, len(set(ids.values()) - before)


def physical_problem(record: Record, workload: WorkloadInfo, target: TargetInfo) -> str | None:
    """Why a record cannot be a measurement on this PyPTO's ``target`` (None if it can):
    a schedule its workload's space refuses, or cycles below the workload's roofline
    bound. A record for a target (or version of one) this PyPTO does not know, or of
    another timing model, is kept as it is: it is never used for lookup."""
    if record.status != "ok" or record.model_version != MODEL_VERSION:
        return None
    known = _known_target(target.name, target.key)
    if known is None:
        return None
    try:
        wl = _workload(workload.key, workload.spec)
        violations = _space(wl, known).validate(complete(wl, record.schedule))
    except PyptoError as e:
        return f"the schedule does not fit its workload: {e}"
    if violations:
        return f"the schedule is not valid for its workload on {target.name}: {violations[0]}"
    bound = workload_bound(wl, known)
    if record.cycles is not None and record.cycles < bound:
        return (f"{record.cycles} cycles is below the workload's roofline bound of {bound} "
                f"on {target.name}: no schedule can be that fast")
    return None


@functools.lru_cache(maxsize=256)
def _workload(key: str, spec: str) -> Workload:
    return WorkloadInfo.from_spec(spec, key).workload()


@functools.lru_cache(maxsize=256)
def _space(wl: Workload, target: Target) -> Space:
    return space_for(wl, target)


@functools.cache
def _known_target(name: str, key: str) -> Target | None:
    from pypto.targets import available_targets, load_target

    if name in available_targets() and load_target(name).key == key:
        return load_target(name)
    return None


def _not_json(constant: str) -> Any:
    raise ValueError(f"not JSON ({constant} is no JSON number)")


def _field(obj: dict[str, Any], name: str, kind: type, where: str = "") -> Any:
    if name not in obj:
        raise ValueError(f"no '{where}{name}' field")
    value = obj[name]
    if not isinstance(value, kind):
        raise ValueError(f"'{where}{name}' must be a {kind.__name__}, got "
                         f"{type(value).__name__}")
    return value


@functools.cache
def _target(name: str, key: str) -> TargetInfo:
    """The target's full descriptor when this PyPTO knows it under that key."""
    known = _known_target(name, key)
    return TargetInfo.of(known) if known is not None else TargetInfo(name, key, None)


def _list(problems: list[tuple[int, str]]) -> str:
    shown = "; ".join(f"line {n}: {why}" for n, why in problems[:MAX_LISTED])
    more = len(problems) - MAX_LISTED
    return shown + (f"; and {more} more" if more > 0 else "")
