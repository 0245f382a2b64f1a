"""The cost model: features (finite, deterministic, fast enough, one table per family),
the XGBoost model (recovers a known ranking, save -> load -> identical predictions,
refuses stale models, deterministic for a seed), metrics, and the store round trip."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto.codegen.pipeline import block_order
from pypto.cost_model.features import (
    FAMILY_FEATURES,
    _core_load,
    feature_names,
    featurize,
    featurize_columns,
    knob_columns,
)
from pypto.cost_model.metrics import rankdata, spearman, top_k_score
from pypto.cost_model.model import CostModel, normalized_labels, should_retrain
from pypto.errors import CostModelError, PyptoError
from pypto.schedule_space import FAMILIES, space_for
from pypto.targets import available_targets, load_target

TARGET = load_target("ascend910b")


def _matmul(m: int, k: int, n: int, batch: int = 0, relu: bool = False) -> pypto.ir.Workload:
    b = (batch,) if batch else ()
    fn = (lambda a, w: pypto.relu(pypto.matmul(a, w))) if relu else pypto.matmul
    c = pypto.kernel(fn).lower(pypto.spec((*b, m, k), "float16"),
                               pypto.spec((*b, k, n), "float16"), target=TARGET)
    return c.workloads[0]


def _conv(h: int, c_in: int, k_out: int, r: int, stride: int = 1) -> pypto.ir.Workload:
    comp = pypto.kernel(lambda x, w: pypto.conv2d(x, w, stride=stride, padding=r // 2)).lower(
        pypto.spec((1, h, h, c_in), "float16", layout="NHWC"),
        pypto.spec((k_out, c_in, r, r), "float16"), target=TARGET)
    return next(w for w in comp.workloads if w.family == "conv2d")


def _softmax(rows: int, cols: int) -> pypto.ir.Workload:
    comp = pypto.kernel(pypto.softmax).lower(pypto.spec((rows, cols), "float16"),
                                             target=TARGET)
    return comp.workloads[0]


def _samples(wl, n: int, seed: int = 0, target=TARGET):
    space = space_for(wl, target)
    rng = random.Random(seed)
    return [space.default()] + [space.sample(rng) for _ in range(n - 1)]


def test_every_family_has_features_with_stable_names():
    assert set(FAMILY_FEATURES) == set(FAMILIES)
    for family, feats in FAMILY_FEATURES.items():
        names = feature_names(family)
        assert len(names) == len(set(names)), family
        assert names == feats.names


@pytest.mark.parametrize("make", [lambda: _matmul(256, 512, 384),
                                  lambda: _matmul(64, 128, 96, batch=4, relu=True),
                                  lambda: _conv(14, 32, 64, 3),
                                  lambda: _softmax(512, 256)])
def test_features_finite_and_deterministic(make):
    wl = make()
    schedules = _samples(wl, 40)
    x = featurize(wl, schedules, TARGET)
    assert x.shape == (40, len(feature_names(wl.family)))
    assert np.isfinite(x).all()
    assert np.array_equal(x, featurize(wl, list(reversed(schedules)), TARGET)[::-1])
    # a row does not depend on the other candidates
    assert np.array_equal(x[3:4], featurize(wl, schedules[3:4], TARGET))
    # the prior is a ratio bound / estimate
    prior = x[:, feature_names(wl.family).index("prior")]
    assert (prior > 0).all()


def test_features_on_every_target():
    for name in available_targets():
        target = load_target(name)
        wl = _matmul(128, 256, 128)
        try:
            space = space_for(wl, target)
        except PyptoError:
            continue
        schedules = [space.default(), space.sample(0)]
        assert np.isfinite(featurize(wl, schedules, target, space)).all()


def test_featurize_is_fast():
    wl = _matmul(1024, 1024, 1024)
    space = space_for(wl, TARGET)
    columns = knob_columns(space, _samples(wl, 200) * 100)       # 20,000 candidates
    t0 = time.perf_counter()
    x = featurize_columns(wl, columns, TARGET)
    rate = len(x) / (time.perf_counter() - t0)
    assert rate > 20_000, f"{rate:,.0f} candidates/s"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 700), k=st.integers(1, 700), n=st.integers(1, 700),
       batch=st.sampled_from([0, 0, 3]), relu=st.booleans(), seed=st.integers(0, 10**6))
def test_features_never_nan_or_inf_matmul(m, k, n, batch, relu, seed):
    wl = _matmul(m, k, n, batch, relu)
    assert np.isfinite(featurize(wl, _samples(wl, 6, seed), TARGET)).all()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(h=st.integers(3, 20), c=st.sampled_from([3, 16, 40]), k=st.sampled_from([16, 48]),
       r=st.sampled_from([1, 3]), stride=st.sampled_from([1, 2]), seed=st.integers(0, 10**6))
def test_features_never_nan_or_inf_conv(h, c, k, r, stride, seed):
    wl = _conv(h, c, k, r, stride)
    assert np.isfinite(featurize(wl, _samples(wl, 6, seed), TARGET)).all()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(1, 3000), cols=st.integers(1, 3000), seed=st.integers(0, 10**6))
def test_features_never_nan_or_inf_vector(rows, cols, seed):
    wl = _softmax(rows, cols)
    assert np.isfinite(featurize(wl, _samples(wl, 6, seed), TARGET)).all()


@settings(max_examples=200, deadline=None)
@given(batch=st.integers(1, 3), mb=st.integers(1, 30), nb=st.integers(1, 30),
       order=st.sampled_from(["mn", "nm"]), swizzle=st.sampled_from([1, 2, 3, 4, 8]),
       split=st.integers(1, 3), cores=st.integers(1, 32),
       f_m=st.sampled_from([1.0, 0.5, 0.125, 0.9]), f_n=st.sampled_from([1.0, 0.25, 0.6]))
def test_core_load_is_the_busiest_core_of_the_codegen_block_order(
        batch, mb, nb, order, swizzle, split, cores, f_m, f_n):
    """Dealing the codegen's own block order round robin (partial last row and column)
    gives the busiest core's load the features charge, up to the exact-count limit."""
    units = [(f_m if m == mb - 1 else 1.0) * (f_n if n == nb - 1 else 1.0)
             for _, m, n in block_order(batch, mb, nb, order, swizzle) for _ in range(split)]
    busiest = max(sum(units[c::cores]) for c in range(cores))
    outer, inner, f_o, f_i = (mb, nb, f_m, f_n) if order == "mn" else (nb, mb, f_n, f_m)
    one = lambda v: np.array([float(v)])  # noqa: E731
    load = _core_load(one(cores), float(batch), one(outer), one(inner), one(f_o), one(f_i),
                      one(swizzle), one(split))[0]
    assert load == pytest.approx(busiest, rel=1e-9)


