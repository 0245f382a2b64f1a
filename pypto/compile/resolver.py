"""Which schedule a workload gets when nobody passed one: the fallback chain over a store.

The chain, first hit wins (DESIGN §9):

1. ``tuned``: the best ``ok`` record of (workload, target, current timing-model version),
   if it validates now;
2. ``model``: when the store holds a cost model for (target, op family), its pick among
   candidates: the adapted best records of the nearest tuned shapes and their
   neighbourhoods (``pypto.compile.model_pick``);
3. ``nearest``: the best record of the closest tuned shape of the same family
   (``log_distance`` over node sizes), adapted to this shape and re-validated
   (``pypto.schedule_space.adapt``);
4. ``default``: the documented heuristic.

For a dynamic kernel (``@pypto.kernel(dynamic_shape=True)``, whose ``buckets`` are
passed), the nearest tuned shape *within the bucket* (every size of its workload in
the same bucket as this one's) comes right after ``tuned``, as ``nearest``: that is
how a dynamic kernel is meant to find its schedules, so it is logged at debug level
(logger ``pypto``) instead of warned.

Anything else but ``tuned`` warns once per workload (for a dynamic kernel, once per
family and bucket), naming the ``pypto tune`` command. A
``ScheduleResolver`` walks the chain over the store at one URL; ``CachedResolver`` wraps it
with a cache of its answers, emptied whenever a store of this process writes records
(``pypto.db.store.write_epoch``), so a repeated lookup is a dict hit. The database never
makes a kernel fail: one that cannot be opened gives one warning and the chain goes on
without it. A read never creates a database; one found without ``--db`` or ``$PYPTO_DB``
(``pypto.db.location``) is created on first use only to import the tuning logs beside it
(``pypto.db.logs.sync_tuning_logs``). A SQLite file is read through the standard
library (``pypto.db.reader``): a compile does not import SQLAlchemy.
"""

from __future__ import annotations

import functools
import itertools
import logging
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pypto.db.location import Location, display_url, locate, sqlite_path
from pypto.db.logs import import_pending
from pypto.db.records import Neighbor, workload_sizes
from pypto.db.store import write_epoch
from pypto.errors import CostModelError, DatabaseError, PyptoError, ScheduleFallbackWarning
from pypto.schedule_space import default_schedule
from pypto.schedule_space.adapt import adapt, valid_as_is
from pypto.schedule_space.schedule import Schedule
from pypto.sim import MODEL_VERSION
from pypto.sim.roofline import workload_bound

if TYPE_CHECKING:
    from pypto.compile.buckets import Buckets
    from pypto.cost_model.model import CostModel
    from pypto.db.reader import ScheduleReader
    from pypto.ir.workload import Workload
    from pypto.targets import Target

log = logging.getLogger(__name__)
NEAREST_CANDIDATES = 3  # tuned shapes tried, closest first, until one adapts validly
TUNED_CANDIDATES = 16  # a workload's own records tried, fastest first, until one is usable
BUCKET_CANDIDATES = 16  # tuned shapes ranked, closest first, when looking within a bucket
log = logging.getLogger("pypto")


