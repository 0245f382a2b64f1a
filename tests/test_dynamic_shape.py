"""``@pypto.kernel(dynamic_shape=True)`` (issue 16): one kernel serves many shapes, its
compiled variants kept per shape bucket (powers of two, or ``buckets=``), each variant's
schedules from the nearest tuned shape within its bucket; ``pypto tune --shapes`` tunes
one shape per bucket besides those the script ran. A static kernel re-traces for a new
shape and says so at debug level."""

from __future__ import annotations

import json
import logging
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import pypto
from pypto.cli import app
from pypto.compile import resolver as lookup
from pypto.compile.buckets import Buckets
from pypto.db import Record, open_store
from pypto.errors import ScheduleFallbackWarning
from pypto.frontend import kernel as kernel_module
from pypto.schedule_space import space_for
from pypto.schedule_space.adapt import adapt

F32 = "float32"
runner = CliRunner()


@pytest.fixture(autouse=True)
def fresh_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYPTO_DB", str(tmp_path / "kernels.db"))
    lookup.reset()
    yield
    lookup.reset()


def x_of(rows: int, cols: int = 40) -> pypto.Tensor:
    return pypto.tensor(np.random.default_rng(rows).standard_normal((rows, cols)), dtype=F32)


# -- buckets --------------------------------------------------------------------------------


@given(st.integers(1, 10**6))
def test_a_size_lies_in_its_power_of_two_bucket(size):
    lo, hi = Buckets().bucket(size)
    assert lo < size <= hi and (hi & (hi - 1)) == 0 and (hi == 1 or lo == hi // 2)


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=6, unique=True).map(sorted),
       st.integers(1, 20000))
def test_given_bounds_make_the_buckets(bounds, size):
    b = Buckets.from_option(bounds)
    lo, hi = b.bucket(size)
    assert lo < size <= hi
    if size <= bounds[-1]:
        assert hi in bounds and (lo == 0 or lo in bounds)


