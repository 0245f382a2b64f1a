"""A target of a different shape (Cambricon MLU-class: NRAM/WRAM/SRAM, no L0C) runs
the same kernels through the same code: the memory hierarchy is data."""

from __future__ import annotations

import numpy as np
import pytest

import pypto
from pypto.codegen.isa import Mem
from pypto.schedule_space import space_for
from pypto.targets import load_target


def test_descriptor():
    t = load_target("mlu370")
    assert t.role("left").name == t.role("acc").name == t.role("vector").name == "NRAM"
    assert t.role("right").name == "WRAM" and t.role("stage").name == "SRAM"
    assert "L0C" not in t.memories
    assert 90e12 < t.peak_flops("float16") < 100e12  # the published 96 TFLOP/s


def test_roles_sharing_a_memory_get_disjoint_buffers():
    """Left operand, accumulator and epilogue buffers are all in NRAM: never overlapping."""
    compiled = pypto.kernel(lambda a, b, c: pypto.relu(a @ b + c)).lower(
        pypto.spec((256, 256), "float16"), pypto.spec((256, 256), "float16"),
        pypto.spec((256,), "float16"), target="mlu370")
    stream = compiled.programs[0].cores[0]
    mmad = stream[stream["op"] == 2]
    assert (mmad["d_mem"] == Mem.LEFT).all() and (mmad["a_mem"] == Mem.LEFT).all()
    acc_addrs = set(mmad["d_addr"].tolist())
    left_addrs = set(mmad["a_addr"].tolist())
    assert acc_addrs and left_addrs and not acc_addrs & left_addrs
    space = space_for(compiled.workloads[0], compiled.target)
    # a schedule whose NRAM parts fit alone but not together is rejected
    big = space.default().replace(m1=256, n1=256, l0c_depth=2, k0=256, l0_depth=2)
    problems = space.validate(big)
    assert any("NRAM" in p for p in problems), problems


@pytest.mark.parametrize("fn, shapes", [
    (pypto.matmul, [(130, 70), (70, 90)]),
    (lambda x, w: pypto.relu(pypto.conv2d(x, w, padding=1)), [(1, 8, 9, 9), (12, 8, 3, 3)]),
    (pypto.softmax, [(100, 300)]),
])
def test_kernels_run_on_mlu(fn, shapes):
    rng = np.random.default_rng(0)
    args = [pypto.tensor(rng.standard_normal(s), dtype="float16") for s in shapes]
    with pypto.Context(device_type="npu", target="mlu370"):
        out = pypto.kernel(fn)(*args)
    with pypto.Context(device_type="cpu"):
        ref = pypto.kernel(fn)(*args)
    np.testing.assert_allclose(out.numpy().astype(np.float32), ref.numpy().astype(np.float32),
                               rtol=4e-3, atol=4e-3 * max(1.0, float(np.abs(ref.numpy()).max())))