class ScheduleResolver:
    """The fallback chain over the schedule database at ``location`` (opened on first
    use; a URL stands for a database given by ``--db`` or ``$PYPTO_DB``)."""

    def __init__(self, location: Location | str) -> None:
        if isinstance(location, str):
            location = Location(location, "given")
        self.location = location
        self.url = location.url
        self._store: ScheduleReader | None = None
        self._broken = False          # the store failed once (warned): not used again
        self._warned: set[tuple[object, str]] = set()
        # cost models per (target key, family), None when the store has none; kept while
        # no store of this process writes (saving a model counts as a write)
        self._models: dict[tuple[str, str], object] = {}
        self._models_epoch = write_epoch()

    def resolve(self, wl: Workload, target: Target,
                buckets: Buckets | None = None) -> tuple[Schedule, str]:
        """The schedule for ``wl`` on ``target`` and its source (``tuned``, ``nearest``,
        ``model`` or ``default``). ``buckets``: a dynamic kernel's shape buckets. Never
        raises because of the database."""
        store = self.store()
        once = None if buckets is None else (wl.family_key, buckets.key(workload_sizes(wl)))
        if store is not None:
            try:
                found = self._from_store(store, wl, target, buckets, once)
                if found is not None:
                    log.debug("%s on %s: the %s schedule", wl.describe(), target.name, found[1])
                    return found
            except DatabaseError as e:
                self._give_up(e)
        log.debug("%s on %s: the default schedule", wl.describe(), target.name)
        schedule = default_schedule(wl, target)
        self._warn(wl, target, "using the default heuristic schedule", once)
        return schedule, "default"

    def _from_store(self, store: ScheduleReader, wl: Workload, target: Target,
                    buckets: Buckets | None = None,
                    once: object = None) -> tuple[Schedule, str] | None:
        tuned = self._tuned(store, wl, target)
        if tuned is not None:
            return tuned, "tuned"
        if buckets is not None:
            in_bucket = self._in_bucket(store, wl, target, buckets)
            if in_bucket is not None:
                return in_bucket, "nearest"
        picked = self._model_pick(store, wl, target)
        if picked is not None:
            self._warn(wl, target, "using the cost model's pick among schedules adapted "
                                   "from tuned shapes", once)
            return picked, "model"
        for neighbor in store.nearest(wl.family_key, target.key, workload_sizes(wl),
                                      model_version=MODEL_VERSION,
                                      limit=NEAREST_CANDIDATES, exclude=wl.key):
            adapted = adapt(wl, target, neighbor.record.schedule)
            if adapted is not None:
                self._warn(wl, target, functools.partial(_nearest_note, neighbor), once)
                return adapted, "nearest"
        return None

    def _in_bucket(self, store: ScheduleReader, wl: Workload, target: Target,
                   buckets: Buckets) -> Schedule | None:
        """The best schedule of the nearest tuned shape in ``wl``'s bucket, adapted."""
        sizes = workload_sizes(wl)
        for neighbor in store.nearest(wl.family_key, target.key, sizes,
                                      model_version=MODEL_VERSION, limit=BUCKET_CANDIDATES,
                                      exclude=wl.key):
            if not buckets.same(sizes, neighbor.workload.sizes):
                continue
            adapted = adapt(wl, target, neighbor.record.schedule)
            if adapted is not None:
                log.debug("%s on %s: schedule of the tuned shape %s, in the same "
                          "bucket (%s), adapted", wl.describe(), target.name,
                          neighbor.workload.key[:12], buckets.describe())
                return adapted
        return None

    def _tuned(self, store: ScheduleReader, wl: Workload, target: Target) -> Schedule | None:
        """The fastest record's schedule that validates now and is physically possible
        (not below the roofline bound): a record imported from elsewhere, or measured
        under other rules, never shadows the good ones behind it."""
        best = store.best(wl.key, target.key, MODEL_VERSION)
        if best is None:
            return None
        bound = workload_bound(wl, target)
        first = [best]
        rest = store.iter_records(workload_key=wl.key, target_key=target.key,
                                  model_version=MODEL_VERSION, status="ok",
                                  limit=TUNED_CANDIDATES)
        for i, record in enumerate(itertools.chain(first, rest)):
            if i > 0 and record.schedule_key == best.schedule_key:
                continue
            if record.cycles is not None and record.cycles < bound:
                continue
            schedule = valid_as_is(wl, target, record.schedule)
            if schedule is not None:
                return schedule
        return None

    def cost_model(self, store: ScheduleReader, target: Target, family: str) -> CostModel | None:
        """The stored cost model of (target, family), loaded once; None when there is
        none, or it is stale or unreadable (warned once: retrain it)."""
        epoch = write_epoch()
        if epoch != self._models_epoch:
            self._models.clear()
            self._models_epoch = epoch
        key = (target.key, family)
        if key not in self._models:
            from pypto.db.cost_models import load_from_store

            try:
                self._models[key] = load_from_store(store, target, family)
            except CostModelError as e:
                self._models[key] = None
                warnings.warn(f"pypto: the stored {family} cost model is not used: {e}",
                              ScheduleFallbackWarning, stacklevel=_user_stacklevel())
        return self._models[key]  # type: ignore[return-value]

    def _model_pick(self, store: ScheduleReader, wl: Workload,
                    target: Target) -> Schedule | None:
        model = self.cost_model(store, target, wl.family)
        if model is None:
            return None
        from pypto.compile.model_pick import model_pick

        picked = model_pick(store, wl, target, model)
        return None if picked is None else valid_as_is(wl, target, picked)

    def store(self) -> ScheduleReader | None:
        """The store; None when it cannot be used (warned once) or, for a SQLite file
        that does not exist, when there is nothing to put in it yet."""
        if self._broken:
            return None
        if self._store is None:
            try:
                self._store = self._open()
            except (PyptoError, OSError) as e:
                self._give_up(e)
        return self._store

    def _open(self) -> ScheduleReader | None:
        """A SQLite file of our schema is read through ``sqlite3``; anything else (and any
        import of the tuning logs beside the database) through the SQLAlchemy store."""
        from pypto.db.reader import open_reader

        if self.location.logs is not None:
            for report in import_pending(self.url, self.location.logs,
                                         stacklevel=_user_stacklevel() + 2):
                log.info("%s (into %s)", report.describe(), display_url(self.url))
        reader = open_reader(self.url)
        where = f"{display_url(self.url)} ({self.location.why})"
        if reader is not None:
            log.info("schedules from %s, read through sqlite3", where)
            return reader
        path = sqlite_path(self.url)
        if path is not None and not path.exists():
            log.info("no schedule database at %s yet: default schedules", where)
            return None
        from pypto.db import open_store

        log.info("schedules from %s, read through SQLAlchemy", where)
        return open_store(self.url)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def _give_up(self, error: BaseException) -> None:
        if self._broken:
            return
        self._broken = True
        self._store = None
        warnings.warn(f"pypto: cannot use the schedule database: {error}. Kernels compile "
                      "with fallback schedules", ScheduleFallbackWarning,
                      stacklevel=_user_stacklevel())

    def _warn(self, wl: Workload, target: Target, what: str | Callable[[], str],
              once: object = None) -> None:
        once = (once or wl.key, target.key)
        if once in self._warned:
            return
        self._warned.add(once)
        if callable(what):
            what = what()
        path = sqlite_path(self.url)
        where = display_url(self.url) + (
            " (unusable)" if self._broken else
            " (none yet)" if path is not None and not path.exists() else "")
        warnings.warn(f"pypto: no tuned schedule for {wl.describe()} (workload {wl.key[:12]}) "
                      f"on {target.name} in {where}: {what}. Tune it with "
                      f"`pypto tune {_script()}`", ScheduleFallbackWarning,
                      stacklevel=_user_stacklevel())


