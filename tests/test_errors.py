"""Bad input gives a clear ``pypto.PyptoError`` subclass (DESIGN §13, STYLE practice 10).

Each case names the exception class, the built-in it must also be (so an ordinary
``except TypeError`` works), and phrases the message must contain: the input that was
wrong and what to do about it. No case may surface as a bare ``KeyError``,
``IndexError`` or ``AttributeError`` from inside the library.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pypto
from pypto.targets import load_target
from pypto.targets.target import PACKAGE_DIR

F16, F32 = "float16", "float32"
A = pypto.rand((8, 16), F32, seed=0)
B4 = pypto.rand((8, 4), F32, seed=1)


def raises(fn: Callable[[], Any], exc: type[Exception], builtin: type[Exception] | None,
           *phrases: str) -> Exception:
    """Run ``fn``; check the error's classes and that every phrase is in its message."""
    with pytest.raises(Exception) as info:
        fn()
    err = info.value
    assert not isinstance(err, (KeyError, IndexError, AttributeError)), repr(err)
    assert isinstance(err, pypto.PyptoError), f"{type(err).__name__}: {err}"
    assert isinstance(err, exc), f"expected {exc.__name__}, got {type(err).__name__}: {err}"
    if builtin is not None:
        assert isinstance(err, builtin), f"{type(err).__name__} is not a {builtin.__name__}"
    for phrase in phrases:
        assert phrase in str(err), f"{phrase!r} not in {str(err)!r}"
    return err


def kernel_returning(value: Any) -> pypto.Kernel:
    def returns_value(x):
        return value

    return pypto.kernel(returns_value)


def compiled_add() -> Any:
    return pypto.kernel(lambda x: x + x).lower(A)


