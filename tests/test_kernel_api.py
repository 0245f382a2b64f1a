"""The kernel and inspection API (DESIGN §12) and the guide's snippets (notes/GUIDE.md).

Every numeric check compares the simulated NPU with an independent NumPy computation or
with the CPU reference (``device_type='cpu'``); every structural check (workload count,
sources, schedules, assembly) would fail if the compile path took a different branch.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import pypto
from pypto.codegen import asm as pto_asm
from pypto.frontend.kernel import Kernel
from pypto.schedule_space import Schedule, validate
from pypto.targets import load_target

F16, F32 = "float16", "float32"


def f32(x: pypto.Tensor | np.ndarray) -> np.ndarray:
    return np.asarray(x.numpy() if isinstance(x, pypto.Tensor) else x, dtype=np.float64)


def close(got: pypto.Tensor, want: np.ndarray | pypto.Tensor, tol: float = 1e-4) -> None:
    want_arr = f32(want)
    assert got.shape == want_arr.shape, (got.shape, want_arr.shape)
    np.testing.assert_allclose(f32(got), want_arr, rtol=tol, atol=tol)


def on_cpu(kern: Kernel, *args: object) -> object:
    with pypto.Context(device_type="cpu"):
        return kern(*args)


def mm_bias_relu(a, b, c):
    return pypto.relu(pypto.matmul(a, b) + c)


def asm_sections(text: str) -> list[str]:
    """``Compiled.asm()`` split into one block per workload (each with its header)."""
    return [s for s in re.split(r"(?m)^(?=; workload \d+:)", text) if s.strip()]


@pytest.fixture(scope="module")
def abc() -> tuple[pypto.Tensor, pypto.Tensor, pypto.Tensor]:
    a = pypto.rand((32, 48), F16, seed=1) - 0.5
    b = pypto.rand((48, 64), F16, seed=2) - 0.5
    c = pypto.rand((32, 64), F16, seed=3) - 0.5
    return a, b, c


# -- lower(), specs and the Compiled fields -------------------------------------------------


def test_lower_with_specs_equals_lower_with_tensors(abc) -> None:
    k = pypto.kernel(mm_bias_relu)
    by_spec = k.lower(pypto.spec((32, 48), F16), pypto.spec((48, 64), "fp16"),
                      pypto.spec([32, 64], pypto.float16))
    by_tensor = k.lower(*abc)
    # Same signature (shape, dtype, layout): the same compiled object, no second trace.
    assert by_tensor is by_spec
    assert [w.key for w in by_spec.workloads] == [w.key for w in by_tensor.workloads]
    assert by_spec.target == load_target("ascend910b")        # the default context target


def test_lower_spec_layout_reaches_the_workload() -> None:
    k = pypto.kernel(lambda x: pypto.relu(x))
    nd = k.lower(pypto.spec((1, 4, 4, 16), F16))
    nhwc = k.lower(pypto.spec((1, 4, 4, 16), F16, layout="NHWC"))
    assert nd is not nhwc
    assert nd.workloads[0].inputs[0].layout == "ND"
    assert nhwc.workloads[0].inputs[0].layout == "NHWC"
    assert nd.workloads[0].key != nhwc.workloads[0].key


def test_compiled_fields_line_up_and_defaults_are_valid(abc) -> None:
    c = pypto.kernel(fuse=False)(mm_bias_relu).lower(*abc)
    n = len(c.workloads)
    assert n == 3
    assert len(c.schedules) == len(c.sources) == len(c.programs) == n
    assert c.sources == ["default"] * n
    assert [w.family for w in c.workloads] == ["matmul", "vector", "vector"]
    for wl, sched in zip(c.workloads, c.schedules):
        assert isinstance(sched, Schedule)
        assert validate(wl, sched, c.target) == []


def test_asm_contains_the_instructions_and_parses_back_per_program(abc) -> None:
    c = pypto.kernel(fuse=False)(mm_bias_relu).lower(*abc)
    text = c.asm()
    for word in ("MMAD", "COPY", "SET_FLAG", "WAIT_FLAG", "VADD", "VRELU"):
        assert word in text, word
    sections = asm_sections(text)
    assert len(sections) == len(c.programs)
    for i, (section, program, wl) in enumerate(zip(sections, c.programs, c.workloads)):
        assert section.startswith(f"; workload {i}:")
        assert wl.key in section
        assert c.schedules[i].to_json() in section
        assert pto_asm.parse(section) == program
        assert pto_asm.parse(program.asm()) == program
    # Only the matmul workload runs on the cube.
    assert "MMAD" in sections[0] and "MMAD" not in sections[1] + sections[2]


def test_vector_only_kernel_has_no_cube_instructions() -> None:
    c = pypto.kernel(lambda x: pypto.exp(x) * 2.0).lower(pypto.spec((16, 64), F32))
    text = c.asm()
    assert "MMAD" not in text
    assert "VEXP" in text and "COPY" in text


def test_compiled_call_matches_cpu_and_numpy(abc) -> None:
    k = pypto.kernel(mm_bias_relu)
    compiled = k.lower(*abc)
    got = compiled(*abc)
    a, b, c = (f32(t) for t in abc)
    close(got, np.maximum(a @ b + c, 0), tol=2e-2)
    close(got, on_cpu(k, *abc), tol=2e-3)
    close(got, compiled.run_reference(*abc), tol=2e-3)
    assert got.dtype == pypto.float16


# -- schedules ---------------------------------------------------------------------------


def test_with_schedule_gives_a_new_explicit_compiled(abc) -> None:
    a, b, _ = abc
    k = pypto.kernel(lambda x, y: pypto.matmul(x, y))
    base = k.lower(a, b)
    base_program = base.programs[0]
    new_sched = {**base.schedules[0], "m1": 16, "n1": 16, "k1": 16, "k0": 16, "cores": 2}
    assert new_sched != dict(base.schedules[0])
    other = base.with_schedule(0, new_sched)
    assert other is not base
    assert other.sources == ["explicit"] and base.sources == ["default"]
    assert other.schedules[0] == Schedule(new_sched)
    assert other.programs[0] != base_program
    assert base.programs[0] == base_program                    # the original is unchanged
    assert other.asm() != base.asm()
    assert other.workloads[0].key == base.workloads[0].key     # same workload
    close(other(a, b), base(a, b), tol=1e-3)
    close(other(a, b), f32(a) @ f32(b), tol=2e-2)
    # A Schedule object is accepted as well as a dict.
    again = base.with_schedule(0, Schedule(new_sched))
    assert again.programs[0] == other.programs[0]


def test_with_schedule_only_touches_the_chosen_workload(abc) -> None:
    c = pypto.kernel(fuse=False)(mm_bias_relu).lower(*abc)
    vec = dict(c.schedules[1])
    vec["depth"] = 1 if vec["depth"] != 1 else 2
    other = c.with_schedule(1, vec)
    assert other.sources == ["default", "explicit", "default"]
    assert other.programs[0] == c.programs[0] and other.programs[2] == c.programs[2]
    close(other(*abc), c(*abc), tol=1e-3)


@pytest.mark.parametrize("knob, value", [("m1", 24), ("k0", 8), ("l1_depth", 9),
                                         ("cores", 10_000)])
def test_invalid_schedule_raises_schedule_error_naming_the_knob(abc, knob, value) -> None:
    a, b, _ = abc
    base = pypto.kernel(lambda x, y: pypto.matmul(x, y)).lower(a, b)
    bad = {**base.schedules[0], knob: value}
    with pytest.raises(pypto.ScheduleError, match=knob):
        base.with_schedule(0, bad)


def test_kernel_schedule_option_is_used_as_explicit(abc) -> None:
    a, b, c = abc
    sched = {"m1": 32, "n1": 32, "k1": 16, "k0": 16, "l1_depth": 1, "l0_depth": 2,
             "l0c_depth": 1, "ub_depth": 2, "cores": 2}
    k = pypto.kernel(schedule=sched)(lambda x, y: pypto.matmul(x, y))
    compiled = k.lower(a, b)
    assert compiled.sources == ["explicit"]
    # knobs the schedule left out get their neutral values
    assert dict(compiled.schedules[0]) == {**sched, "block_order": "mn", "swizzle": 1,
                                           "epilogue": "VEC", "split_k": 1, "m0_parts": 1,
                                           "n0_parts": 1, "l0_order": "mn", "a_layout": "ND",
                                           "b_layout": "ND"}
    default = pypto.kernel(lambda x, y: pypto.matmul(x, y)).lower(a, b)
    assert compiled.programs[0] != default.programs[0]
    close(k(a, b), f32(a) @ f32(b), tol=2e-2)
    # A list gives one entry (or None) per workload.
    k3 = pypto.kernel(fuse=False, schedule=[sched, None, None])(mm_bias_relu)
    c3 = k3.lower(a, b, c)
    assert c3.sources == ["explicit", "default", "default"]
    close(k3(a, b, c), np.maximum(f32(a) @ f32(b) + f32(c), 0), tol=2e-2)


# -- tracing and caching -----------------------------------------------------------------


def test_same_signature_does_not_retrace_and_new_shape_does() -> None:
    calls = []

    @pypto.kernel
    def scaled(x, s):
        calls.append(x.shape)
        return x * s

    x8 = pypto.rand((8, 32), F32, seed=0)
    for _ in range(3):
        close(scaled(x8, 2.0), f32(x8) * 2)
    assert len(calls) == 1
    scaled.lower(pypto.spec((8, 32), F32), 2.0)                 # a spec: same signature
    assert len(calls) == 1
    scaled(pypto.rand((8, 32), F32, seed=5), 2.0)               # new data, same signature
    assert len(calls) == 1
    close(scaled(pypto.rand((16, 32), F32, seed=1), 2.0),
          f32(pypto.rand((16, 32), F32, seed=1)) * 2)           # new shape
    assert len(calls) == 2
    scaled(x8.astype(F16), 2.0)                                 # new dtype
    assert len(calls) == 3
    close(scaled(x8, 3.0), f32(x8) * 3)                         # new constant argument
    assert len(calls) == 4
    scaled.lower(x8, 2.0, target="ascend310")                   # new target
    assert len(calls) == 5
    scaled(x8, 2.0)
    assert len(calls) == 5


def test_bare_and_configured_decorators() -> None:
    @pypto.kernel
    def bare(x):
        return pypto.relu(x)

    @pypto.kernel(fuse={"matmul": "relu"}, dynamic_shape=True, target="ascend310")
    def configured(x, w):
        return pypto.relu(pypto.matmul(x, w))

    assert isinstance(bare, Kernel) and isinstance(configured, Kernel)
    assert bare.name == "bare" and bare.__name__ == "bare"
    assert configured.dynamic_shape is True and bare.dynamic_shape is False
    x = pypto.rand((16, 32), F16, seed=4) - 0.5
    w = pypto.rand((32, 16), F16, seed=5) - 0.5
    with pypto.Context(target="ascend910b"):
        # The decorator's target wins over the context's.
        assert configured.lower(x, w).target.name == "ascend310"
        close(configured(x, w), np.maximum(f32(x) @ f32(w), 0), tol=2e-2)
        assert bare.lower(x).target.name == "ascend910b"
    assert configured.lower(x, w, target="ascend910b").target.name == "ascend910b"
    close(bare(x), np.maximum(f32(x), 0))


# -- fusion ------------------------------------------------------------------------------


def test_default_fuses_relu_of_matmul_plus_bias_into_one_matmul_workload(abc) -> None:
    fused = pypto.kernel(mm_bias_relu).lower(*abc)
    unfused = pypto.kernel(fuse=False)(mm_bias_relu).lower(*abc)
    assert len(fused.workloads) == 1
    assert fused.workloads[0].family == "matmul"
    assert fused.workloads[0].ops == ("matmul", "add", "relu")
    assert len(unfused.workloads) > len(fused.workloads)
    assert [w.ops for w in unfused.workloads] == [("matmul",), ("add",), ("relu",)]
    close(fused(*abc), unfused(*abc), tol=2e-3)


def test_fuse_dict_names_the_producers_that_take_tails(abc) -> None:
    a, b, c = abc
    mm_relu = pypto.kernel(fuse={"matmul": "relu"})(lambda x, y: pypto.relu(x @ y))
    compiled = mm_relu.lower(a, b)
    assert [w.ops for w in compiled.workloads] == [("matmul", "relu")]
    close(mm_relu(a, b), np.maximum(f32(a) @ f32(b), 0), tol=2e-2)
    gemm_list = pypto.kernel(fuse={"gemm": ["add", "relu"]})(mm_bias_relu)
    assert [w.ops for w in gemm_list.lower(a, b, c).workloads] == [("matmul", "add", "relu")]
    # A conv-only pattern does not let the matmul take the tail, and it names a fusion
    # this kernel cannot make: an error naming the ops.
    conv_only = pypto.kernel(fuse={"conv": "relu"})(lambda x, y: pypto.relu(x @ y))
    with pytest.raises(pypto.KernelError, match="relu into conv2d.*has no conv2d"):
        conv_only.lower(a, b)


@pytest.mark.parametrize("fuse", [{"softmax": "relu"}, {"matmul": "softmax"}, "yes", 3])
def test_bad_fuse_option_is_a_kernel_error(fuse) -> None:
    with pytest.raises(pypto.KernelError, match="fuse"):
        pypto.kernel(fuse=fuse)(mm_bias_relu)


# -- outputs, nesting, devices -----------------------------------------------------------


@pytest.mark.parametrize("container", [tuple, list])
def test_kernels_return_tuples_and_lists(container) -> None:
    @pypto.kernel
    def two(x, y):
        return container((x + y, pypto.exp(x) * 0.5))

    x = pypto.rand((8, 32), F32, seed=1)
    y = pypto.rand((8, 32), F32, seed=2)
    for out in (two(x, y), on_cpu(two, x, y)):
        assert type(out) is container and len(out) == 2
        close(out[0], f32(x) + f32(y))
        close(out[1], np.exp(f32(x)) * 0.5)


def test_kernel_returning_an_input_and_a_result() -> None:
    k = pypto.kernel(lambda x: (x, x.T + 1.0))
    x = pypto.rand((8, 16), F32, seed=3)
    same, t = k(x)
    assert np.array_equal(same.numpy(), x.numpy())
    close(t, f32(x).T + 1)


def test_nested_kernel_call_is_inlined() -> None:
    inner_calls = []

    @pypto.kernel
    def inner(x):
        inner_calls.append(1)
        return pypto.relu(x)

    @pypto.kernel
    def outer(x, y):
        return inner(x) + y

    x = pypto.rand((16, 32), F32, seed=6) - 0.5
    y = pypto.rand((16, 32), F32, seed=7)
    compiled = outer.lower(x, y)
    # Inlined: one fused vector workload, and inner was never compiled on its own.
    assert [w.ops for w in compiled.workloads] == [("relu", "add")]
    assert inner._cache == {}
    assert len(inner_calls) == 1
    close(outer(x, y), np.maximum(f32(x), 0) + f32(y))
    assert len(inner_calls) == 1


def test_cpu_context_gives_the_numpy_reference() -> None:
    k = pypto.kernel(lambda x, y: pypto.softmax(x @ y, axis=-1))
    x = pypto.rand((8, 16), F32, seed=8)
    y = pypto.rand((16, 24), F32, seed=9)
    logits = f32(x) @ f32(y)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    ref = e / e.sum(axis=-1, keepdims=True)
    cpu = on_cpu(k, x, y)
    assert isinstance(cpu, pypto.Tensor) and cpu.dtype == pypto.float32
    close(cpu, ref, tol=1e-5)
    assert k._cache == {}                                       # the CPU path compiles nothing
    close(k(x, y), cpu, tol=1e-4)                               # and the NPU agrees


# -- eager ops outside a kernel (run on the simulated NPU) -------------------------------

_A = pypto.rand((8, 16), F32, seed=11)
_B = pypto.rand((16, 8), F32, seed=12)
_V = pypto.rand((16,), F32, seed=13)
_a, _b, _v = _A.numpy(), _B.numpy(), _V.numpy()

EAGER = [
    ("A + B.T", lambda: _A + _B.T, _a + _b.T),
    ("A - 1", lambda: _A - 1, _a - 1),
    ("2 * A", lambda: 2 * _A, 2 * _a),
    ("A / 4", lambda: _A / 4, _a / 4),
    ("A + V", lambda: _A + _V, _a + _v),
    ("np.dot", lambda: np.dot(_A, _B), _a @ _b),
    ("A @ B", lambda: _A @ _B, _a @ _b),
    ("A @ V", lambda: _A @ _V, _a @ _v),
    ("np.matmul", lambda: np.matmul(_A, _B), _a @ _b),
    ("np.add", lambda: np.add(_A, _A), _a + _a),
    ("np.maximum", lambda: np.maximum(_A, 0.5), np.maximum(_a, 0.5)),
    ("np.exp", lambda: np.exp(_A), np.exp(_a)),
    ("A.T", lambda: _A.T, _a.T),
    ("slice", lambda: _A[1:5, ::3], _a[1:5, ::3]),
    ("int index", lambda: _A[2], _a[2]),
    ("sum axis 0", lambda: _A.sum(axis=0), _a.sum(axis=0)),
    ("max axis 1 keepdims", lambda: _A.max(axis=1, keepdims=True), _a.max(axis=1, keepdims=True)),
    ("np.mean", lambda: np.mean(_A, axis=1), _a.mean(axis=1)),
    ("reshape", lambda: _A.reshape(4, 32), _a.reshape(4, 32)),
    ("-A", lambda: -_A, -_a),
    ("abs", lambda: abs(_A - 0.5), np.abs(_a - 0.5)),
]


@pytest.mark.parametrize("name, fn, want", EAGER, ids=[e[0] for e in EAGER])
def test_eager_ops_return_correct_concrete_tensors(name, fn, want) -> None:
    got = fn()
    assert isinstance(got, pypto.Tensor) and not got.is_symbolic
    assert got.dtype == pypto.float32
    close(got, want, tol=1e-4)


def test_eager_fp16_matmul_returns_fp16() -> None:
    a = pypto.rand((16, 32), F16, seed=1)
    b = pypto.rand((32, 16), F16, seed=2)
    c = np.dot(a, b)
    assert c.dtype == pypto.float16 and c.shape == (16, 16)
    close(c, f32(a) @ f32(b), tol=2e-2)


@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_full_reduction_returns_a_0d_tensor(device) -> None:
    with pypto.Context(device_type=device):
        total = _A.sum()
        dot = np.dot(_V, _V)
    assert total.shape == () and dot.shape == ()
    close(total, _a.sum())
    close(dot, np.dot(_v, _v))


def test_tensor_of_a_scalar_is_0d() -> None:
    assert pypto.tensor(3.0, dtype=F32).shape == ()
    assert pypto.full((), 2.0, dtype=F32).shape == ()


# -- dead code -----------------------------------------------------------------------------


def test_unused_matmul_in_a_kernel_compiles() -> None:
    @pypto.kernel
    def with_dead_matmul(p, q):
        _unused = p @ q.T
        return pypto.relu(p + q)

    p = pypto.rand((16, 32), F32, seed=1)
    q = pypto.rand((16, 32), F32, seed=2)
    close(with_dead_matmul(p, q), np.maximum(f32(p) + f32(q), 0))


def test_unused_values_make_no_workload() -> None:
    @pypto.kernel
    def with_dead_code(x, y):
        _unused = pypto.exp(y) * 3.0
        return pypto.relu(x + y)

    compiled = with_dead_code.lower(pypto.spec((16, 32), F32), pypto.spec((16, 32), F32))
    assert all(w.outputs for w in compiled.workloads)
    assert len(compiled.workloads) == 1


# -- the guide's snippets, as written --------------------------------------------------------


def test_guide_device_setup_tensors_and_gemm() -> None:
    import pypto

    ctx = pypto.Context(device_type='npu', device_id=0)
    with ctx:
        A = pypto.tensor(np.random.rand(1024,1024), dtype='float16')
        B = pypto.ones((1024,1024), dtype='float16')

    @pypto.kernel
    def gemm(A, B):
        return pypto.matmul(A, B)

    with ctx:
        C = gemm(A, B)
    assert C.shape == (1024, 1024) and C.dtype == pypto.float16
    # B is all ones: every column of C is the row sums of A.
    want = f32(A).sum(axis=1, keepdims=True) * np.ones((1, 1024))
    np.testing.assert_allclose(f32(C), want, rtol=2e-3, atol=0.5)


def _conv_nchw(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """A direct (loop) convolution, stride 1, no padding: the test's own oracle."""
    n, c, h, wd = x.shape
    k, _, r, s = w.shape
    out = np.zeros((n, k, h - r + 1, wd - s + 1))
    for i in range(h - r + 1):
        for j in range(wd - s + 1):
            patch = x[:, :, i:i + r, j:j + s].astype(np.float64)
            out[:, :, i, j] = np.einsum("ncrs,kcrs->nk", patch, w.astype(np.float64))
    return out


