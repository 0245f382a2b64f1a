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
    with pytest.raises(UnsupportedError, match=r"m1=\d+, n1=\d+, k1=\d+, k0=\d+ .*larger m1"):
        mm.lower(pypto.spec((10**5, 10**5), "float16"),
                 pypto.spec((10**5, 10**5), "float16"), target="ascend910b")