class CachedResolver:
    """A ``ScheduleResolver`` with its answers cached per (workload, target, timing
    model) until a store of this process writes records."""

    def __init__(self, resolver: ScheduleResolver) -> None:
        self.resolver = resolver
        self._cache: dict[tuple[str, str, str, Buckets | None], tuple[Schedule, str]] = {}
        self._epoch = write_epoch()

    def resolve(self, wl: Workload, target: Target,
                buckets: Buckets | None = None) -> tuple[Schedule, str]:
        epoch = write_epoch()
        if epoch != self._epoch:
            self._cache.clear()
            self._epoch = epoch
        key = (wl.key, target.key, MODEL_VERSION, buckets)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self.resolver.resolve(wl, target, buckets)
        return hit

    def clear(self) -> None:
        self._cache.clear()


# One resolver per database URL in this process (a kernel compiles against $PYPTO_DB,
# which a program, or `pypto tune`, may point elsewhere while it runs).
_resolvers: dict[tuple[str, Path | None], CachedResolver] = {}


def resolver_for(url: str | None = None) -> CachedResolver:
    """The process's cached resolver for ``url`` (default: ``$PYPTO_DB``, else the
    database ``pypto.db.location.locate`` finds)."""
    location = locate(url)
    key = (location.url, location.logs)
    found = _resolvers.get(key)
    if found is None:
        found = _resolvers[key] = CachedResolver(ScheduleResolver(location))
    return found


def choose_schedule(wl: Workload, target: Target,
                    buckets: Buckets | None = None) -> tuple[Schedule, str]:
    """The schedule the database chain picks for ``wl`` on ``target``, and its source
    (``buckets``: a dynamic kernel's, so that its bucket's tuned shapes come first)."""
    return resolver_for().resolve(wl, target, buckets)


def clear_cache() -> None:
    """Forget cached answers (they are forgotten anyway when records are written)."""
    for r in _resolvers.values():
        r.clear()


def reset() -> None:
    """Forget everything: cached answers, open stores, warnings given (for tests)."""
    for r in _resolvers.values():
        r.resolver.close()
    _resolvers.clear()


def _nearest_note(neighbor: Neighbor) -> str:
    return (f"using the schedule tuned for the nearest shape "
            f"({neighbor.workload.describe()}), adapted")


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