def test_guide_conv_relu_fusion_hint() -> None:
    @pypto.kernel(fuse={'conv':'relu'}) # explicitly name the fusion pattern
    def conv_relu(x, weight):
        conv = pypto.conv2d(x, weight)
        return pypto.relu(conv)

    x = pypto.rand((1, 3, 8, 8), F32, seed=1) - 0.5
    w = pypto.rand((4, 3, 3, 3), F32, seed=2) - 0.5
    with pypto.Context(device_type="cpu"):
        y = conv_relu(x, w)
    close(y, np.maximum(_conv_nchw(f32(x), f32(w)), 0), tol=1e-5)
    # On the NPU: the same numbers, with the relu fused into the conv workload.
    close(conv_relu(x, w), np.maximum(_conv_nchw(f32(x), f32(w)), 0), tol=1e-5)
    conv = [wl for wl in conv_relu.lower(x, w).workloads if wl.family == "conv2d"]
    assert len(conv) == 1 and conv[0].ops == ("conv2d_nchw", "relu")  # NCHW read as it lies


def test_guide_layout_and_dtype_snippets() -> None:
    A = pypto.tensor(np.ones((1, 4, 4, 3)), layout='NHWC', dtype='float16')
    assert A.layout == "NHWC" and A.shape == (1, 4, 4, 3)
    A = pypto.tensor([1,2,3], dtype='int32')
    assert A.dtype == pypto.int32 and A.numpy().tolist() == [1, 2, 3]


