"""The command line: through Typer's CliRunner and as a real subprocess."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pypto.cli import app

runner = CliRunner()

SCRIPT = textwrap.dedent("""
    import numpy as np, pypto

    @pypto.kernel
    def mlp(x, w, b):
        return pypto.relu(pypto.matmul(x, w) + b)

    @pypto.kernel
    def norm(x):
        return pypto.softmax(x)

    x = pypto.tensor(np.random.rand(64, 96), dtype="float16")
    w = pypto.tensor(np.random.rand(96, 48), dtype="float16")
    b = pypto.zeros((48,), dtype="float16")
    y = mlp(x, w, b)
    print("checksum", float(norm(y).numpy().sum()))
""")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    p = tmp_path / "model.py"
    p.write_text(SCRIPT)
    return p


def test_targets_lists_both():
    result = runner.invoke(app, ["targets"])
    assert result.exit_code == 0
    assert "ascend910b" in result.output and "ascend310" in result.output


def test_space_shows_axes_and_sizes(script):
    result = runner.invoke(app, ["space", str(script)])
    assert result.exit_code == 0, result.output
    assert "[mlp workload 0] matmul matmul+add+relu" in result.output
    assert "[norm workload 0] vector" in result.output
    assert "valid points" in result.output and "m1" in result.output
    only = runner.invoke(app, ["space", str(script), "--kernel", "norm"])
    assert "mlp" not in only.output.split("checksum")[-1]


def test_asm_parses_back(script):
    from pypto.codegen.asm import parse

    result = runner.invoke(app, ["asm", str(script), "-k", "mlp", "--target", "ascend310"])
    assert result.exit_code == 0, result.output
    text = result.output[result.output.index(".program"):]
    program = parse(text)
    assert program.target == "ascend310" and program.num_instructions > 0


def test_run_profile_writes_pages(script, tmp_path):
    html, trace = tmp_path / "p.html", tmp_path / "t.json"
    result = runner.invoke(app, ["run", str(script), "--profile", "--html", str(html),
                                 "--trace", str(trace)])
    assert result.exit_code == 0, result.output
    assert "compute/copy" in result.output and html.exists() and trace.exists()


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("def broken(:\n", "does not parse"),
    ("raise RuntimeError('boom')\n", "raised RuntimeError: boom"),
    ("x = 1\n", "ran no @pypto.kernel"),
    ("import pypto\n@pypto.kernel\ndef k(a):\n    return a\n", "ran no @pypto.kernel"),
])
def test_bad_files_give_one_line_and_exit_1(tmp_path, content, message):
    path = tmp_path / "bad.py"
    if content is not None:
        path.write_text(content)
    result = runner.invoke(app, ["space", str(path)])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output


def test_unknown_target_and_kernel(script):
    result = runner.invoke(app, ["space", str(script), "--target", "nope"])
    assert result.exit_code == 1 and "unknown target" in result.output.lower()
    result = runner.invoke(app, ["asm", str(script), "--kernel", "nope"])
    assert result.exit_code == 1 and "kernels that ran: mlp, norm" in result.output


def test_real_subprocess(script):
    done = subprocess.run([sys.executable, "-m", "pypto.cli", "space", str(script)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "valid points" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "pypto.cli", "asm", "missing.py"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1
    assert bad.stderr.strip() == "error: missing.py: no such file"
