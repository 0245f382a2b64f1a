"""Every snippet of the programming guide users arrive from runs against PyPTO.

The snippets are embedded here verbatim, in the guide's order (with the guide's
indentation restored), so the test runs on a clean clone; where the guide itself is at
hand (``../shared/notes/GUIDE.md`` next to the repository) a test checks the copies
are still exactly its code blocks. Each snippet runs as written, except:

* the environment snippet (conda and a PyPI install of other packages): not run, see
  ``test_the_environment_snippet_is_not_run``;
* ``...`` placeholders, filled minimally where a snippet is run: the data of the layout
  snippet, the body of ``flexible_op`` (and, as written, calling it is a clear error),
  and ``run_your_model()``, defined to call the guide's ``gemm``;
* the device snippet uses ``np`` without importing it: ``import numpy as np`` goes first;
* the common-errors snippet's "wrong" line raises (that is its point): it is run alone,
  expecting the error, then the rest.

Values are checked against NumPy computed here, errors by type and message.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

import pypto
from pypto.codegen.asm import print_program

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT.parent / "shared" / "notes" / "GUIDE.md"

ENVIRONMENT = """\
conda create -n pypto python=3.8
pip install pypto-core torch==1.12.0
"""
DEVICE = """\
import pypto
ctx = pypto.Context(device_type='npu', device_id=0)
with ctx:
    A = pypto.tensor(np.random.rand(1024,1024), dtype='float16')
    B = pypto.ones((1024,1024), dtype='float16')
"""
GEMM = """\
@pypto.kernel
def gemm(A, B):
    return pypto.matmul(A, B)

profiler = pypto.Profiler()
with profiler:
    C = gemm(A, B)
print(profiler.report())
"""
FUSION = """\
@pypto.kernel(fuse={'conv':'relu'}) # explicitly name the fusion pattern
def conv_relu(x, weight):
    conv = pypto.conv2d(x, weight)
    return pypto.relu(conv)
"""
LAYOUT = """\
A = pypto.tensor(..., layout='NHWC')
"""
COMMON_ERRORS = """\
# wrong: no dtype
A = pypto.tensor([1,2,3])
# right
A = pypto.tensor([1,2,3], dtype='int32')

@pypto.kernel(dynamic_shape=True)
def flexible_op(x):
    ...
"""
PROFILER = """\
with pypto.Profiler() as prof:
    run_your_model()
prof.visualize() # interactive performance report
"""
HYBRID = '''\
@pypto.kernel
def hybrid_compute(x):
    # Python-style part
    y = pypto.relu(x)
    # traditional NPU programming part
    with pypto.raw():
        # NPU assembly written directly
        asm_code = """
        MOV R0, #0x100
        VADD.F32 Q0, Q1, Q2
        """
        pypto.inline_asm(asm_code)
'''
SNIPPETS = [("bash", ENVIRONMENT), ("python", DEVICE), ("python", GEMM), ("python", FUSION),
            ("python", LAYOUT), ("python", COMMON_ERRORS), ("python", PROFILER),
            ("python", HYBRID)]

pytestmark = pytest.mark.filterwarnings("ignore::pypto.ScheduleFallbackWarning")


def run(snippet: str, namespace: dict) -> str:
    """Execute ``snippet`` in ``namespace``; what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(snippet, "<guide snippet>", "exec"), namespace)  # noqa: S102
    return out.getvalue()


def test_the_embedded_snippets_are_the_guides_code_blocks():
    if not GUIDE.exists():
        pytest.skip(f"the guide is not at {GUIDE} (a clean clone): the copies stand alone")
    blocks = re.findall(r"```(\w*)\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)
    assert blocks == SNIPPETS


def test_the_environment_snippet_is_not_run():
    """It creates a conda environment and installs other packages (``pypto-core``,
    ``torch``) from the network; PyPTO installs with ``pip install -e .`` and needs no
    torch. What it would give the guide's readers, ``import pypto``, is what every other
    snippet here starts from."""
    assert "pip install" in ENVIRONMENT and "conda create" in ENVIRONMENT
    assert pypto.__version__


@pytest.fixture(scope="module")
def guide() -> dict:
    """The device snippet (``np`` imported first), then the gemm snippet, as a reader
    runs them one after the other."""
    namespace: dict = {}
    run("import numpy as np\n" + DEVICE, namespace)
    namespace["printed"] = run(GEMM, namespace)
    return namespace


def test_device_setup_and_tensors(guide):
    a, b = guide["A"], guide["B"]
    assert (a.shape, a.dtype.name, b.shape, b.dtype.name) == (
        (1024, 1024), "float16", (1024, 1024), "float16")
    np.testing.assert_array_equal(b.numpy(), np.ones((1024, 1024), np.float16))
    assert guide["ctx"].device_type == "npu" and guide["ctx"].device_id == 0


def test_the_gemm_kernel_and_its_profile(guide):
    a, b, c = guide["A"].numpy(), guide["B"].numpy(), guide["C"].numpy()
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), want, rtol=2e-3)
    [call] = guide["profiler"].calls
    assert call.kernel == "gemm" and call.result.cycles >= call.result.bound_cycles
    assert "gemm" in guide["printed"] and "0: matmul" in guide["printed"]


