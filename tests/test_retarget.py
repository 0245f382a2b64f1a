"""``--target`` compiles what the kernel itself would compile on that target: its own
options (``fuse=``, ``schedule=``) are kept (``Compiled.retarget``), so the records
``pypto tune --target`` writes are the ones a later compile on that target finds."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pypto
from pypto.cli import app
from pypto.targets import load_target

runner = CliRunner()

UNFUSED = textwrap.dedent("""
    import numpy as np, pypto

    @pypto.kernel(fuse=False)
    def mm_relu(a, b):
        return pypto.relu(pypto.matmul(a, b))

    mm_relu(pypto.tensor(np.ones((64, 96)), dtype="float16"),
            pypto.tensor(np.ones((96, 80)), dtype="float16"))
""")
SPECS = (pypto.spec((64, 96), "float16"), pypto.spec((96, 80), "float16"))


def _unfused() -> pypto.Kernel:
    return pypto.kernel(lambda a, b: pypto.relu(pypto.matmul(a, b)), fuse=False)


def _lower(kernel: pypto.Kernel, target: str):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return kernel.lower(*SPECS, target=target)


def test_retarget_keeps_the_kernels_own_options():
    on_910b = _lower(_unfused(), "ascend910b")
    assert [wl.family for wl in on_910b.workloads] == ["matmul", "vector"]
    moved = on_910b.retarget(load_target("ascend310"))
    direct = _lower(_unfused(), "ascend310")
    assert moved.target.name == "ascend310"
    assert [wl.key for wl in moved.workloads] == [wl.key for wl in direct.workloads]
    assert moved.asm() == direct.asm()
    fused = _lower(pypto.kernel(lambda a, b: pypto.relu(pypto.matmul(a, b))), "ascend910b")
    assert len(fused.retarget(load_target("ascend310")).workloads) == 1


def test_retarget_keeps_an_explicit_schedule():
    x = pypto.spec((64, 96), "float16")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        small = pypto.kernel(lambda a: pypto.relu(a)).lower(x, target="ascend310")
        explicit = pypto.kernel(lambda a: pypto.relu(a), schedule=dict(small.schedules[0]))
        moved = explicit.lower(x, target="ascend910b").retarget(load_target("ascend310"))
    assert moved.sources == ["explicit"]
    assert dict(moved.schedules[0]) == dict(small.schedules[0])


def test_tune_with_target_tunes_what_a_later_compile_finds(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    from pypto.compile import resolver

    script = tmp_path / "unfused.py"
    script.write_text(UNFUSED)
    url = f"sqlite:///{tmp_path / 'retarget.db'}"
    r = runner.invoke(app, ["tune", str(script), "--target", "ascend310", "--trials", "2",
                            "--strategy", "random", "--seed", "0", "--db", url])
    assert r.exit_code == 0, r.output
    assert "mm_relu[0]" in r.output and "mm_relu[1]" in r.output
    monkeypatch.setenv("PYPTO_DB", url)
    resolver.reset()
    try:
        later = _lower(_unfused(), "ascend310")
        assert later.sources == ["tuned", "tuned"]
        assert _lower(_unfused(), "ascend910b").sources == ["default", "default"]
    finally:
        resolver.reset()
