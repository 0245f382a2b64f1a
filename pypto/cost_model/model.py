"""The learned cost model: XGBoost over ``features``, trained per target and op family.

``CostModel.fit(groups)`` takes one group per workload: its candidates' feature rows and
measured cycles. Labels are normalized per workload (best cycles / cycles, in (0, 1]) so
that workloads of very different sizes train one model; each workload is one query
(``DMatrix(qid=...)``). The objective is a ranking one (``rank:pairwise``, the default,
chosen by ``benchmarks/cost_model_eval.py``) or a regression of the normalized label
(``reg:squarederror``); both give scores where higher means faster, comparable within
a workload only. Under a ranking objective the trees start from the analytic prior (the
``prior`` feature: roofline bound / analytic estimate) as XGBoost's base margin,
``prior_margin`` x log(prior), and learn the correction to it: what the analytic
model already knows need not be relearned from a few workloads of a family (held-out
top-1 on the measured dataset: see the README). With no booster yet, ``predict``
returns the prior itself, so a model is usable before it has data.

A model saves as XGBoost's own UBJ (or JSON) bytes, never a pickle; the booster's
attributes carry the op family, the feature version and the model format, and ``load``
refuses a model made for other features (``CostModelError``). Training is deterministic
for a seed (``hist`` on a fixed thread count).

Example:
    >>> import numpy as np
    >>> from pypto.cost_model.model import CostModel
    >>> rng = np.random.default_rng(0)
    >>> x = rng.random((200, 3)); cycles = 1000 + 900 * x[:, 0]
    >>> m = CostModel("matmul", feature_names=("a", "b", "c"), rounds=20)
    >>> m = m.fit([(x[:100], cycles[:100]), (x[100:], cycles[100:])])
    >>> bool(np.corrcoef(m.predict(x), -cycles)[0, 1] > 0.9)
    True
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pypto.cost_model.features import FEATURE_VERSION, feature_names
from pypto.errors import CostModelError

#: The format of a saved model (its attributes and the meaning of its scores).
MODEL_FORMAT = "pypto-cost-model-2"
OBJECTIVES = ("rank:pairwise", "rank:ndcg", "reg:squarederror")
DEFAULT_OBJECTIVE = "rank:pairwise"
RETRAIN_GROWTH = 0.2  # retrain when the data grew by this fraction (Ansor)
NDCG_LEVELS = 31      # rank:ndcg wants integer relevance <= 31
DEFAULT_PRIOR_MARGIN = 0.5  # chosen by benchmarks/cost_model_eval.py --prior-margins

Group = tuple[np.ndarray, np.ndarray]  # (features [n, f], cycles [n])


def should_retrain(n_now: int, n_at_fit: int, growth: float = RETRAIN_GROWTH) -> bool:
    """Whether a model fitted on ``n_at_fit`` samples should be refitted now that there
    are ``n_now``: it never was, or the data grew by ``growth`` (20%) since."""
    if n_now <= 0:
        return False
    return n_at_fit <= 0 or n_now >= n_at_fit * (1.0 + growth)


def normalized_labels(cycles: np.ndarray) -> np.ndarray:
    """best / cycles per workload: 1 for the best measured schedule, in (0, 1]."""
    c = np.asarray(cycles, dtype=np.float64)
    if c.size == 0 or not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise CostModelError("cycles must be positive and finite to train a cost model")
    return c.min() / c


@dataclass
class CostModel:
    """An XGBoost model ranking schedules of one op family on one target.

    Attributes:
        family: the op family (``matmul``, ``conv2d``, ``vector``).
        feature_names: the columns it reads (default: ``feature_names(family)``).
        objective: one of ``OBJECTIVES``.
        seed, rounds, nthread: training settings (deterministic for the same ones).
        prior_margin: the weight of log(prior) in a ranking's base margin (0: none).
        samples, workloads: the training set's size at the last ``fit``.
        metrics: evaluation figures (plain data) stored with the model.
    """

    family: str
    feature_names: tuple[str, ...] = ()
    objective: str = DEFAULT_OBJECTIVE
    seed: int = 0
    rounds: int = 300
    nthread: int = 1
    prior_margin: float = DEFAULT_PRIOR_MARGIN
    params: dict[str, Any] = field(default_factory=dict)
    samples: int = 0
    workloads: int = 0
    metrics: dict[str, Any] = field(default_factory=dict)
    booster: Any = None

    def __post_init__(self) -> None:
        if not self.feature_names:
            self.feature_names = feature_names(self.family)
        if self.objective not in OBJECTIVES:
            raise CostModelError(f"objective {self.objective!r} is not one of {OBJECTIVES}")
        if not (np.isfinite(self.prior_margin) and self.prior_margin >= 0):
            raise CostModelError(f"prior_margin must be a finite number >= 0, not "
                                 f"{self.prior_margin!r}")

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def xgb_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "objective": self.objective, "eta": 0.08, "max_depth": 7,
            "min_child_weight": 2.0, "subsample": 0.85, "colsample_bytree": 0.85,
            "lambda": 1.0, "tree_method": "hist", "seed": self.seed, "nthread": self.nthread,
            "verbosity": 0}
        if self.objective.startswith("rank:"):
            params.update(lambdarank_pair_method="mean", lambdarank_num_pair_per_sample=16)
        params.update(self.params)
        return params

    # -- training ---------------------------------------------------------------------
    def fit(self, groups: Sequence[Group]) -> CostModel:
        """Train on ``groups`` (one per workload: feature rows and measured cycles);
        returns self. Groups with fewer than two points teach a ranking nothing and are
        left out."""
        import xgboost as xgb

        x, y, qid = self._stack(groups)
        dtrain = xgb.DMatrix(x, label=y, qid=qid, base_margin=self._base_margin(x),
                             feature_names=list(self.feature_names))
        self.booster = xgb.train(self.xgb_params(), dtrain, num_boost_round=self.rounds)
        self.samples = int(len(y))
        self.workloads = int(qid[-1] + 1) if len(qid) else 0
        return self

    def _stack(self, groups: Sequence[Group]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        xs, ys, qs = [], [], []
        for x, cycles in groups:
            x = np.asarray(x, dtype=np.float64)
            if len(cycles) < 2:
                continue
            if x.ndim != 2 or x.shape[1] != len(self.feature_names) or len(x) != len(cycles):
                raise CostModelError(
                    f"a training group has features of shape {x.shape} for {len(cycles)} "
                    f"cycles; the {self.family} model reads {len(self.feature_names)} "
                    "features per row")
            label = normalized_labels(cycles)
            if self.objective == "rank:ndcg":
                label = np.rint(NDCG_LEVELS * label ** 4)
            xs.append(x)
            ys.append(label)
            qs.append(np.full(len(label), len(qs), dtype=np.int64))
        if not xs:
            raise CostModelError(f"no training data for the {self.family} cost model: it "
                                 "needs at least one workload with two measured schedules")
        return np.concatenate(xs), np.concatenate(ys), np.concatenate(qs)

    # -- use --------------------------------------------------------------------------
    def predict(self, x: np.ndarray) -> np.ndarray:
        """Scores of feature rows (higher: faster), comparable within one workload. An
        untrained model scores by the analytic prior."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != len(self.feature_names):
            raise CostModelError(f"features of shape {x.shape}: the {self.family} cost model "
                                 f"reads {len(self.feature_names)} columns per row")
        if self.booster is None:
            return x[:, self.feature_names.index("prior")].copy()
        # in place: no DMatrix (the same trees, the same scores; faster for small pools)
        return np.asarray(self.booster.inplace_predict(x, base_margin=self._base_margin(x)),
                          dtype=np.float64)

    def _base_margin(self, x: np.ndarray) -> np.ndarray | None:
        """``prior_margin`` x log(prior) per row, where a ranking's trees start (None: from
        0). A regression's label is best / cycles, on another scale: it starts from 0."""
        if self.prior_margin == 0 or not self.objective.startswith("rank:"):
            return None
        prior = x[:, self.feature_names.index("prior")]
        return self.prior_margin * np.log(np.clip(prior, 1e-9, None))

    def rank(self, x: np.ndarray) -> np.ndarray:
        """Row indices, predicted fastest first (ties: the earlier row)."""
        return np.argsort(-self.predict(x), kind="stable")

    # -- storage ----------------------------------------------------------------------
    def save(self, fmt: str = "ubj") -> bytes:
        """The model as XGBoost ``ubj`` or ``json`` bytes (with PyPTO's attributes)."""
        if self.booster is None:
            raise CostModelError(f"the {self.family} cost model is not trained: nothing to save")
        if fmt not in ("ubj", "json"):
            raise CostModelError(f"cost models save as 'ubj' or 'json', not {fmt!r}")
        self.booster.set_attr(
            pypto_format=MODEL_FORMAT, pypto_family=self.family,
            pypto_feature_version=FEATURE_VERSION,
            pypto_feature_names=json.dumps(list(self.feature_names)),
            pypto_objective=self.objective, pypto_prior_margin=repr(self.prior_margin),
            pypto_samples=str(self.samples),
            pypto_workloads=str(self.workloads), pypto_metrics=json.dumps(self.metrics))
        return bytes(self.booster.save_raw(raw_format=fmt))

    @classmethod
    def load(cls, blob: bytes, family: str | None = None, nthread: int = 1) -> CostModel:
        """A model saved by ``save``. Raises ``CostModelError`` for bytes that are not an
        XGBoost model, a model that is not PyPTO's, or one made for another op family,
        feature version or model format (retrain with ``train_from_store``)."""
        import xgboost as xgb

        booster = xgb.Booster(params={"nthread": nthread})
        try:
            booster.load_model(bytearray(blob))
        except xgb.core.XGBoostError as e:
            raise CostModelError(f"not a readable XGBoost model ({len(blob)} bytes): "
                                 f"{str(e).splitlines()[0]}") from None
        attrs = booster.attributes()
        if attrs.get("pypto_format") != MODEL_FORMAT:
            raise CostModelError(f"the saved cost model has format "
                                 f"{attrs.get('pypto_format')!r}, this PyPTO reads "
                                 f"{MODEL_FORMAT!r}; retrain it")
        got_family = attrs.get("pypto_family", "")
        if family is not None and got_family != family:
            raise CostModelError(f"the saved cost model is for {got_family!r} workloads, "
                                 f"not {family!r}")
        if attrs.get("pypto_feature_version") != FEATURE_VERSION:
            raise CostModelError(f"the saved {got_family} cost model was trained on features "
                                 f"{attrs.get('pypto_feature_version')!r}, this PyPTO computes "
                                 f"{FEATURE_VERSION!r}; retrain it (train_from_store)")
        names = tuple(json.loads(attrs.get("pypto_feature_names", "[]")))
        if names != feature_names(got_family):
            raise CostModelError(f"the saved {got_family} cost model reads other feature "
                                 "columns than this PyPTO computes; retrain it")
        try:
            prior_margin = float(attrs.get("pypto_prior_margin", ""))
        except ValueError:
            raise CostModelError("the saved cost model does not say how it weighs the prior "
                                 "(pypto_prior_margin); retrain it") from None
        return cls(got_family, names, objective=attrs.get("pypto_objective", DEFAULT_OBJECTIVE),
                   nthread=nthread, prior_margin=prior_margin,
                   samples=int(attrs.get("pypto_samples", "0")),
                   workloads=int(attrs.get("pypto_workloads", "0")),
                   metrics=json.loads(attrs.get("pypto_metrics", "{}")), booster=booster)