def test_core_load_of_a_partial_last_wave_and_of_grids_past_the_exact_limit():
    one = lambda v: np.array([float(v)])  # noqa: E731
    # 25 blocks of 128 pixels on 24 cores, the last one half a block: 1.5, not 2 waves
    assert _core_load(one(24), 1.0, one(25), one(1), one(0.5), one(1.0), one(1),
                      one(1))[0] == pytest.approx(1.5)
    # a grid too big to count: between the average core and whole waves
    big = _core_load(one(24), 1.0, one(300), one(100), one(0.5), one(0.5), one(1), one(1))[0]
    assert 300 * 100 * 0.99 / 24 <= big <= -(-300 * 100 // 24)


# -- the model ---------------------------------------------------------------------------

NAMES = ("a", "b", "c", "prior")


def _synthetic(seed: int, groups: int = 6, n: int = 150):
    """Groups whose cycles follow a known function of the features (scaled per group)."""
    rng = np.random.default_rng(seed)
    out = []
    for g in range(groups):
        x = rng.random((n, 4))
        cycles = (1 + g) * 1000 * (1 + 3 * x[:, 0] + (x[:, 1] - 0.5) ** 2 * 4)
        out.append((x, cycles))
    return out


def _widen(x: np.ndarray, columns: int) -> np.ndarray:
    """``x``'s columns repeated to ``columns`` (a family's feature count)."""
    return np.tile(x, (1, -(-columns // x.shape[1])))[:, :columns]


@pytest.mark.parametrize("objective", ["rank:pairwise", "reg:squarederror"])
def test_model_recovers_a_synthetic_ranking(objective):
    train, test = _synthetic(0), _synthetic(1, groups=2)
    model = CostModel("matmul", feature_names=NAMES, objective=objective, rounds=80).fit(train)
    for x, cycles in test:
        scores = model.predict(x)
        assert spearman(scores, cycles) > 0.9
        assert top_k_score(scores, cycles, 5) > 0.95


def test_save_load_predicts_identically_and_is_deterministic():
    data = _synthetic(2)
    m1 = CostModel("matmul", feature_names=feature_names("matmul"), rounds=30, seed=7)
    wide = [(_widen(x, len(m1.feature_names)), c) for x, c in data]
    m1.fit(wide)
    m2 = CostModel("matmul", feature_names=feature_names("matmul"), rounds=30, seed=7).fit(wide)
    x = wide[0][0]
    assert np.array_equal(m1.predict(x), m2.predict(x))
    for fmt in ("ubj", "json"):
        blob = m1.save(fmt)
        loaded = CostModel.load(blob, family="matmul")
        assert np.array_equal(loaded.predict(x), m1.predict(x))
        assert (loaded.samples, loaded.family, loaded.objective) == (
            m1.samples, "matmul", m1.objective)
    assert m1.save("ubj") == m2.save("ubj")


def test_the_trees_start_from_the_prior_and_keep_its_weight_when_saved():
    """With the prior as base margin, two rounds of trees already rank by the prior
    (the margin is applied in fit and in predict alike); its weight survives save/load."""
    rng = np.random.default_rng(4)
    groups = []
    for g in range(4):
        x = rng.random((120, 4))
        x[:, 3] = 0.05 + 0.95 * x[:, 3]  # the prior, in (0, 1]
        groups.append((x, (1 + g) * 1e4 / x[:, 3] * (1 + 0.05 * x[:, 0])))
    held_x, held_cycles = groups.pop()
    model = CostModel("matmul", feature_names=NAMES, rounds=2, prior_margin=2.5).fit(groups)
    assert spearman(model.predict(held_x), held_cycles) > 0.95
    wide = CostModel("matmul", rounds=2, prior_margin=2.5)
    wide.fit([(_widen(x, len(wide.feature_names)), c) for x, c in groups])
    wx = _widen(held_x, len(wide.feature_names))
    loaded = CostModel.load(wide.save(), family="matmul")
    assert loaded.prior_margin == 2.5
    assert np.array_equal(loaded.predict(wx), wide.predict(wx))
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(CostModelError, match="prior_margin"):
            CostModel("matmul", prior_margin=bad)


def test_load_refuses_stale_or_foreign_models(monkeypatch):
    data = _synthetic(3)
    names = feature_names("vector")
    model = CostModel("vector", rounds=5).fit(
        [(_widen(x, len(names)), c) for x, c in data])
    blob = model.save()
    with pytest.raises(CostModelError, match="for 'vector' workloads"):
        CostModel.load(blob, family="matmul")
    import pypto.cost_model.model as model_module

    monkeypatch.setattr(model_module, "FEATURE_VERSION", "features-0")
    with pytest.raises(CostModelError, match="retrain"):
        CostModel.load(blob, family="vector")
    monkeypatch.undo()
    with pytest.raises(CostModelError, match="not a readable XGBoost model"):
        CostModel.load(b"not a model at all")
    with pytest.raises(CostModelError, match="not trained"):
        CostModel("vector").save()
    assert issubclass(CostModelError, pypto.PyptoError)


def test_untrained_model_ranks_by_the_prior_and_errors_are_clear():
    model = CostModel("matmul")
    x = np.zeros((3, len(model.feature_names)))
    x[:, model.feature_names.index("prior")] = [0.2, 0.9, 0.5]
    assert list(model.rank(x)) == [1, 2, 0]
    with pytest.raises(CostModelError, match="columns"):
        model.predict(np.zeros((2, 3)))
    with pytest.raises(CostModelError, match="no training data"):
        model.fit([(np.zeros((1, len(model.feature_names))), np.ones(1))])
    with pytest.raises(CostModelError, match="positive"):
        normalized_labels(np.array([0.0, 1.0]))
    with pytest.raises(CostModelError, match="objective"):
        CostModel("matmul", objective="binary:logistic")


def test_should_retrain_after_twenty_percent_growth():
    assert should_retrain(10, 0)
    assert not should_retrain(0, 0)
    assert not should_retrain(119, 100)
    assert should_retrain(120, 100)


def test_metrics():
    assert list(rankdata(np.array([3.0, 1.0, 3.0]))) == [2.5, 1.0, 2.5]
    cycles = np.array([100.0, 200.0, 400.0])
    assert spearman(np.array([3.0, 2.0, 1.0]), cycles) == pytest.approx(1.0)
    assert spearman(np.array([1.0, 2.0, 3.0]), cycles) == pytest.approx(-1.0)
    assert top_k_score(np.array([1.0, 3.0, 2.0]), cycles, 1) == 0.5
    assert top_k_score(np.array([1.0, 3.0, 2.0]), cycles, 3) == 1.0


def test_a_model_trained_on_measured_schedules_beats_chance():
    """Real simulator labels: two small GEMMs train, a third ranks."""
    from pypto.tuner.measure import Measurer

    groups = []
    for m, k, n in ((128, 256, 256), (256, 128, 128), (192, 256, 128)):
        wl = _matmul(m, k, n)
        schedules = _samples(wl, 40, seed=m)
        meas = Measurer(wl, TARGET)
        cycles = [meas(s).cycles for s in schedules]
        groups.append((featurize(wl, schedules, TARGET), np.array(cycles, dtype=np.float64)))
    model = CostModel("matmul", rounds=60).fit(groups[:2])
    assert spearman(model.predict(groups[2][0]), groups[2][1]) > 0.3
