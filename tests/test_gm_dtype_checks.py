"""A GM operand must have its tensor's dtype (issue 15, defect 1): GM bounds count
elements, so ``COPY.F32`` of an ``int8`` tensor once read and wrote four times the
tensor's bytes, corrupting the process's memory."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto.codegen.asm import parse
from pypto.errors import SimError
from pypto.sim.check import check_program
from pypto.sim.executor import execute
from pypto.sim.timing import simulate
from pypto.targets import load_target

TARGET = load_target("ascend910b")

WRITE = """
.program p target=ascend910b
.tensor A int8 [16384] out
.core 0
    COPY.F32 GM[A][0:1x16384,16384,1], UB[0x0:1x16384,16384,1]
"""
READ = """
.program p target=ascend910b
.tensor A int8 [16384] in
.core 0
    COPY.F32 UB[0x0:1x16384,16384,1], GM[A][0:1x16384,16384,1]
"""


@pytest.mark.parametrize("text", [WRITE, READ], ids=["write", "read"])
def test_the_reproducer_is_refused_before_any_memory_is_touched(text: str) -> None:
    program = parse(text, TARGET)
    with pytest.raises(SimError, match=r"GM tensor A as float32, but A is int8"):
        check_program(program, TARGET)
    for bound in (None, 1000):  # both the Python check and the engine's own pass
        with pytest.raises(SimError, match="GM tensor A as float32"):
            simulate(program, TARGET, bound_cycles=bound)
    gm = [np.zeros(16384, dtype=np.int8)]
    with pytest.raises(SimError, match="GM tensor A"):
        execute(program, TARGET, gm)
    assert not gm[0].any()  # nothing was written


NP = {"int8": np.int8, "float16": np.float16, "float32": np.float32, "int32": np.int32}


@settings(max_examples=60, deadline=None)
@given(tensor=st.sampled_from(sorted(NP)), access=st.sampled_from(["S8", "F16", "F32", "S32"]),
       cols=st.integers(1, 512), write=st.booleans())
def test_a_gm_copy_runs_only_with_its_tensors_dtype(tensor: str, access: str, cols: int,
                                                    write: bool) -> None:
    name = {"S8": "int8", "F16": "float16", "F32": "float32", "S32": "int32"}[access]
    ub = f"UB[0x0:1x{cols},{cols},1]"
    gm = f"GM[A][0:1x{cols},{cols},1]"
    text = (f".program p target=ascend910b\n.tensor A {tensor} [{cols}] "
            f"{'out' if write else 'in'}\n.core 0\n"
            f"    COPY.{access} {gm if write else ub}, {ub if write else gm}\n")
    program = parse(text, TARGET)
    arrays = [np.arange(cols).astype(NP[tensor])]
    if name == tensor:
        check_program(program, TARGET)
        execute(program, TARGET, arrays)
    else:
        with pytest.raises(SimError, match=f"as {name}, but A is {tensor}"):
            check_program(program, TARGET)
        with pytest.raises(SimError, match="GM tensor A"):
            execute(program, TARGET, arrays)