@settings(suppress_health_check=[HealthCheck.filter_too_much])
@given(st.integers(1, 5000), st.integers(1, 5000), st.booleans())
def test_representatives_are_one_size_per_bucket_within_the_range(lo, hi, given_bounds):
    if lo > hi:
        lo, hi = hi, lo
    b = Buckets((3, 10, 100, 1000)) if given_bounds else Buckets()
    reps = b.representatives(lo, hi)
    assert reps == sorted(set(reps)) and reps[-1] == hi and lo <= reps[0]
    keys = [b.bucket(r) for r in reps]
    assert len(set(keys)) == len(keys)                       # one per bucket
    assert {b.bucket(s) for s in range(lo, hi + 1, max(1, (hi - lo) // 50))} <= set(keys)


@pytest.mark.parametrize("bad", [[], [0, 4], [8, 4], "64", [2.5], 7])
def test_bad_buckets_are_a_kernel_error(bad):
    with pytest.raises(pypto.KernelError, match="buckets="):
        pypto.kernel(dynamic_shape=True, buckets=bad)(lambda x: x)


def test_buckets_need_dynamic_shape():
    with pytest.raises(pypto.KernelError, match="dynamic_shape=True"):
        pypto.kernel(buckets=[64])(lambda x: x)


# -- the kernel cache --------------------------------------------------------------------------


def test_a_static_kernel_retraces_a_new_shape_and_says_so(caplog):
    traced = []

    @pypto.kernel
    def scale(x):
        traced.append(x.shape)
        return x * 2.0

    with caplog.at_level(logging.DEBUG, logger="pypto"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ScheduleFallbackWarning)
        for rows in (8, 8, 9):
            np.testing.assert_allclose(scale(x_of(rows)).numpy(), x_of(rows).numpy() * 2)
    assert traced == [(8, 40), (9, 40)]
    lines = [r.getMessage() for r in caplog.records if r.name == "pypto"]
    assert any("first input signature float32[8, 40]" in m for m in lines)
    assert any("new input signature float32[9, 40]" in m and "tracing again" in m
               and "dynamic_shape=True" in m for m in lines)


def test_a_dynamic_kernel_keeps_its_variants_per_bucket(caplog, monkeypatch):
    monkeypatch.setattr(kernel_module, "VARIANTS_PER_BUCKET", 2)

    @pypto.kernel(dynamic_shape=True)
    def shift(x):
        return pypto.relu(x - 0.5)

    with caplog.at_level(logging.DEBUG, logger="pypto"), warnings.catch_warnings():
        warnings.simplefilter("ignore", ScheduleFallbackWarning)
        for rows in (65, 100, 65, 128, 129, 300):
            y = shift(x_of(rows))
            np.testing.assert_allclose(y.numpy(), np.maximum(x_of(rows).numpy() - 0.5, 0),
                                       rtol=1e-6)
    kept = {bucket[0][1]: [sig[0][1][0] for sig in variants]
            for (bucket, _), variants in shift._variants.items()}
    # (64, 128] keeps its 2 most recently used (65, used again, outlives 100); 129 and
    # 300 open buckets (128, 256] and (256, 512]
    assert kept == {(128, 64): [65, 128], (256, 64): [129], (512, 64): [300]}
    lines = [r.getMessage() for r in caplog.records if "(dynamic)" in r.getMessage()]
    assert len(lines) == 5          # 65 was kept: no trace the second time
    assert "bucket float32[<=128, <=64] of powers of two" in lines[0]


def test_user_buckets_group_the_shapes():
    k = pypto.kernel(dynamic_shape=True, buckets=[16, 1000])(lambda x: x + 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScheduleFallbackWarning)
        for rows in (17, 500, 999):
            k.lower(pypto.spec((rows, 40), F32))
    assert [bucket[0][1] for bucket, _ in k._variants] == [(1000, 1000)]


# -- nothing returned ------------------------------------------------------------------------


def test_the_guide_dynamic_snippet_is_a_kernel_that_says_its_body_is_empty():
    """The guide's ``def flexible_op(x): ...`` decorates as written; calling it says
    what is missing (a kernel that computes nothing and runs no raw block is a mistake,
    not a no-op)."""
    @pypto.kernel(dynamic_shape=True)
    def flexible_op(x):
        ...

    assert flexible_op.dynamic_shape
    for device in ("npu", "cpu"):
        with pypto.Context(device_type=device), pytest.raises(
                pypto.KernelError, match="has an empty body"):
            flexible_op(x_of(3))

    @pypto.kernel
    def explicit(x):
        return ...

    with pytest.raises(pypto.KernelError, match=r"returned Ellipsis and runs no raw block"):
        explicit(x_of(3))


def test_returning_something_else_still_names_what_a_kernel_returns():
    with pytest.raises(pypto.KernelError, match="or nothing"):
        pypto.kernel(lambda x: 3)(x_of(3))


# -- the lookup within the bucket --------------------------------------------------------------


def _tuned(rows: int, cores: int) -> Record:
    """A record for the relu chain at ``rows`` rows whose schedule uses ``cores``."""
    compiled = pypto.kernel(lambda x: pypto.relu(x)).lower(pypto.spec((rows, 1024), F32))
    wl, target = compiled.workloads[0], compiled.target
    s = compiled.schedules[0].replace(cores=cores, tile_rows=1)
    assert not space_for(wl, target).validate(s)
    record = Record.measured(wl, target, s, cycles=compiled.with_schedule(0, s).simulate().cycles)
    with open_store() as store:
        store.add(wl, target, [record])
    return record


def test_the_lookup_takes_the_nearest_tuned_shape_within_the_bucket(caplog):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScheduleFallbackWarning)
        _tuned(64, 4)      # closer to 65 on a log scale, but in bucket (32, 64]
        in_bucket = _tuned(128, 8)
    spec = pypto.spec((65, 1024), F32)
    with warnings.catch_warnings(record=True) as caught, \
            caplog.at_level(logging.DEBUG, logger="pypto"):
        warnings.simplefilter("always")
        dynamic = pypto.kernel(dynamic_shape=True)(lambda x: pypto.relu(x)).lower(spec)
    assert dynamic.sources == ["nearest"]
    wl, target = dynamic.workloads[0], dynamic.target
    assert dynamic.schedules[0] == adapt(wl, target, in_bucket.schedule)
    assert dynamic.schedules[0]["cores"] == 8
    assert [w for w in caught if issubclass(w.category, ScheduleFallbackWarning)] == []
    assert any("in the same bucket" in r.getMessage() for r in caplog.records)
    # a static kernel takes the nearest shape of all, and warns
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        static = pypto.kernel(lambda x: pypto.relu(x)).lower(spec)
    assert static.sources == ["nearest"] and static.schedules[0]["cores"] == 4
    assert any("nearest shape" in str(w.message) for w in caught)


def test_outside_any_tuned_bucket_the_chain_goes_on_and_warns_once_per_bucket():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScheduleFallbackWarning)
        _tuned(128, 8)
    k = pypto.kernel(dynamic_shape=True)(lambda x: pypto.relu(x))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sources = [k.lower(pypto.spec((rows, 1024), F32)).sources[0] for rows in (300, 400)]
    assert sources == ["nearest", "nearest"]             # the nearest of all, adapted
    assert len([w for w in caught if issubclass(w.category, ScheduleFallbackWarning)]) == 1


# -- pypto tune --shapes ----------------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    import numpy as np, pypto

    @pypto.kernel(dynamic_shape=True)
    def rowwise(x, w):
        return pypto.relu(x * w)

    @pypto.kernel
    def fixed(x):
        return x + 1.0

    rowwise(pypto.tensor(np.ones((100, 256)), dtype="float32"),
            pypto.tensor(np.ones((256,)), dtype="float32"))
    fixed(pypto.tensor(np.ones((8, 8)), dtype="float32"))
""")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    p = tmp_path / "dyn.py"
    p.write_text(SCRIPT)
    return p


def _tuned_rows(url: str) -> list[tuple[int, ...]]:
    """The first input shape of every workload the database holds."""
    with open_store(url) as store:
        return sorted({tuple(json.loads(w.spec)["inputs"][0]["shape"])
                       for w in store.workloads()})


def test_tune_shapes_tunes_one_shape_per_bucket_besides_the_scripts(script, tmp_path,
                                                                      recwarn):
    url = f"sqlite:///{tmp_path / 'dyn.db'}"
    r = runner.invoke(app, ["tune", str(script), "--trials", "1", "--strategy", "random",
                            "--db", url, "--shapes", "rowwise:x.0=1..300"],
                      env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert _tuned_rows(url) == sorted([(8, 8), (100, 256)] + [(n, 256) for n in (
        1, 2, 4, 8, 16, 32, 64, 128, 256, 300)])
    # each shape's task is told apart by its shapes; a kernel run with one shape is not
    assert "rowwise[0] x=100x256 w=256" in r.output and "rowwise[0] x=16x256 w=256" in r.output
    assert "fixed[0] x=" not in r.output and "fixed[0]" in r.output
    # the shapes about to be tuned are not reported as lacking a tuned schedule
    assert not [w for w in recwarn if issubclass(w.category, ScheduleFallbackWarning)]


def test_tune_shapes_with_sizes_and_dims_that_go_together(script, tmp_path):
    url = f"sqlite:///{tmp_path / 'dyn.db'}"
    r = runner.invoke(app, ["tune", str(script), "--trials", "1", "--strategy", "random",
                            "--db", url, "--shapes", "x.1,w.0=64,512", "--shapes", "0.0=16"])
    assert r.exit_code == 0, r.output
    assert _tuned_rows(url) == sorted([(8, 8), (100, 256), (16, 64), (16, 512)])


@pytest.mark.parametrize("option, message", [
    ("x=1..4", "is not ARG.DIM"),
    ("x.0=4..1", "1 <= LO <= HI"),
    ("x.0=a,b", "positive ints"),
    ("y.0=1..8", "applies to no dynamic kernel"),
    ("fixed:x.0=1..8", "the script ran; kernels that ran: fixed(x) static, rowwise(x, w)"),
    ("x.5=1..8", "has 2 dim(s), no dim 5"),
    ("x.1=1..8", "does not compile for argument shapes"),
    (["x.0=1..100000", "x.1,w.0=1..100000"], "at most 256"),
])
def test_bad_shapes_options_are_one_line_errors(script, tmp_path, option, message):
    url = f"sqlite:///{tmp_path / 'dyn.db'}"
    options = [a for o in ([option] if isinstance(option, str) else option)
               for a in ("--shapes", o)]
    r = runner.invoke(app, ["tune", str(script), "--trials", "1", "--db", url, *options])
    assert r.exit_code == 1
    assert message in r.output and "Traceback" not in r.output


def test_tune_help_documents_the_shapes_syntax():
    r = runner.invoke(app, ["tune", "--help"], env={"COLUMNS": "200"})
    assert "--shapes" in r.output and "ARG.DIM=LO..HI" in r.output