def _conv_relu_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """NCHW x, KCRS w, stride 1, no padding, by windows (not the NPU's implicit GEMM)."""
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=(2, 3))
    out = np.einsum("nchwrs,kcrs->nkhw", windows, w)
    return np.maximum(out, 0)


def test_the_fusion_hint():
    namespace = {"pypto": pypto}
    run(FUSION, namespace)
    conv_relu = namespace["conv_relu"]
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 16, 8, 8)), rng.standard_normal((32, 16, 3, 3))
    tx, tw = pypto.tensor(x, dtype="float16"), pypto.tensor(w, dtype="float16")
    got = conv_relu(tx, tw).numpy().astype(np.float32)
    want = _conv_relu_reference(tx.numpy().astype(np.float32), tw.numpy().astype(np.float32))
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    fused = [w.ops for w in conv_relu.lower(tx, tw).workloads if w.family == "conv2d"]
    assert fused == [("conv2d_nchw", "relu")]     # the relu rides on the (NCHW) conv


def test_the_layout_snippet():
    """``...`` filled minimally with NHWC data and a dtype (without one it is the
    common error below)."""
    data = np.random.default_rng(1).standard_normal((2, 8, 8, 16))
    namespace = {"pypto": pypto, "data": data}
    run(LAYOUT.replace("...", "data, dtype='float16'"), namespace)
    a = namespace["A"]
    assert a.layout == "NHWC" and a.shape == (2, 8, 8, 16)
    np.testing.assert_array_equal(a.numpy(), data.astype(np.float16))


def test_the_common_errors():
    wrong, right = COMMON_ERRORS.split("# right\n")
    namespace = {"pypto": pypto}
    with pytest.raises(TypeError, match=r"pypto.tensor\(\) needs an explicit dtype, e.g. ") \
            as caught:
        run(wrong, namespace)
    assert isinstance(caught.value, pypto.DTypeError)
    run(right, namespace)
    a = namespace["A"]
    assert a.dtype.name == "int32"
    np.testing.assert_array_equal(a.numpy(), np.array([1, 2, 3], np.int32))
    # as written, flexible_op's body is `...`: calling it says so
    flexible_op = namespace["flexible_op"]
    assert flexible_op.dynamic_shape
    with pytest.raises(pypto.KernelError, match=r"'flexible_op' has an empty body \(`\.\.\.`"):
        flexible_op(pypto.ones((4,), dtype="float32"))
    # the body filled minimally: one kernel for several shapes
    run(right.replace("    ...\n", "    return pypto.relu(x)\n"), namespace)
    for shape in ((3, 5), (7, 2)):
        x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
        got = namespace["flexible_op"](pypto.tensor(x, dtype="float32")).numpy()
        np.testing.assert_array_equal(got, np.maximum(x, 0))


def test_the_profiler_report_snippet(guide, tmp_path, monkeypatch):
    """``run_your_model()`` is the guide's gemm; ``visualize()`` with no path writes
    ``pypto_profile.html`` in the working directory and returns its path."""
    monkeypatch.chdir(tmp_path)
    namespace = dict(guide)
    namespace["run_your_model"] = lambda: namespace["gemm"](namespace["A"], namespace["B"])
    run(PROFILER, namespace)
    prof = namespace["prof"]
    assert len(prof.calls) == 1 and prof.calls[0].kernel == "gemm"
    path = prof.visualize()
    assert path.resolve() == (tmp_path / "pypto_profile.html").resolve()
    assert path.read_text(encoding="utf-8").lstrip().lower().startswith("<!doctype html>")


def test_the_hybrid_mode_snippet():
    namespace = {"pypto": pypto}
    run(HYBRID, namespace)
    hybrid_compute = namespace["hybrid_compute"]
    x = pypto.tensor(np.random.default_rng(3).standard_normal((64, 64)), dtype="float32")
    with pypto.Profiler() as prof:
        assert hybrid_compute(x) is None      # the guide's kernel returns nothing
    [call] = prof.calls
    assert call.sources == ["raw"] and call.workloads[0].ops == ("inline_asm",)
    program = hybrid_compute.lower(x).programs[0]
    assert print_program(program).splitlines()[-2:] == [
        "    MOV R0, #256", "    VADD.F32 Q0, Q1, Q2"]
