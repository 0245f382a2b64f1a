"""Compile-time schedule lookup: which schedule a workload gets when nobody passed one.

The chain, first hit wins (DESIGN §9):

1. ``tuned``: the best ``ok`` record of (workload, target, current timing-model version);
2. ``nearest``: the best record of the closest tuned shape of the same family
   (``log_distance`` over node sizes), adapted to this shape (``adapt``) and re-validated;
3. ``model``: the cost model's pick among candidates (``model_pick``, a later issue);
4. ``default``: the documented heuristic.

Anything but ``tuned`` warns once per workload, naming the ``pypto tune`` command. Results
are cached per (workload key, target key, model version, database URL), so a repeated
lookup is a dict hit. The database never makes a kernel fail: one that cannot be opened
gives one warning and the chain goes on without it. A read never creates a database;
the default one (``tuning_logs/pypto.db``) is created on first use only to import the
``tuning_logs/*.jsonl`` logs shipped next to it (``sync_tuning_logs``).
"""

from __future__ import annotations

import functools
import hashlib
import math
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pypto.db.location import DEFAULT_DIR, display_url, is_default, resolve_url, sqlite_path
from pypto.db.records import Neighbor, workload_sizes
from pypto.errors import DatabaseError, PyptoError, ScheduleFallbackWarning
from pypto.schedule_space.schedule import Schedule
from pypto.sim import MODEL_VERSION

if TYPE_CHECKING:
    from pypto.db.store import ScheduleStore
    from pypto.ir.workload import Workload
    from pypto.schedule_space.space import Space
    from pypto.targets import Target

NEAREST_CANDIDATES = 3  # tuned shapes tried, closest first, until one adapts validly


_cache: dict[tuple[str, str, str, str], tuple[Schedule, str]] = {}
_stores: dict[str, ScheduleStore] = {}
_broken: set[str] = set()          # URLs that failed (warned once)
_synced: set[str] = set()          # URLs whose tuning logs were checked in this process
_warned: set[tuple[str, str, str]] = set()


def choose_schedule(wl: Workload, target: Target) -> tuple[Schedule, str]:
    """The schedule for ``wl`` on ``target`` and its source (``tuned``, ``nearest``,
    ``model`` or ``default``). Never raises because of the database."""
    url = resolve_url()
    key = (wl.key, target.key, MODEL_VERSION, url)
    hit = _cache.get(key)
    if hit is None:
        hit = _cache[key] = _choose(wl, target, url)
    return hit


def clear_cache() -> None:
    """Forget cached lookups (a store calls this after it writes records)."""
    _cache.clear()


def reset() -> None:
    """Forget everything: cached lookups, open stores, warnings given (for tests)."""
    _cache.clear()
    for store in _stores.values():
        store.close()
    _stores.clear()
    _broken.clear()
    _synced.clear()
    _warned.clear()


def _choose(wl: Workload, target: Target, url: str) -> tuple[Schedule, str]:
    from pypto.schedule_space import default_schedule

    store = _store(url)
    if store is not None:
        try:
            record = store.best(wl.key, target.key, MODEL_VERSION)
            if record is not None:
                exact = _valid_as_is(wl, target, record.schedule)
                if exact is not None:
                    return exact, "tuned"
            for neighbor in store.nearest(wl.family_key, target.key, workload_sizes(wl),
                                          model_version=MODEL_VERSION,
                                          limit=NEAREST_CANDIDATES, exclude=wl.key):
                adapted = adapt(wl, target, neighbor.record.schedule)
                if adapted is not None:
                    _warn(wl, target, url, functools.partial(_nearest_note, neighbor))
                    return adapted, "nearest"
        except DatabaseError as e:
            _warn_broken(url, e)
            store = None
    picked = model_pick(wl, target, store)
    if picked is not None:
        _warn(wl, target, url, "using the cost model's pick")
        return picked, "model"
    schedule = default_schedule(wl, target)
    _warn(wl, target, url, "using the default heuristic schedule")
    return schedule, "default"


def _nearest_note(neighbor: Neighbor) -> str:
    return (f"using the schedule tuned for the nearest shape "
            f"({neighbor.workload.describe()}), adapted")


def model_pick(wl: Workload, target: Target, store: ScheduleStore | None) -> Schedule | None:
    """The cost model's best schedule among candidates, or None.

    Hook for the cost-model issue: load ``store.load_cost_model(target.key, wl.family)``,
    rank candidates (samples of ``space_for(wl, target)`` plus adapted neighbours), and
    return the top one after ``validate``. Until then there is no model: None.
    """
    return None


# -- adapting a schedule to another shape ---------------------------------------------------