def test_nhwc_conv_input_matches_nchw_on_cpu() -> None:
    x = pypto.rand((1, 3, 6, 6), F32, seed=3)
    w = pypto.rand((2, 3, 3, 3), F32, seed=4)
    x_nhwc = pypto.tensor(x.numpy().transpose(0, 2, 3, 1), dtype=F32, layout="NHWC")
    with pypto.Context(device_type="cpu"):
        y = pypto.conv2d(x, w)
        y_nhwc = pypto.conv2d(x_nhwc, w)
    close(y, _conv_nchw(f32(x), f32(w)), tol=1e-5)
    close(y_nhwc, _conv_nchw(f32(x), f32(w)).transpose(0, 2, 3, 1), tol=1e-5)


def test_nhwc_conv_result_keeps_its_layout() -> None:
    x_nhwc = pypto.rand((1, 6, 6, 3), F32, seed=3, layout="NHWC")
    w = pypto.rand((3, 3, 3, 3), F32, seed=4)
    with pypto.Context(device_type="cpu"):
        y = pypto.conv2d(x_nhwc, w)
    assert y.layout == "NHWC"


def test_guide_dynamic_shape_decorator() -> None:
    @pypto.kernel(dynamic_shape=True)
    def flexible_op(x):
        ...

    assert flexible_op.dynamic_shape
    with pytest.raises(pypto.KernelError, match=r"has an empty body \(`\.\.\.` or `pass`\)"):
        flexible_op(pypto.ones((4, 4)))

    @pypto.kernel(dynamic_shape=True)
    def flexible_softmax(x):
        return pypto.softmax(x)

    for shape in ((4, 16), (8, 32), (3, 40)):
        x = pypto.rand(shape, F32, seed=sum(shape))
        e = np.exp(f32(x) - f32(x).max(axis=-1, keepdims=True))
        close(flexible_softmax(x), e / e.sum(axis=-1, keepdims=True), tol=1e-5)