CASES: list[tuple[str, Callable[[], Any], type[Exception], type[Exception] | None,
                  tuple[str, ...]]] = [
    ("tensor without dtype", lambda: pypto.tensor([1, 2, 3]),
     pypto.DTypeError, TypeError, ("pypto.tensor()", "dtype", "float16", "int32")),
    ("unknown dtype name", lambda: pypto.tensor([1, 2, 3], dtype="float64"),
     pypto.DTypeError, TypeError, ("'float64'", "float16, float32, int8, int32")),
    ("unknown dtype object", lambda: pypto.ones((2, 2), dtype=np.complex64),
     pypto.DTypeError, TypeError, ("complex64", "float16")),
    ("spec unknown dtype", lambda: pypto.spec((2, 2), "bfloat16"),
     pypto.DTypeError, TypeError, ("'bfloat16'",)),
    ("unknown layout", lambda: pypto.tensor([1, 2], dtype="int32", layout="XYZ"),
     pypto.LayoutError, ValueError, ("'XYZ'", "NHWC", "NCHW")),
    ("NHWC on a 2-D tensor", lambda: pypto.tensor(np.ones((2, 2)), dtype=F16, layout="NHWC"),
     pypto.LayoutError, ValueError, ("'NHWC'", "4-D", "2-D", "layout='ND'")),
    ("NCHW spec on 3-D", lambda: pypto.spec((2, 2, 2), F16, layout="NCHW"),
     pypto.LayoutError, ValueError, ("'NCHW'", "3-D")),
    ("matmul shape mismatch", lambda: pypto.matmul(A, B4),
     pypto.ShapeError, ValueError, ("matmul", "[8, 16]", "[8, 4]")),
    ("matmul mismatch in a kernel", lambda: pypto.kernel(lambda x, y: x @ y)(A, B4),
     pypto.ShapeError, ValueError, ("matmul", "[8, 16]", "[8, 4]")),
    ("broadcast mismatch in add", lambda: A + pypto.rand((3, 5), F32),
     pypto.ShapeError, ValueError, ("add", "[8, 16]", "[3, 5]")),
    ("reduce over an out-of-range axis", lambda: A.sum(axis=5),
     pypto.ShapeError, ValueError, ("sum", "axis 5", "2-D")),
    ("reduce with a non-int axis", lambda: pypto.max(A, axis=1.5),
     pypto.ShapeError, ValueError, ("max", "1.5")),
    ("reshape to a wrong size", lambda: A.reshape(7, 3),
     pypto.ShapeError, ValueError, ("reshape", "[8, 16]", "[7, 3]", "128")),
    ("transpose with a bad permutation", lambda: pypto.transpose(A, (0, 0)),
     pypto.ShapeError, ValueError, ("transpose", "[0, 0]")),
    ("index out of range", lambda: pypto.kernel(lambda x: x[9])(A),
     pypto.ShapeError, ValueError, ("index 9", "size 8")),
    ("unsupported NumPy function", lambda: np.sort(A),
     pypto.UnsupportedError, NotImplementedError, ("np.sort", "np.dot")),
    ("unsupported ufunc", lambda: np.sin(A),
     pypto.UnsupportedError, NotImplementedError, ("np.sin", "np.exp")),
    ("ufunc method", lambda: np.add.reduce(A),
     pypto.UnsupportedError, NotImplementedError, ("np.add.reduce",)),
    ("ufunc out=", lambda: np.add(A, A, out=np.empty((8, 16))),
     pypto.UnsupportedError, NotImplementedError, ("out",)),
    ("zero slice step in a kernel", lambda: pypto.kernel(lambda x: x[::0])(A),
     pypto.ShapeError, ValueError, ("slice step cannot be zero",)),
    ("assignment into a tensor", lambda: A.__setitem__(0, 1.0),
     pypto.UnsupportedError, NotImplementedError, ("immutable",)),
    ("kernel returns an int", lambda: kernel_returning(3)(A),
     pypto.KernelError, TypeError, ("returned int", "tensor")),
    ("kernel returns a dict", lambda: kernel_returning({"y": 1})(A),
     pypto.KernelError, TypeError, ("returned dict", "tuple/list of tensors")),
    ("kernel returns an empty tuple", lambda: kernel_returning(())(A),
     pypto.KernelError, TypeError, ("returned tuple",)),
    ("NumPy array passed to a kernel", lambda: pypto.kernel(lambda x: x + x)(np.ones((2, 2))),
     pypto.KernelError, TypeError, ("argument 0", "NumPy array", "pypto.tensor(")),
    ("unhashable argument", lambda: pypto.kernel(lambda x, s: x)(A, [1, 2]),
     pypto.KernelError, TypeError, ("argument 1", "list")),
    ("spec passed to a call", lambda: pypto.kernel(lambda x: x + x)(pypto.spec((2, 2), F16)),
     pypto.KernelError, TypeError, ("spec", ".lower(")),
    ("data-dependent control flow", lambda: pypto.kernel(lambda x: x if x else x)(A),
     pypto.KernelError, TypeError, ("truth value",)),
    ("numpy() on a traced tensor", lambda: pypto.kernel(lambda x: x + x.numpy())(A),
     pypto.KernelError, TypeError, ("symbolic",)),
    ("op without any tensor", lambda: pypto.matmul(np.ones((2, 2)), np.ones((2, 2))),
     pypto.KernelError, TypeError, ("pypto.matmul()", "pypto.tensor(")),
    ("exp of an int32 tensor", lambda: pypto.exp(pypto.tensor([1, 2], dtype="int32")),
     pypto.DTypeError, TypeError, ("exp", "int32", "astype")),
    ("int32 matmul", lambda: pypto.tensor(np.ones((2, 2)), dtype="int32") @
     pypto.tensor(np.ones((2, 2)), dtype="int32"),
     pypto.DTypeError, TypeError, ("matmul", "int32", "float32")),
    ("compiled kernel, wrong shape", lambda: compiled_add()(pypto.rand((16, 8), F32)),
     pypto.KernelError, TypeError, ("argument 0", "float32[16, 8]", "float32[8, 16]")),
    ("compiled kernel, wrong dtype", lambda: compiled_add()(A.astype(F16)),
     pypto.KernelError, TypeError, ("float16[8, 16]", "float32[8, 16]")),
    ("compiled kernel, wrong count", lambda: compiled_add()(A, A),
     pypto.KernelError, TypeError, ("1 tensor argument", "got 2")),
    ("with_schedule index out of range", lambda: compiled_add().with_schedule(1, {}),
     pypto.KernelError, TypeError, ("index 1", "1 workload")),
    ("invalid schedule knob", lambda: compiled_add().with_schedule(
        0, {"tile_rows": 1, "tile_cols": 16, "depth": 7, "cores": 1}),
     pypto.ScheduleError, ValueError, ("depth=7", "[1, 2, 3, 4]")),
    ("missing schedule knob", lambda: compiled_add().with_schedule(0, {"tile_rows": 1}),
     pypto.ScheduleError, ValueError, ("missing knob 'tile_cols'",)),
    ("float schedule knob", lambda: compiled_add().with_schedule(0, {"tile_rows": 1.5}),
     pypto.ScheduleError, ValueError, ("'tile_rows'", "1.5")),
    ("schedule list of the wrong length",
     lambda: pypto.kernel(lambda x: x + x, schedule=[None, None])(A),
     pypto.ScheduleError, ValueError, ("1 workloads", "2 entries")),
    ("bad fuse producer", lambda: pypto.kernel(fuse={"softmax": "relu"})(lambda x: x),
     pypto.KernelError, TypeError, ("'softmax'", "conv", "matmul")),
    ("bad fuse consumer", lambda: pypto.kernel(fuse={"conv": "matmul"})(lambda x: x),
     pypto.KernelError, TypeError, ("'matmul'", "elementwise")),
    ("kernel of a non-function", lambda: pypto.kernel(3),
     pypto.KernelError, TypeError, ("needs a function", "int")),
    ("unknown device type", lambda: pypto.Context(device_type="gpu"),
     pypto.PyptoError, None, ("'gpu'", "'npu'", "'cpu'")),
    ("negative device id", lambda: pypto.Context(device_id=-1),
     pypto.PyptoError, None, ("device_id", "-1")),
    ("unknown target", lambda: pypto.Context(target="nope"),
     pypto.TargetError, ValueError, ("'nope'", "ascend910b", "ascend310", ".toml")),
    ("unknown target on a kernel", lambda: pypto.kernel(target="nope")(lambda x: x + x)(A),
     pypto.TargetError, ValueError, ("'nope'", "ascend910b")),
    ("missing target file", lambda: load_target("/nonexistent/dir/t.toml"),
     pypto.TargetError, ValueError, ("/nonexistent/dir/t.toml",)),
    ("conv2d groups that do not fit the channels",
     lambda: pypto.conv2d(pypto.rand((1, 4, 5, 5), F16), pypto.rand((4, 1, 3, 3), F16),
                          groups=3),
     pypto.ShapeError, ValueError, ("conv2d", "groups=3", "[K, C/groups, R, S]")),
    ("conv2d channel mismatch", lambda: pypto.conv2d(pypto.rand((1, 4, 5, 5), F16),
                                                     pypto.rand((3, 2, 3, 3), F16)),
     pypto.ShapeError, ValueError, ("conv2d", "[3, 2, 3, 3]")),
    ("empty tensor on the NPU", lambda: pypto.tensor(np.ones((0, 4)), dtype=F16) + 1.0,
     pypto.UnsupportedError, NotImplementedError, ("empty", "[0, 4]")),
    ("ragged data", lambda: pypto.tensor([[1, 2], [3]], dtype="int32"),
     pypto.ShapeError, ValueError, ("pypto.tensor()",)),
    ("string data", lambda: pypto.tensor("abc", dtype=F32),
     pypto.DTypeError, TypeError, ("<U3",)),
    ("negative shape", lambda: pypto.ones((2, -1)),
     pypto.ShapeError, ValueError, ("[2, -1]", "negative")),
]