def adapt(wl: Workload, target: Target, schedule: Schedule) -> Schedule | None:
    """``schedule`` (tuned for another shape of ``wl``'s family) made valid for ``wl``:
    completed, every knob moved to the nearest of this shape's choices (on a log scale),
    then repaired greedily (one knob at a time, the change that removes the most
    violations) until both the space and the lowering accept it. None if that fails."""
    from pypto.schedule_space import complete, space_for

    try:
        space = space_for(wl, target)
        knobs = dict(complete(wl, Schedule(schedule)))
        default = space.default()
        adapted = {name: _closest(axis.choices, knobs.get(name, default[name]))
                   for name, axis in space.axes.items()}
        candidate = Schedule(adapted)
        problems = _problems(wl, target, space, candidate)
        for _ in range(2 * len(space.axes)):
            if not problems:
                return candidate
            best: tuple[int, Schedule] | None = None
            for name in reversed(list(space.axes)):
                current = candidate[name]
                for choice in sorted(space.axes[name].choices,
                                     key=functools.partial(_gap, value=current)):
                    if choice == current and type(choice) is type(current):
                        continue
                    trial = candidate.replace(**{name: choice})
                    n = len(_problems(wl, target, space, trial))
                    if n < len(problems) and (best is None or n < best[0]):
                        best = (n, trial)
                        if n == 0:
                            break
                if best is not None and best[0] == 0:
                    break
            if best is None:
                return None
            candidate = best[1]
            problems = _problems(wl, target, space, candidate)
        return None if problems else candidate
    except PyptoError:
        return None


def _valid_as_is(wl: Workload, target: Target, schedule: Schedule) -> Schedule | None:
    from pypto.schedule_space import complete, space_for

    try:
        s = complete(wl, schedule)
        return None if _problems(wl, target, space_for(wl, target), s) else s
    except PyptoError:
        return None


def _problems(wl: Workload, target: Target, space: Space, s: Schedule) -> list[str]:
    from pypto.schedule_space import validate

    return space.validate(s) or validate(wl, s, target)


def _gap(choice: Any, value: Any) -> tuple[float, Any]:
    """How far ``choice`` is from ``value``: log ratio for sizes, else equal or not; ties
    go to the smaller choice (it fits in memory more often)."""
    numeric = (isinstance(choice, int) and isinstance(value, int)
               and not isinstance(choice, bool) and not isinstance(value, bool))
    if numeric and choice > 0 and value > 0:
        return abs(math.log2(choice) - math.log2(value)), choice
    same = choice == value and type(choice) is type(value)
    return (0.0 if same else 1.0), 0


def _closest(choices: tuple[Any, ...], value: Any) -> Any:
    return min(choices, key=lambda c: _gap(c, value))


# -- the database ------------------------------------------------------------------------------


def _store(url: str) -> ScheduleStore | None:
    """The store at ``url``; None when it cannot be used (warned) or, for a SQLite file
    that does not exist, when there is nothing to put in it."""
    if url in _broken:
        return None
    store = _stores.get(url)
    if store is None:
        path = sqlite_path(url)
        if path is not None and not path.exists() and not (
                is_default(url) and _log_files(path.parent)):
            return None
        try:
            from pypto.db.sql import SQLStore

            store = _stores[url] = SQLStore(url)
        except DatabaseError as e:
            _warn_broken(url, e)
            return None
    if url not in _synced and is_default(url):
        _synced.add(url)
        try:
            sync_tuning_logs(store, Path(sqlite_path(url) or DEFAULT_DIR).parent)
        except PyptoError as e:
            _warn_broken(url, e)
            return None
    return store


def sync_tuning_logs(store: ScheduleStore, directory: Path) -> list[Any]:
    """Import the ``*.jsonl`` logs of ``directory`` that ``store`` has not seen in this
    exact content (their sha256 is kept in the store's meta table). Bad lines are skipped
    with a warning. Returns the import reports."""
    reports = []
    for path in _log_files(directory):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        meta_key = f"imported:{path.name}"
        if store.get_meta(meta_key) == digest:
            continue
        report = store.import_jsonl(path, skip_bad=True)
        store.set_meta(meta_key, digest)
        if report.skipped:
            warnings.warn(f"pypto: {report.describe()}", ScheduleFallbackWarning,
                          stacklevel=_user_stacklevel())
        reports.append(report)
    return reports


def _log_files(directory: Path) -> list[Path]:
    try:
        return sorted(p for p in directory.glob("*.jsonl") if p.is_file())
    except OSError:
        return []


# -- warnings ---------------------------------------------------------------------------------


def _warn(wl: Workload, target: Target, url: str, what: str | Callable[[], str]) -> None:
    once = (wl.key, target.key, url)
    if once in _warned:
        return
    _warned.add(once)
    if callable(what):
        what = what()
    path = sqlite_path(url)
    where = display_url(url) + (" (unusable)" if url in _broken else
                                " (none yet)" if path is not None and not path.exists() else "")
    warnings.warn(f"pypto: no tuned schedule for {wl.describe()} (workload {wl.key[:12]}) on "
                  f"{target.name} in {where}: {what}. Tune it with `pypto tune {_script()}`",
                  ScheduleFallbackWarning, stacklevel=_user_stacklevel())


def _warn_broken(url: str, error: BaseException) -> None:
    if url in _broken:
        return
    _broken.add(url)
    _stores.pop(url, None)
    warnings.warn(f"pypto: cannot use the schedule database: {error}. Kernels compile with "
                  "fallback schedules", ScheduleFallbackWarning, stacklevel=_user_stacklevel())


def _script() -> str:
    """The running script, for the suggested command (``FILE`` when not a script)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None) or ""
    if path.endswith(".py") and not path.endswith("__main__.py") and Path(path).is_file():
        try:
            return str(Path(path).resolve().relative_to(Path.cwd()))
        except ValueError:
            return path
    return "FILE"


def _user_stacklevel() -> int:
    """The stacklevel of the first frame outside the ``pypto`` package (the user's call)."""
    package = str(Path(__file__).resolve().parent.parent)
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level
