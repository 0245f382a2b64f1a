"""Shapes too large for any memory or any program are refused before anything is
built (issue 15, defect 2): a 10^5 x 10^5 matmul once took over 4 GiB in seconds while
building its block list, and dims of 2^64 were accepted."""

from __future__ import annotations

import resource

import pytest

import pypto
from pypto.errors import ShapeError, UnsupportedError
from pypto.targets import load_target


@pypto.kernel
def mm(a, b):  # type: ignore[no-untyped-def]
    return pypto.matmul(a, b)


@pypto.kernel
def add(a, b):  # type: ignore[no-untyped-def]
    return a + b


@pytest.fixture
def memory_cap():  # type: ignore[no-untyped-def]
    """At most 3 GiB of address space more than now: a runaway fails, not the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        now = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (now + 3 * 2**30, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize("shape", [(2**64, 4), (2**40, 2**10), (-1, 4)])
def test_dims_that_fit_no_memory_are_refused_at_the_spec(shape: tuple[int, int]) -> None:
    with pytest.raises(ShapeError, match="shape"):
        pypto.spec(shape, "float16")


def test_tensors_larger_than_the_targets_gm_are_refused(memory_cap: None) -> None:
    # each float16 tensor is just over half of the GM: the two arguments do not fit
    gm = load_target("ascend310").role("global").capacity
    rows = gm // 4 // 1024 + 1024
    with pytest.raises(ShapeError, match="arguments and results take .* smaller kernels"):
        add.lower(pypto.spec((rows, 1024), "float16"), pypto.spec((rows, 1024), "float16"),
                  target="ascend310")


def test_a_matmul_that_would_emit_too_many_instructions_names_its_tiles(
        memory_cap: None) -> None:
    with pytest.raises(UnsupportedError, match=r"even the largest tiles \(m1=\d+, n1=\d+, "
                                               r"k1=\d+, k0=\d+\) make a program of about "
                                               r"[\d,]+ instructions .*smaller kernels"):
        mm.lower(pypto.spec((10**5, 10**5), "float16"),
                 pypto.spec((10**5, 10**5), "float16"), target="ascend910b")


def test_a_matmul_whose_tiles_that_fit_make_too_large_a_program_is_refused(
        memory_cap: None) -> None:
    """20000^3: the tiles the memories hold make programs over the size limit."""
    with pytest.raises(UnsupportedError, match=r"no valid schedule on ascend910b.*m1=\d+, "
                                               r"n1=\d+.* instructions \(at most [\d,]+\): "
                                               r"give larger m1"):
        mm.lower(pypto.spec((20000, 20000), "float16"),
                 pypto.spec((20000, 20000), "float16"), target="ascend910b")