@pytest.mark.parametrize("fn, exc, builtin, phrases", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_bad_input_gives_a_clear_error(fn, exc, builtin, phrases) -> None:
    raises(fn, exc, builtin, *phrases)


def test_error_classes_derive_from_the_matching_builtins() -> None:
    assert issubclass(pypto.DTypeError, TypeError)
    assert issubclass(pypto.KernelError, TypeError)
    for cls in (pypto.LayoutError, pypto.ShapeError, pypto.TargetError, pypto.ScheduleError,
                pypto.AsmError):
        assert issubclass(cls, ValueError), cls
    assert issubclass(pypto.UnsupportedError, NotImplementedError)
    assert issubclass(pypto.SimError, RuntimeError)
    for name in ("DTypeError", "LayoutError", "ShapeError", "UnsupportedError", "KernelError",
                 "TargetError", "ScheduleError", "AsmError", "SimError"):
        assert issubclass(getattr(pypto, name), pypto.PyptoError), name


def test_a_symbolic_tensor_cannot_mix_into_another_trace() -> None:
    leaked = []

    @pypto.kernel
    def leaks(x):
        leaked.append(x)
        return x + 1.0

    leaks(A)
    raises(lambda: pypto.kernel(lambda y: y + leaked[0])(A), pypto.KernelError, TypeError,
           "different kernel traces")


@pytest.mark.parametrize("kwargs", [{"device_type": "gpu"}, {"device_id": -1}])
def test_bad_context_arguments_are_value_errors(kwargs) -> None:
    with pytest.raises(ValueError):
        pypto.Context(**kwargs)


def test_conv2d_runs_on_the_npu_and_matches_the_cpu() -> None:
    x, w = pypto.rand((1, 2, 5, 5), F16, seed=3), pypto.rand((3, 2, 3, 3), F16, seed=4)
    y = pypto.conv2d(x, w)
    with pypto.Context(device_type="cpu"):
        ref = pypto.conv2d(x, w)
    assert y.shape == ref.shape == (1, 3, 3, 3)
    np.testing.assert_allclose(y.numpy().astype(np.float64), ref.numpy().astype(np.float64),
                               rtol=4e-3, atol=4e-3)


def test_spec_with_a_negative_size_is_a_shape_error() -> None:
    raises(lambda: pypto.spec((2, -3), F16), pypto.ShapeError, ValueError, "[2, -3]")


# -- malformed target descriptors ------------------------------------------------------------


def descriptor(tmp_path: pathlib.Path, old: str, new: str) -> pathlib.Path:
    text, n = re.subn(old, new, (PACKAGE_DIR / "ascend910b.toml").read_text(),
                      count=1, flags=re.MULTILINE)
    assert n == 1, old
    path = tmp_path / "broken.toml"
    path.write_text(text)
    return path


def test_target_file_with_a_missing_field_names_the_field(tmp_path) -> None:
    path = descriptor(tmp_path, r"^clock_ghz = .*$", "")
    for load in (lambda: load_target(path), lambda: load_target(str(path)),
                 lambda: pypto.Context(target=str(path))):
        raises(load, pypto.TargetError, ValueError, "target.clock_ghz", "missing", str(path))


def test_target_file_with_a_wrong_type_names_the_field(tmp_path) -> None:
    path = descriptor(tmp_path, r"^cube_cores = \d+", 'cube_cores = "many"')
    raises(lambda: load_target(path), pypto.TargetError, ValueError,
           "target.cube_cores", "integer", "'many'")


def test_target_file_with_a_missing_path_field_names_it(tmp_path) -> None:
    path = descriptor(tmp_path, r'^"GM->L1" = \{ pipe = "MTE2", ', '"GM->L1" = { ')
    raises(lambda: load_target(path), pypto.TargetError, ValueError, "pipe", "GM->L1")


def test_target_file_that_is_not_toml(tmp_path) -> None:
    path = tmp_path / "garbage.toml"
    path.write_text("[target\nname = ")
    raises(lambda: load_target(path), pypto.TargetError, ValueError, "invalid TOML", str(path))


def test_a_valid_target_file_by_path_runs_a_kernel(tmp_path) -> None:
    path = descriptor(tmp_path, r"^cube_cores = \d+", "cube_cores = 3")
    k = pypto.kernel(lambda x, y: x @ y)
    a, b = pypto.rand((32, 64), F16, seed=1), pypto.rand((64, 32), F16, seed=2)
    with pypto.Context(target=str(path)):
        out = k(a, b)
        compiled = k.lower(a, b)
    assert compiled.target.cube_cores == 3
    assert compiled.schedules[0]["cores"] <= 3
    np.testing.assert_allclose(out.numpy().astype(np.float64),
                               a.numpy().astype(np.float64) @ b.numpy().astype(np.float64),
                               rtol=2e-2, atol=2e-2)
