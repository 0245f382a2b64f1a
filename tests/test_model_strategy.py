"""The ``model`` strategy (``pypto.tuner.strategies.model``): it finds the optimum of a small
space measured whole, within a third of its size, also when its starting model ranks
backwards; a seeded run is reproducible; every record it measures carries the model's
score, exported and imported with it; it starts from the stored cost model when there is
one; ``pypto db stats`` shows how well the scores ranked what was measured."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pypto.db import open_store
from pypto.tuner.options import TuneOptions


def _softmax_task(rows: int, cols: int) -> Any:
    import pypto
    from pypto.tuner.tasks import extract_tasks

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = pypto.kernel(lambda a: pypto.softmax(a)).lower(
            pypto.spec((rows, cols), "float16"))
    (task,) = extract_tasks([compiled])
    return task


@pytest.fixture(scope="module")
def task() -> Any:
    """A softmax whose space has 450 valid points; its default is 0.4% off the optimum,
    which 8 of them share."""
    return _softmax_task(250, 128)


@pytest.fixture(scope="module")
def every_point(task: Any) -> dict[str, int]:
    """Cycles of every valid point of the space (schedule key -> cycles)."""
    from pypto.schedule_space import Schedule
    from pypto.tuner.measure import Measurer

    space = task.space
    measure = Measurer(task.workload, task.target, space)
    points = [Schedule(dict(zip(space.axes, p))) for p in space.points()]
    out = {}
    for p in points:
        if space.is_valid(p):
            m = measure(p)
            assert m.ok, m.error
            out[p.key] = int(m.cycles)
    return out


def _tune(task: Any, store: Any, trials: int, seed: int | None = 0, strategy: str = "model"):
    from pypto.tuner.loop import tune_task

    return tune_task(task, store, TuneOptions(strategy, trials, seed=seed))


@pytest.mark.parametrize("prior", ["analytic", "backwards"])
def test_finds_the_optimum_within_a_third_of_the_space(task: Any, every_point: dict[str, int],
                                                       prior: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from pypto.cost_model.model import CostModel

    assert len(every_point) == task.space.size().value == 450
    optimum = min(every_point.values())
    assert every_point[task.space.default().key] > optimum  # the default is not it
    if prior == "backwards":
        # an untrained model that ranks by the prior turned upside down: only what the
        # strategy learns from its measurements can lead it to the optimum
        predict = CostModel.predict

        def backwards(self: CostModel, x: np.ndarray) -> np.ndarray:
            scores = predict(self, x)
            return scores if self.trained else -scores

        monkeypatch.setattr(CostModel, "predict", backwards)
    store = open_store("sqlite://")
    res = _tune(task, store, len(every_point) // 3)
    assert res.trials_run == len(every_point) // 3
    recs = store.records(workload_key=task.workload.key)
    assert all(r.cycles == every_point[r.schedule_key] for r in recs)
    assert res.best_cycles == optimum
    assert len({r.schedule_key for r in recs}) == len(recs)       # nothing measured twice


def test_a_seeded_run_is_reproducible(task: Any) -> None:
    def run(seed: int) -> list[tuple[str, float | None]]:
        store = open_store("sqlite://")
        res = _tune(task, store, 30, seed=seed)
        scores = {r.schedule_key: r.model_score
                  for r in store.records(workload_key=task.workload.key)}
        return [(key, scores[key]) for key in res.order]

    first = run(3)
    assert len(first) == 30
    assert run(3) == first
    assert [k for k, _ in run(4)] != [k for k, _ in first]


def test_every_record_carries_the_models_score(task: Any, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pypto.cli import app
    from pypto.cost_model.features import featurize
    from pypto.cost_model.model import CostModel
    from pypto.db.cost_models import prediction_quality

    url = f"sqlite:///{tmp_path / 'm.db'}"
    store = open_store(url)
    _tune(task, store, 40)
    recs = store.records(workload_key=task.workload.key)
    assert len(recs) == 40 and all(r.model_score is not None for r in recs)
    # the default is scored before anything is measured: by the analytic prior
    default = next(r for r in recs if r.schedule == task.space.default())
    prior = CostModel(task.workload.family).predict(
        featurize(task.workload, [default.schedule], task.target, task.space))
    assert default.model_score == pytest.approx(float(prior[0]))
    # other strategies store none
    other = _softmax_task(120, 200)
    _tune(other, store, 5, strategy="random")
    assert all(r.model_score is None for r in store.records(workload_key=other.workload.key))

    (q,) = prediction_quality(store)
    assert (q.family, q.workloads, q.records) == ("vector", 1, 40)
    assert -1.0 <= q.worst <= q.spearman <= 1.0
    runner = CliRunner()
    out = runner.invoke(app, ["db", "stats", "--db", url])
    assert out.exit_code == 0, out.output
    assert "cost-model predictions" in out.output and "vector" in out.output
    assert f"{q.spearman:+.2f}" in out.output and "40 records" in out.output
    shown = runner.invoke(app, ["db", "stats", "--db", url, "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["predictions"] == [
        {"target": q.target_name, "family": "vector", "workloads": 1, "records": 40,
         "spearman": q.spearman, "worst": q.worst}]

    # a JSONL log keeps the scores: export -> import -> export is byte-identical
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    assert runner.invoke(app, ["db", "export", str(first), "--db", url]).exit_code == 0
    assert first.read_text().count('"model_score":') == 40
    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert runner.invoke(app, ["db", "import", str(first), "--db", fresh]).exit_code == 0
    assert runner.invoke(app, ["db", "export", str(second), "--db", fresh]).exit_code == 0
    assert second.read_bytes() == first.read_bytes()
    back = {r.schedule_key: r.model_score for r in open_store(fresh).records(
        workload_key=task.workload.key)}
    assert back == {r.schedule_key: r.model_score for r in recs}


def test_a_record_refuses_a_score_that_is_no_number(task: Any) -> None:
    from pypto.db import Record, WorkloadInfo
    from pypto.db.jsonl import parse_line, record_to_json

    default = task.space.default()
    for bad in (float("nan"), float("inf"), True, "0.5"):
        with pytest.raises(ValueError, match="model_score"):
            Record.measured(task.workload, task.target, default, cycles=10, model_score=bad)
    line = record_to_json(Record.measured(task.workload, task.target, default, cycles=10,
                                          model_score=0.25), WorkloadInfo.of(task.workload))
    assert parse_line(json.dumps(line))[0].model_score == 0.25
    with pytest.raises(ValueError, match="model_score"):
        parse_line(json.dumps({**line, "model_score": "hi"}))
    del line["model_score"]
    assert parse_line(json.dumps(line))[0].model_score is None


def test_starts_from_the_stored_model_and_without_one(task: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from pypto.cost_model.features import featurize
    from pypto.db import cost_models
    from pypto.tuner.strategies import model as model_strategy

    # without a stored model: the analytic prior, a full space-filling batch
    bare = open_store("sqlite://")
    assert cost_models.load_from_store(bare, task.target, "vector") is None
    res = _tune(task, bare, 12)
    assert res.status == "done" and res.trials_run == 12

    # another shape of the family tuned, its model trained and stored
    store = open_store("sqlite://")
    _tune(_softmax_task(500, 64), store, 30, strategy="random")
    stored = cost_models.train_from_store(store, task.target, "vector", seed=0)
    loaded: list[Any] = []
    load = cost_models.load_from_store

    def spy(*args: Any, **kw: Any) -> Any:
        loaded.append(load(*args, **kw))
        return loaded[-1]

    monkeypatch.setattr(cost_models, "load_from_store", spy)
    starts: list[Any] = []
    cold = model_strategy.Strategy._cold_start

    def watch(self: Any, t: Any) -> None:
        cold(self, t)
        starts.append((self.stored, len(self.others)))

    monkeypatch.setattr(model_strategy.Strategy, "_cold_start", watch)
    res = _tune(task, store, 12)
    assert res.status == "done" and res.trials_run == 12
    assert loaded and loaded[0] is not None and loaded[0].samples == stored.samples
    assert starts == [(True, 1)]         # the stored model, and the other shape's records
    # the default was scored by the stored model, not by the prior
    recs = store.records(workload_key=task.workload.key)
    default = next(r for r in recs if r.schedule == task.space.default())
    expect = stored.predict(featurize(task.workload, [default.schedule], task.target,
                                      task.space))
    assert default.model_score == pytest.approx(float(expect[0]))
    assert all(r.model_score is not None for r in recs)


def test_runs_with_workers(tmp_path: Path) -> None:
    """``pypto tune --workers 2 --strategy model``: each worker its own model over the
    shared study; the trials add up exactly, each record scored."""
    import subprocess
    import sys
    import textwrap

    script = tmp_path / "softmax.py"
    script.write_text(textwrap.dedent("""
        import numpy as np, pypto

        @pypto.kernel
        def soft(a):
            return pypto.softmax(a)

        soft(pypto.tensor(np.ones((120, 200)), dtype="float16"))
    """))
    url = f"sqlite:///{tmp_path / 'w.db'}"
    done = subprocess.run([sys.executable, "-m", "pypto.cli", "tune", str(script), "--trials",
                           "24", "--db", url, "--strategy", "model", "--workers", "2",
                           "--seed", "0"], cwd=Path(__file__).resolve().parent.parent,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "2 worker processes" in " ".join(done.stderr.split())
    with open_store(url) as store:
        recs = store.records()
    assert len(recs) == 24 and len({r.schedule_key for r in recs}) == 24
    assert all(r.model_score is not None for r in recs)


def test_a_revision_0002_database_upgrades_and_keeps_its_records(task: Any,
                                                                  tmp_path: Path) -> None:
    from dataclasses import replace

    from sqlalchemy import create_engine, inspect

    from pypto.db import Record, TargetInfo, WorkloadInfo, migrate, models

    url = f"sqlite:///{tmp_path / 'old.db'}"
    assert migrate.upgrade(url, "0002") == (None, "0002")

    engine = create_engine(url)
    assert "model_score" not in {c["name"] for c in inspect(engine).get_columns("pypto_records")}
    engine.dispose()
    assert migrate.upgrade(url) == ("0002", models.SCHEMA_REVISION)
    store = open_store(url)
    default = task.space.default()
    old = Record.measured(task.workload, task.target, default, cycles=100)
    neighbour = task.space.neighbors(default)[0]
    new = Record.measured(task.workload, task.target, neighbour, cycles=90, model_score=-0.5)

    assert store.add_records([old, new], workloads=[WorkloadInfo.of(task.workload)],
                             targets=[TargetInfo.of(task.target)]) == 2
    got = {r.schedule_key: r.model_score for r in store.records()}
    assert got == {default.key: None, neighbour.key: -0.5}
    # a replaced record takes the new score
    store.add_records([replace(old, model_score=1.5)], replace=True)
    assert {r.schedule_key: r.model_score for r in store.records()}[default.key] == 1.5


def _conv_task() -> Any:
    """A 3x3 conv whose default is row-aligned: ``m1`` = rows x width, so no single
    ``Space.neighbors`` step changes ``m1`` or ``row_block``."""
    import pypto
    from pypto.tuner.tasks import extract_tasks

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = pypto.kernel(lambda x, w: pypto.conv2d(x, w, padding=1)).lower(
            pypto.spec((1, 28, 28, 64), "float16", layout="NHWC"),
            pypto.spec((64, 64, 3, 3), "float16"))
    return next(t for t in extract_tasks([compiled]) if t.workload.family == "conv2d")


def test_resamplings_and_crossovers_are_valid_and_reach_what_steps_cannot() -> None:
    import optuna

    from pypto.tuner.strategies.model import Strategy

    task = _conv_task()
    strategy = Strategy(seed=3)
    strategy.bind(task, optuna.create_study())
    space, default = task.space, task.space.default()
    elites = [default, *space.neighbors(default)[:3]]
    resampled = [strategy._resample(elites) for _ in range(400)]
    crossed = [strategy._crossover(elites[:2], elites) for _ in range(200)]
    children = [c for c in resampled + crossed if c is not None]
    assert children and all(not space.validate(c) for c in children)
    by_step = {n.key for n in space.neighbors(default)}
    far = [c for c in resampled if c is not None and c.key not in by_step
           and sum(c[k] != default[k] for k in space.axes) >= 2]
    assert far   # several knobs at once: points no single valid step reaches


def test_a_stall_kicks_from_the_best_and_descends_where_the_kicks_landed(task: Any) -> None:
    """After STALL measurements without a new best the strategy plans kicks (random walks
    from the top-k, unmeasured) and the neighbours of the best point since the stall."""
    import optuna

    from pypto.tuner.strategies import model as mod

    strategy = mod.Strategy(seed=0)
    strategy.bind(task, optuna.create_study())
    space = task.space
    default = space.default()
    from pypto.schedule_space import Schedule

    valid = (Schedule(dict(zip(space.axes, p))) for p in space.points())
    rest = [s for s in valid if s != default and space.is_valid(s)][: mod.STALL + 2]
    schedules = [default, *rest]
    cycles = [100.0] + [200.0 + i for i in range(len(rest))]   # the default stays best
    known = {s.key for s in schedules}
    assert not strategy._kick(schedules[:2], cycles[:2], [default], known)   # no stall yet
    picks = strategy._kick(schedules, cycles, [default], known)
    assert picks and strategy.kicks == 1
    assert all(p.key not in known and not space.validate(p) for p in picks)
    # the stall began when the strategy last saw a new best: after the first 2 measurements
    landed = schedules[2 + int(np.argmin(cycles[2:]))]
    around = {n.key for n in space.neighbors(landed)}
    assert any(p.key in around for p in picks)


def test_coupled_moves_are_every_valid_two_knob_move_a_constraint_ties() -> None:
    """``coupled``: the valid points where two axes read by one constraint changed, one
    of them by a step; from the row-aligned default they change ``m1`` with
    ``row_block``, which no single valid step does."""
    import itertools

    from pypto.schedule_space import Schedule
    from pypto.tuner.strategies.model import _CachedNeighbors

    task = _conv_task()
    space, default = task.space, task.space.default()
    got = {s.key for s in _CachedNeighbors(space).coupled(default)}
    # the same set counted independently: every pair of changed axes, every value pair
    tied = {frozenset(p) for c in space.constraints for p in itertools.combinations(c.axes, 2)}
    want = set()
    for a, b in itertools.combinations(space.axes, 2):
        if frozenset((a, b)) not in tied:
            continue
        ca, cb = list(space.axes[a].choices), list(space.axes[b].choices)
        for va, vb in itertools.product(ca, cb):
            if va == default[a] or vb == default[b]:
                continue
            step_a = abs(ca.index(va) - ca.index(default[a])) == 1
            step_b = abs(cb.index(vb) - cb.index(default[b])) == 1
            knobs = {**dict(default), a: va, b: vb}
            if (step_a or step_b) and space.is_valid(Schedule(knobs)):
                want.add(Schedule(knobs).key)
    assert got == want
    by_step = {n.key for n in space.neighbors(default)}
    assert not any(n["m1"] != default["m1"] for n in space.neighbors(default))
    moved = [s for s in _CachedNeighbors(space).coupled(default)
             if s["m1"] != default["m1"] and s["row_block"] != default["row_block"]]
    assert moved and not {s.key for s in moved} & by_step


def test_each_batch_measures_the_priors_favourite_coupled_move_of_the_best() -> None:
    """A plateau of ties teaches the learned model nothing; a slot of each batch goes to
    the coupled move of the best that the analytic prior ranks first."""
    import optuna

    from pypto.cost_model.features import feature_names, featurize
    from pypto.tuner.strategies import model as mod

    task = _conv_task()
    strategy = mod.Strategy(seed=0)
    strategy.bind(task, optuna.create_study())
    space, default = task.space, task.space.default()
    coupled = strategy.walker.coupled(default)
    x = featurize(task.workload, coupled, task.target, space)
    prior = x[:, feature_names("conv2d").index("prior")]
    favourite = coupled[int(np.argmax(prior))]
    assert strategy._coupled_picks([default], {default.key}) == [favourite]
    # measured already: the next one
    second = coupled[int(np.argsort(-prior, kind="stable")[1])]
    assert strategy._coupled_picks([default], {default.key, favourite.key}) == [second]
    strategy.started = True
    strategy.study.add_trial(optuna.trial.create_trial(
        params=dict(default), value=1000.0,
        distributions={name: optuna.distributions.CategoricalDistribution(list(a.choices))
                       for name, a in space.axes.items()}))
    strategy._refill({default.key})
    assert favourite in strategy.batch