# -- the ascend310 target -------------------------------------------------------------------


def test_matmul_and_softmax_on_ascend310_match_the_cpu() -> None:
    t310 = load_target("ascend310")
    gemm = pypto.kernel(lambda x, y: pypto.matmul(x, y))
    soft = pypto.kernel(lambda x: pypto.softmax(x))
    a = pypto.rand((48, 64), F16, seed=1) - 0.5
    b = pypto.rand((64, 80), F16, seed=2) - 0.5
    x = pypto.rand((24, 96), F32, seed=3)
    with pypto.Context(device_type="npu", target="ascend310"):
        mm = gemm(a, b)
        sm = soft(x)
        c_mm, c_sm = gemm.lower(a, b), soft.lower(x)
    assert c_mm.target == t310 and c_sm.target == t310
    assert c_mm.asm().count("target=ascend310") == 1
    assert 1 <= c_mm.schedules[0]["cores"] <= t310.cube_cores
    assert 1 <= c_sm.schedules[0]["cores"] <= t310.vector_cores
    close(mm, on_cpu(gemm, a, b), tol=2e-3)
    close(mm, f32(a) @ f32(b), tol=2e-2)
    close(sm, on_cpu(soft, x), tol=1e-5)
    # The 310 compile is a different one from the 910B compile of the same signature.
    assert gemm.lower(a, b).target.name == "ascend910b"
    assert len(gemm._cache) == 2
