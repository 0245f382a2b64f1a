"""Search hygiene of the tuning loop, for every strategy: a duplicate proposal is answered by
an unmeasured neighbour-walk mutation of one of the best (``pypto.tuner.mutation``), never
by a uniform point while such a mutation exists; the first trials after the default are the
adapted best schedules of tuned nearby shapes (``pypto.tuner.transfer``)."""

from __future__ import annotations

import heapq
import random
import warnings
from pathlib import Path
from typing import Any

import pytest

from pypto.tuner.strategies import base


def _task(m: int, k: int, n: int) -> Any:
    import pypto
    from pypto.tuner.tasks import extract_tasks

    kernel = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = kernel.lower(pypto.spec((m, k), "float16"), pypto.spec((k, n), "float16"))
    (task,) = extract_tasks([compiled])
    return task


def _relu_task() -> Any:
    import pypto
    from pypto.tuner.tasks import extract_tasks

    kernel = pypto.kernel(lambda a: pypto.relu(a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (task,) = extract_tasks([kernel.lower(pypto.spec((16, 16), "float16"))])
    return task


def _steps(space: Any, a: Any, b: Any) -> int:
    """Index distance between two points (a neighbour step moves one axis by one)."""
    return sum(abs(axis.index(a[name]) - axis.index(b[name]))
               for name, axis in space.axes.items())


class Stubborn(base.Strategy):
    """Proposes one fixed point over and over (a sampler stuck on its best), except when the
    study has a trial queued: that one it takes, as every strategy does."""

    name = "stubborn"

    def sampler(self) -> Any:
        import optuna

        return optuna.samplers.RandomSampler(seed=self.seed)

    def propose(self) -> base.Proposal:
        from optuna.trial import TrialState

        if self.study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
            return super().propose()
        fixed = self.space.sample(random.Random(99))
        return base.Proposal(self.study.ask(), fixed)


def _tune_stubborn(task: Any, url: str, trials: int, monkeypatch: pytest.MonkeyPatch,
                   seed: int = 0) -> tuple[Any, Stubborn, dict[str, int]]:
    from pypto.db import open_store
    from pypto.tuner import strategies
    from pypto.tuner.loop import tune_task
    from pypto.tuner.options import TuneOptions

    made: list[Stubborn] = []

    def get(name: str, seed: int | None = None) -> Stubborn:
        made.append(Stubborn(seed))
        return made[-1]

    monkeypatch.setattr(strategies, "get_strategy", get)
    with open_store(url) as store:
        res = tune_task(task, store, TuneOptions("stubborn", trials, seed=seed))
        cycles = {r.schedule_key: r.cycles for r in store.records(
            workload_key=task.workload.key, target_key=task.target.key)}
    return res, made[0], cycles


def test_a_duplicate_is_answered_by_an_unmeasured_neighbour_of_the_best(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A strategy that proposes one point forever: after the default and that point, every
    trial is a new valid point at most 3 neighbour steps from one of the 3 best measured
    before it (a uniform point would land anywhere), none measured twice, none uniform."""
    task = _task(128, 256, 128)
    space = task.space
    trials = 24
    res, strategy, cycles = _tune_stubborn(task, f"sqlite:///{tmp_path / 's.db'}", trials,
                                           monkeypatch)
    assert res.trials_total == trials and len(set(res.order)) == trials
    assert res.mutated == trials - 2 and res.uniform == 0 and res.duplicates >= trials - 2
    by_key = {s.key: s for s in _measured_schedules(task, tmp_path / "s.db")}
    order = [by_key[k] for k in res.order]
    assert order[0] == space.default() and order[1] == space.sample(random.Random(99))
    for i in range(2, trials):
        assert space.validate(order[i]) == []
        ok = [s for s in order[:i] if cycles[s.key] is not None]
        top = heapq.nsmallest(3, ok, key=lambda s: cycles[s.key])
        assert min(_steps(space, order[i], t) for t in top) <= 3, (i, dict(order[i]))
    # the loop drew its points from its own generator, not the strategy's
    assert strategy.rng.getstate() == random.Random(0).getstate()


def _measured_schedules(task: Any, path: Path) -> list[Any]:
    from pypto.db import open_store

    with open_store(f"sqlite:///{path}") as store:
        return [r.schedule for r in store.records(workload_key=task.workload.key,
                                                  target_key=task.target.key)]


def test_the_mutations_of_a_seeded_run_are_the_same_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    task = _task(128, 256, 128)
    first, _, _ = _tune_stubborn(task, f"sqlite:///{tmp_path / 'a.db'}", 16, monkeypatch)
    second, _, _ = _tune_stubborn(task, f"sqlite:///{tmp_path / 'b.db'}", 16, monkeypatch)
    other, _, _ = _tune_stubborn(task, f"sqlite:///{tmp_path / 'c.db'}", 16, monkeypatch,
                                 seed=1)
    assert first.mutated == 14 and first.order == second.order
    assert other.order != first.order


def test_tpe_through_duplicates_queues_mutations_not_uniform_points(tmp_path: Path) -> None:
    """Real TPE on a small space repeats itself; each repeat brings a mutation, and a
    seeded run is the same twice."""
    from pypto.db import open_store
    from pypto.tuner.loop import tune_task
    from pypto.tuner.options import TuneOptions

    task = _relu_task()
    results = []
    for i in range(2):
        with open_store(f"sqlite:///{tmp_path / f'r{i}.db'}") as store:
            results.append(tune_task(task, store, TuneOptions("tpe", 60, seed=0)))
    first, second = results
    assert first.duplicates > 0 and first.mutated > 0
    assert first.mutated + first.uniform >= first.duplicates - 1   # the last may be unanswered
    assert first.order == second.order and len(set(first.order)) == 60


def test_uniform_only_when_no_unmeasured_point_is_within_reach() -> None:
    """``next_point``: a mutation while an unmeasured point is within 3 steps of the elites;
    a uniform sample (counted as such) once all of those are measured; None once every
    point is."""
    from pypto.tuner.mutation import MAX_STEPS, next_point

    space = _relu_task().space
    elite = space.default()
    reach, ring = {elite.key: elite}, [elite]
    for _ in range(MAX_STEPS):
        ring = [n for s in ring for n in space.neighbors(s) if n.key not in reach]
        reach.update((n.key, n) for n in ring)
    rng = random.Random(0)
    inner = set(reach) - {ring[0].key}           # one point of the last ring left unmeasured
    point = next_point(space, [elite], inner, rng)
    assert point is not None and point.kind == "mutated" and point.schedule.key == ring[0].key
    point = next_point(space, [elite], set(reach), rng)
    assert point is not None and point.kind == "uniform"
    assert point.schedule.key not in reach and space.validate(point.schedule) == []
    everything = {space.sample(random.Random(i)).key for i in range(3000)}
    assert next_point(space, [elite], everything, rng) is None


# -- warm start ------------------------------------------------------------------------------


def _tune(task: Any, store: Any, strategy: str, trials: int, **options: Any) -> Any:
    from pypto.tuner.loop import tune_task
    from pypto.tuner.options import TuneOptions

    return tune_task(task, store, TuneOptions(strategy, trials, seed=0, **options))


def test_warm_start_queues_the_adapted_schedules_of_tuned_neighbours_first(
        tmp_path: Path) -> None:
    """With two tuned shapes nearby, the trials after the default are their best schedules
    adapted to this shape, nearest first, each valid here, without the one the default is
    already; none is measured twice."""
    from pypto.db import open_store
    from pypto.schedule_space.adapt import adapt
    from pypto.tuner.transfer import transferred

    near, far, here = _task(256, 1024, 384), _task(256, 1024, 768), _task(256, 1024, 512)
    with open_store(f"sqlite:///{tmp_path / 'w.db'}") as store:
        for tuned in (near, far):
            _tune(tuned, store, "tpe", 30)
        bests = [store.best(t.workload.key, t.target.key) for t in (near, far)]
        expected = [adapt(here.workload, here.target, b.schedule) for b in bests if b]
        default = here.space.default()
        expected = [s for s in dict.fromkeys(expected) if s is not None and s != default]
        assert expected and transferred(here, store, {default.key}) == expected
        res = _tune(here, store, "tpe", 8)
    assert res.transferred == len(expected)
    assert res.order[1:1 + len(expected)] == [s.key for s in expected]
    assert all(here.space.validate(s) == [] for s in expected)
    assert len(set(res.order)) == len(res.order) == 8


@pytest.mark.parametrize("strategy", ["random", "tpe"])
def test_tuning_with_transfer_is_no_worse_within_a_few_trials(tmp_path: Path,
                                                              strategy: str) -> None:
    """A shape near a tuned one: 4 trials with transfer find a schedule at least as fast as
    4 without (the same seed), and without it nothing is transferred."""
    from pypto.db import open_store

    tuned, here = _task(256, 1024, 384), _task(256, 1024, 512)
    bests = {}
    for transfer in (True, False):
        with open_store(f"sqlite:///{tmp_path / f't{transfer}.db'}") as store:
            _tune(tuned, store, "tpe", 40)
            res = _tune(here, store, strategy, 4, transfer=transfer)
        assert (res.transferred > 0) is transfer
        bests[transfer] = res.best_cycles
    assert bests[True] <= bests[False]


def test_the_cli_turns_transfer_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``pypto tune`` transfers by default; ``--no-transfer`` reaches the options."""
    from typer.testing import CliRunner

    from pypto.cli import app
    from pypto.tuner import cli

    seen: list[bool] = []

    def tune_all(tasks: Any, store: Any, pool: Any, err: Any, options: Any) -> list[Any]:
        seen.append(options.transfer)
        return []

    monkeypatch.setattr(cli, "_tune_all", tune_all)
    script = tmp_path / "g.py"
    script.write_text("import numpy as np, pypto\n\n@pypto.kernel\ndef g(a, b):\n"
                      "    return pypto.matmul(a, b)\n\n"
                      "g(pypto.tensor(np.ones((64, 64)), dtype='float16'),\n"
                      "  pypto.tensor(np.ones((64, 64)), dtype='float16'))\n")
    db = f"sqlite:///{tmp_path / 'c.db'}"
    runner = CliRunner()
    for extra in ([], ["--no-transfer"], ["--transfer"]):
        r = runner.invoke(app, ["tune", str(script), "-n", "3", "--db", db, *extra])
        assert r.exit_code == 0, r.output
    assert seen == [True, False, True]


def test_only_the_first_worker_of_a_pool_queues_the_transferred_schedules() -> None:
    """The workers of ``--workers N`` share one study: one of them queues the transferred
    schedules (the others would queue each again), and ``--no-transfer`` turns it off for all."""
    from pypto.tuner.options import TuneOptions
    from pypto.tuner.workers import Job

    def flags(options: TuneOptions) -> list[bool]:
        return [Job(k, "sqlite://", (), (), options, None, 0).worker_options().transfer
                for k in range(3)]

    assert flags(TuneOptions("tpe", 10)) == [True, False, False]
    assert flags(TuneOptions("tpe", 10, transfer=False)) == [False, False, False]
