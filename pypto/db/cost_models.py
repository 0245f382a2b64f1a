"""Cost models in the schedule database: train one from a store's records, save it per
(target, op family, timing-model version) with its metrics and training-set size, and
load it back (``ScheduleStore.save_cost_model`` / ``load_cost_model`` hold the bytes).

The blob is XGBoost's UBJ; its booster attributes and the stored metrics carry the
feature version, so a model trained on other features is refused on load
(``CostModelError``) rather than misread.

Example:
    >>> from pypto.db import open_store
    >>> from pypto.db.cost_models import load_from_store
    >>> from pypto.targets import load_target
    >>> load_from_store(open_store("sqlite://"), load_target("ascend910b"), "matmul") is None
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from pypto.cost_model.features import FEATURE_VERSION, featurize
from pypto.cost_model.model import CostModel, should_retrain
from pypto.db.records import CostModelBlob, TargetInfo
from pypto.errors import CostModelError, PyptoError
from pypto.sim import MODEL_VERSION

if TYPE_CHECKING:
    from pypto.db.reader import ScheduleReader
    from pypto.db.store import ScheduleStore
    from pypto.ir.workload import Workload
    from pypto.targets import Target

MIN_RECORDS = 2  # per workload: fewer rank nothing


def training_groups(store: ScheduleStore, target: Target, family: str,
                    exclude: Iterable[str] = ()) -> list[tuple[Workload, np.ndarray, np.ndarray]]:
    """(workload, features, cycles) per workload of ``family`` with ``ok`` records on
    ``target`` under the current timing model; records whose schedule no longer validates
    are left out. ``exclude``: workload keys to leave out (held-out evaluation)."""
    from pypto.schedule_space import complete, space_for

    skip = set(exclude)
    keys = sorted({s.workload.key for s in store.summary()
                   if s.target_key == target.key and s.model_version == MODEL_VERSION
                   and s.workload.family == family and s.ok >= MIN_RECORDS
                   and s.workload.key not in skip})
    infos = {w.key: w for w in store.workloads() if w.key in keys}
    groups = []
    for key in keys:
        wl = infos[key].workload()
        try:
            space = space_for(wl, target)
        except PyptoError:
            continue
        schedules, cycles = [], []
        for r in store.iter_records(workload_key=key, target_key=target.key,
                                    model_version=MODEL_VERSION, status="ok"):
            s = complete(wl, r.schedule)
            if not space.validate(s):
                schedules.append(s)
                cycles.append(r.cycles)
        if len(schedules) >= MIN_RECORDS:
            groups.append((wl, featurize(wl, schedules, target, space),
                           np.asarray(cycles, dtype=np.float64)))
    return groups


def train_from_store(store: ScheduleStore, target: Target, family: str, *, seed: int = 0,
                     objective: str | None = None, save: bool = True, calibrate: bool = True,
                     **settings: Any) -> CostModel:
    """Train the ``family`` model on every current ``ok`` record of ``target`` in
    ``store`` and (``save``) store it with its training-set size; ``calibrate``: with its
    departure margin over the default schedule, by cross-validation over the workloads
    (``pypto.cost_model.calibration``; metrics ``departure_margin``, ``held_out``).

    Raises:
        CostModelError: no workload of ``family`` has two measured schedules.
    """
    groups = training_groups(store, target, family)
    if not groups:
        raise CostModelError(f"no {family} workload has {MIN_RECORDS} measured schedules on "
                             f"{target.name} in the database; tune some first")
    kw: dict[str, Any] = dict(settings)
    if objective is not None:
        kw["objective"] = objective
    model = CostModel(family, seed=seed, **kw).fit([(x, y) for _, x, y in groups])
    model.metrics = {**model.metrics, "feature_version": FEATURE_VERSION,
                     "objective": model.objective, "workloads": model.workloads,
                     "samples": model.samples}
    if calibrate:
        model.metrics.update(_calibration(groups, target, family, seed, kw))
    if save:
        save_to_store(store, target, model)
    return model


def _calibration(groups: list[tuple[Workload, np.ndarray, np.ndarray]], target: Target,
                 family: str, seed: int, settings: dict[str, Any]) -> dict[str, Any]:
    """The model's departure margin, from models trained on the other workloads' folds;
    None (no departure) with too few held-out workloads (``MIN_HELD_OUT``)."""
    from pypto.cost_model.calibration import HeldOut, departure_margin, held_out_picks
    from pypto.schedule_space import space_for

    data = []
    for wl, x, y in groups:
        d = featurize(wl, [space_for(wl, target).default()], target)[0]
        rows = np.flatnonzero(np.all(x == d, axis=1))
        data.append(HeldOut(x, y, int(rows[0]) if len(rows) else None))

    def fit(train: list[tuple[np.ndarray, np.ndarray]]):  # noqa: ANN202
        return CostModel(family, seed=seed, **settings).fit(train).predict

    picks = held_out_picks(data, fit)
    margin = departure_margin(picks)
    return {"departure_margin": margin if np.isfinite(margin) else None,
            "held_out": [[round(m, 6), round(g, 6)] for m, g in picks]}


def save_to_store(store: ScheduleStore, target: Target, model: CostModel) -> None:
    """Store ``model`` as the (target, family) cost model of the current timing model."""
    metrics = {**model.metrics, "feature_version": FEATURE_VERSION}
    store.save_cost_model(CostModelBlob(target.key, model.family, model.save("ubj"), "ubj",
                                        json.dumps(metrics, sort_keys=True), model.samples),
                          TargetInfo.of(target))


def load_from_store(store: ScheduleReader, target: Target, family: str,
                    nthread: int = 1) -> CostModel | None:
    """The stored (target, family) model of the current timing model, or None.

    Raises:
        CostModelError: the stored model is for other features or is unreadable.
    """
    blob = store.load_cost_model(target.key, family)
    if blob is None:
        return None
    stored = json.loads(blob.metrics or "{}").get("feature_version")
    if stored is not None and stored != FEATURE_VERSION:
        raise CostModelError(f"the stored {family} cost model of {target.name} was trained on "
                             f"features {stored!r}, this PyPTO computes {FEATURE_VERSION!r}; "
                             "retrain it (pypto.db.cost_models.train_from_store)")
    return CostModel.load(blob.blob, family=family, nthread=nthread)


def retrain_if_grown(store: ScheduleStore, target: Target, family: str,
                     **settings: Any) -> CostModel | None:
    """Retrain and store the (target, family) model when its data grew by 20% since it
    was trained (or there is none yet and there is data); else the stored one."""
    current = None
    try:
        current = load_from_store(store, target, family)
    except CostModelError:
        current = None  # stale: retrain
    n_now = sum(s.ok for s in store.summary() if s.target_key == target.key
                and s.model_version == MODEL_VERSION and s.workload.family == family)
    if should_retrain(n_now, current.samples if current else 0):
        try:
            return train_from_store(store, target, family, **settings)
        except CostModelError:
            return current
    return current


#: the most recent records per workload that ``prediction_quality`` reads
RECENT = 200
MIN_SCORED = 3   # per workload: fewer give no rank correlation worth showing


@dataclass(frozen=True)
class PredictionQuality:
    """How well the ``model`` strategy's predictions ranked what was then measured, for one
    (target, op family): Spearman's rank correlation of each record's ``model_score`` with
    its speed, per workload over its ``RECENT`` newest scored ``ok`` records, and the
    median over the ``workloads`` that have ``MIN_SCORED`` of them (``records`` in all).
    Scores are comparable within one workload only, hence per workload."""

    target_name: str
    family: str
    workloads: int
    records: int
    spearman: float
    worst: float


def prediction_quality(store: ScheduleStore, recent: int = RECENT) -> list[PredictionQuality]:
    """``PredictionQuality`` per (target, family) of the current timing model's records that
    carry a ``model_score``; sorted by target name and family."""
    from pypto.cost_model.metrics import spearman

    families = {w.key: w.family for w in store.workloads()}
    scored: dict[tuple[str, str], list[tuple[datetime, float, int]]] = {}
    names: dict[str, str] = {}
    for r in store.iter_records(model_version=MODEL_VERSION, status="ok"):
        if r.model_score is None or r.cycles is None:
            continue
        names[r.target_key] = r.target_name
        when = r.created_at or datetime.min.replace(tzinfo=UTC)
        scored.setdefault((r.workload_key, r.target_key), []).append(
            (when, r.model_score, r.cycles))
    per: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for (wk, tk), rows in scored.items():
        rows = sorted(rows, key=lambda row: row[0])[-recent:]
        if len(rows) < MIN_SCORED:
            continue
        rho = spearman(np.array([s for _, s, _ in rows]), np.array([c for _, _, c in rows]))
        per.setdefault((names[tk], families.get(wk, "?")), []).append((rho, len(rows)))
    return [PredictionQuality(target, family, len(v), sum(n for _, n in v),
                              float(np.median([rho for rho, _ in v])),
                              float(min(rho for rho, _ in v)))
            for (target, family), v in sorted(per.items())]
