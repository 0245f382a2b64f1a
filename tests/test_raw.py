"""Raw mode: ``with pypto.raw(): pypto.inline_asm(code, x=t, outputs=...)`` in a kernel.

The block is parsed by the PTO assembly parser, issued by the scalar unit (registers,
loops), executed (values against NumPy computed without the block), timed and profiled
as a workload of its own between Python-style ops. A bad block is an error naming its
line; races inside it are warnings naming the lines."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pypto
from pypto.codegen.asm import parse, parse_block, print_program
from pypto.codegen.isa import VECTOR_REGISTER_BYTES, Op
from pypto.codegen.program import Symbol
from pypto.errors import AsmError, HazardWarning, KernelError, SimError
from pypto.ir.dtypes import float16, float32
from pypto.ir.workload import RAW
from pypto.sim import timing
from pypto.sim.executor import execute
from pypto.sim.roofline import program_bound, touched_gm_bytes
from pypto.sim.scalar import issue
from pypto.targets import Target, load_target

ASCEND = load_target("ascend910b")

# Loads x (256 fp32) into UB, squares it through Q registers in a loop of 4 (R0 steps
# one register's 256 bytes), stores the result to out.
SQUARE = """
    COPY.F32 UB[0x0:1x256,256,1], GM[x][0:1x256,256,1]
    SET_FLAG MTE2, VEC, 0
    WAIT_FLAG MTE2, VEC, 0
    MOV R0, #0
    MOV R1, #4
loop:
    VLD.F32 Q1, UB[R0]
    VMUL.F32 Q0, Q1, Q1
    VST.F32 UB[R0+0x400], Q0
    ADD R0, R0, #256
    SUB R1, R1, #1
    BNE R1, #0, loop
    SET_FLAG VEC, MTE3, 0
    WAIT_FLAG VEC, MTE3, 0
    COPY.F32 GM[out][0:1x256,256,1], UB[0x400:1x256,256,1]
"""
OUT = {"out": pypto.spec((256,), "float32")}


def square_kernel(code: str = SQUARE, **options) -> pypto.Kernel:
    @pypto.kernel
    def square(a):
        x = pypto.relu(a) + 1.0
        with pypto.raw():
            sq = pypto.inline_asm(code, x=x, outputs=OUT, **options)
        return pypto.exp(sq * 0.5)

    return square


def data(n: int = 256, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


# ----------------------------------------------------------------- in a kernel

@pytest.mark.filterwarnings("ignore::pypto.ScheduleFallbackWarning")
@pytest.mark.parametrize("device", ["npu", "cpu"])
def test_a_raw_block_between_python_ops_computes_what_numpy_does(device):
    a = data()
    with pypto.Context(device_type=device):
        got = square_kernel()(pypto.tensor(a, dtype="float32")).numpy()
    np.testing.assert_allclose(got, np.exp(0.5 * (np.maximum(a, 0) + 1) ** 2), rtol=1e-6)


@pytest.mark.filterwarnings("ignore::pypto.ScheduleFallbackWarning")
def test_a_raw_block_is_a_workload_of_its_own_with_a_profile_row():
    kernel = square_kernel()
    a = pypto.tensor(data(), dtype="float32")
    with pypto.Profiler() as prof:
        kernel(a)
    [call] = prof.calls
    assert [w.family for w in call.workloads] == ["vector", RAW, "vector"]
    assert call.sources == ["default", "raw", "default"]
    raw = call.results[1]
    assert raw.cycles >= raw.bound_cycles > 0
    assert raw.trace is not None and len(raw.trace) == raw.instructions
    row = next(line for line in prof.report().splitlines() if "inline_asm" in line)
    assert re.search(rf"\b1: inline_asm\s+raw\s+{raw.cycles:,}\b", row), row
    # the loop of 4 is what the core issued: 5 before it, 6 in each pass, 3 after
    assert raw.instructions == 5 + 4 * 6 + 3


@pytest.mark.filterwarnings("ignore::pypto.ScheduleFallbackWarning")
def test_a_raw_block_is_not_tuned_and_has_no_schedule():
    from pypto.tuner.tasks import extract_tasks

    compiled = square_kernel().lower(pypto.spec((256,), "float32"))
    assert compiled.sources[1] == "raw" and compiled.schedules[1].to_json() == "{}"
    assert [t.index for t in extract_tasks([compiled])] == [0, 2]
    with pytest.raises(KernelError, match="raw block"):
        compiled.with_schedule(1, {})
    assert "VLD.F32 Q1, UB[0x300]" in compiled.asm()  # the issued (unrolled) stream


def test_the_guides_hybrid_kernel_returns_nothing_and_runs():
    @pypto.kernel
    def hybrid_compute(x):
        y = pypto.relu(x)  # noqa: F841 - the guide's, unused
        with pypto.raw():
            pypto.inline_asm("""
            MOV R0, #0x100
            VADD.F32 Q0, Q1, Q2
            """)

    x = pypto.tensor(np.random.rand(8, 8), dtype="float32")
    with pypto.Profiler() as prof:
        assert hybrid_compute(x) is None
    [call] = prof.calls
    assert call.sources == ["raw"]        # relu's result is dead code
    program = hybrid_compute.lower(x).programs[0]
    assert [Op(o).name for o in program.cores[0]["op"]] == ["MOV", "VADD"]


@pytest.mark.filterwarnings("ignore::pypto.ScheduleFallbackWarning")
def test_several_outputs_and_bindings_and_a_view_input():
    code = """
        COPY.F16 UB[0x0:4x64,64,1], GM[a][0:4x64,64,1]
        COPY.F16 UB[0x800:4x64,64,1], GM[b][0:4x64,64,1]
        SET_FLAG MTE2, VEC, 0
        WAIT_FLAG MTE2, VEC, 0
        VADD.F16 UB[0x1000:4x64,64,1], UB[0x0:4x64,64,1], UB[0x800:4x64,64,1]
        VMAX.F16 UB[0x1800:4x64,64,1], UB[0x0:4x64,64,1], UB[0x800:4x64,64,1]
        SET_FLAG VEC, MTE3, 0
        WAIT_FLAG VEC, MTE3, 0
        COPY.F16 GM[total][0:4x64,64,1], UB[0x1000:4x64,64,1]
        COPY.F16 GM[most][0:4x64,64,1], UB[0x1800:4x64,64,1]
    """

    @pypto.kernel
    def both(p, q):
        with pypto.raw():
            total, most = pypto.inline_asm(
                code, a=p.T, b=q,      # a transposed view is copied to a tensor first
                outputs={"total": pypto.spec((4, 64), "float16"),
                         "most": pypto.spec((4, 64), "float16")})
        return total - most

    p = np.random.rand(64, 4).astype(np.float16)
    q = np.random.rand(4, 64).astype(np.float16)
    got = both(pypto.tensor(p, dtype="float16"), pypto.tensor(q, dtype="float16")).numpy()
    want = (p.T + q) - np.maximum(p.T, q)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=2e-3)


def test_multi_core_blocks_and_the_core_limit():
    lines = []
    for core in range(3):
        lines += [f".core {core}",
                  f"COPY.F32 UB[0x0:1x64,64,1], GM[x][{64 * core}:1x64,64,1]",
                  "SET_FLAG MTE2, VEC, 0", "WAIT_FLAG MTE2, VEC, 0",
                  "VMULS.F32 UB[0x0:1x64,64,1], UB[0x0:1x64,64,1], #3.0",
                  "SET_FLAG VEC, MTE3, 0", "WAIT_FLAG VEC, MTE3, 0",
                  f"COPY.F32 GM[out][{64 * core}:1x64,64,1], UB[0x0:1x64,64,1]"]

    @pypto.kernel
    def triple(x):
        with pypto.raw():
            return pypto.inline_asm("\n".join(lines), x=x,
                                    outputs={"out": pypto.spec((192,), "float32")})

    x = data(192)
    np.testing.assert_array_equal(triple(pypto.tensor(x, dtype="float32")).numpy(), x * 3)
    assert len(triple.lower(pypto.spec((192,), "float32")).programs[0].cores) == 3
    too_many = "\n".join(f".core {core}\nNOP" for core in range(ASCEND.vector_cores + 1))
    with pytest.raises(AsmError, match=r"line 97, column 7: core 48 does not exist: the "
                                       r"target has 48 cores"):
        _lower(too_many)


# ----------------------------------------------------------------- errors and warnings

def _lower(code: str, **options):
    @pypto.kernel
    def block(x):
        with pypto.raw():
            return pypto.inline_asm(code, x=x, outputs=OUT, **options)

    return block.lower(pypto.spec((256,), "float32"))


BAD_LINES = [
    # (code, words, line, column): lines count from the code string's first line
    ("NOP\n  VADD.F32 Q0, Q1", "takes 3 operands (d, a, b), found 2", 2, 18),
    ("\n\n  MOV R40, #1", "R40 does not exist: the scalar registers are R0..R31", 3, 7),
    ("MOV R0, #1.5", "expected an integer immediate", 1, 9),
    ("VADD.F32 Q0, Q32, Q1", "Q32 does not exist", 1, 14),
    ("BNE R0, #0, nowhere", "unknown label 'nowhere'", 1, 13),
    ("VLD.F32 Q0, UB[0x0:1x64,64,1]", "expected [ADDRESS] after UB", 1, 15),
    ("VLD.F32 UB[0x0], Q0", "expected one vector register, like Q0 as operand d", 1, 9),
    ("VADD.F32 UB[R1+0x20:1x8,8,1], Q0, Q1", "a register-based address (R1+...) is for COPY",
     1, 13),
    ("COPY.F32 UB[0x0:1x8,8,1], GM[y][0:1x8,8,1]", "unknown tensor 'y' (declared: x, out)",
     1, 30),
    ("COPY.F32 GM[x][0:1x8,8,1], UB[0x0:1x8,8,1]", "GM[x] is bound to an input", 1, 1),
    (".tensor z float32 [4] in", "bind tensors with inline_asm(code, NAME=tensor)", 1, 1),
    ("loop:\nloop: NOP", "label 'loop' is defined twice", 2, 1),
]


@pytest.mark.parametrize(("code", "words", "line", "column"), BAD_LINES)
def test_a_bad_line_names_its_line_column_and_what_was_expected(code, words, line, column):
    with pytest.raises(AsmError) as caught:
        _lower(code)
    assert words in str(caught.value)
    assert (caught.value.line, caught.value.column) == (line, column)


def test_a_runaway_loop_is_an_error_naming_its_line_not_a_hang():
    code = "MOV R1, #1\nspin:\n  ADD R0, R0, #1\n  BNE R1, #0, spin\n"
    with pytest.raises(SimError, match=r"core 0, line [34] .*issued 1,000 instructions "
                                       r"without core 0 reaching the end.*never ends"):
        _lower(code, budget=1000)
    assert len(_lower(code.replace("#1\n", "#0\n", 1), budget=1000).programs[0].cores[0]) == 3
    # the budget bounds what all cores issue together (and so the memory it takes)
    count = "MOV R1, #300\nagain:\n  SUB R1, R1, #1\n  BNE R1, #0, again\n"
    assert len(_lower(".core 0\n" + count, budget=1000).programs[0].cores[0]) == 601
    with pytest.raises(SimError, match=r"core 1, line (9|10) .*without core 1 reaching the end"):
        _lower(".core 0\n" + count + ".core 1\n" + count, budget=1000)


@pytest.mark.parametrize(("line", "words"), [
    ("COPY.F32 UB[0x0:1x64,64,1], GM[x][R1+200:1x64,64,1]", "reaches outside its GM tensor"),
    ("VLD.F32 Q0, UB[R1+0x2FFE0]", "runs past the end of its memory"),
    ("VLD.F32 Q0, UB[R1+0x4]", "not aligned to its memory's alignment"),
    ("VADD.F32 Q0, Q1, UB[0x10:1x64,64,1]", "not aligned"),
])
def test_out_of_bounds_and_misaligned_accesses_name_the_line(line, words):
    code = f"MOV R1, #0\n\n{line}\nNOP\n"
    with pytest.raises(SimError, match=rf"inline_asm, core 0, line 3 \(.*\): .*{words}"):
        _lower(code)


def test_races_are_warnings_naming_the_lines():
    racy = SQUARE.replace("    SET_FLAG MTE2, VEC, 0\n    WAIT_FLAG MTE2, VEC, 0\n", "")
    with pytest.warns(HazardWarning) as caught:
        compiled = _lower(racy)
    messages = [str(w.message) for w in caught]
    # VLD (line 6, VEC) reads what the COPY of line 2 (MTE2) writes, unordered
    assert any(re.search(r"VEC line 6 \(read\) races with MTE2 line 2 \(write\) on UB", m)
               for m in messages), messages
    assert all("SET_FLAG/WAIT_FLAG" in m for m in messages)
    assert compiled.programs[0].cores  # a warning, not an error: the block still compiles
    with warnings.catch_warnings():
        warnings.simplefilter("error", HazardWarning)
        _lower(SQUARE)


def test_raw_mode_is_asked_for_and_only_inside_a_kernel():
    @pypto.kernel
    def no_raw(x):
        return pypto.inline_asm("NOP", x=x, outputs=OUT)

    with pytest.raises(KernelError, match=r"inside `with pypto.raw\(\):`"):
        no_raw.lower(pypto.spec((256,), "float32"))
    with pytest.raises(KernelError, match="inside a @pypto.kernel"):
        pypto.inline_asm("NOP")
    with pytest.raises(KernelError, match="inside a @pypto.kernel"):
        with pypto.raw():
            pass


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"x": np.zeros(4)}, "x= must be a PyPTO tensor"),
    ({"outputs": {"out": (4,)}}, "must be a pypto.spec"),
    ({"outputs": {"x": pypto.spec((4,), "float32")}, "x": None}, "both bound"),
    ({"outputs": {"a b": pypto.spec((4,), "float32")}}, "must be a name"),
    ({"budget": 0}, "positive int"),
])
def test_bad_arguments_are_kernel_errors(kwargs, words):
    @pypto.kernel
    def bad(t):
        args = {k: (t if v is None else v) for k, v in kwargs.items()}
        with pypto.raw():
            pypto.inline_asm("NOP", **args)
        return t + 1.0

    with pytest.raises(KernelError, match=words):
        bad.lower(pypto.spec((4,), "float32"))


# ----------------------------------------------------------------- the instructions

REGISTER_TEXT = """\
.program p target=ascend910b
.tensor x float32 [256] in
.core 0
    MOV R0, #256
    MOV R1, R0
    ADD R2, R1, #-7
    SUB R3, R2, R1
    MUL R4, R3, #9007199254740992
L5:
    VLD.F32 Q31, UB[R0+0x40]
    VLD.F16 Q0, UB[0x0]
    VST.S8 UB[R2-0x20], Q7
    VADD.F32 Q0, Q1, Q2
    VCAST.F16.F32 Q3, Q4
    VADDS.F16 Q3, Q3, #0.5
    COPY.F32 UB[R3:1x64,64,1], GM[x][R1+16:1x64,64,1]
    COPY.F32 Q[0x20:1x8,8,1], UB[0x0:1x8,8,1]
    BLT R1, R2, L5
    BNE R1, #0, L15
L15:
"""


def test_register_instructions_round_trip_through_the_text():
    program = parse(REGISTER_TEXT)
    assert print_program(program) == REGISTER_TEXT
    assert parse(print_program(program)) == program
    assert program.lines == ((4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19),)
    vld = program.cores[0][5]
    assert (vld["d_addr"], vld["d_cols"], vld["a_addr"], vld["event"]) == (31 * 256, 64, 0x40, 1)


def test_the_scalar_unit_issues_what_the_loops_and_registers_say():
    text = (".program p target=ascend910b\n.core 0\n    MOV R0, #0\n    MOV R1, #3\n"
            "top:\n    VLD.F32 Q0, UB[R0+0x100]\n    ADD R0, R0, #256\n    SUB R1, R1, #1\n"
            "    BLT R0, #768, top\n")
    issued = issue(parse(text))
    loads = issued.cores[0][issued.cores[0]["op"] == Op.VLD]
    assert list(loads["a_addr"]) == [0x100, 0x200, 0x300]
    assert not loads["event"].any()          # resolved: no register bases are left
    assert issue(issued) is issued            # a fixed point
    assert issued.lines == ((3, 4) + (6, 7, 8, 9) * 3,)
    wrap = parse(".program p target=ascend910b\n.core 0\n    MOV R0, #9007199254740992\n"
                 "    MUL R0, R0, #9007199254740992\n    ADD R0, R0, #256\n"
                 "    VLD.F32 Q0, UB[R0]\n")
    assert issue(wrap).cores[0]["a_addr"][-1] == 256   # int64 registers wrap: 2**106 is 0


def test_scalar_instructions_cost_their_issue_slots_in_both_engines():
    text = ".program p target={}\n.core 0\n" + "    ADD R0, R0, #1\n" * 10 + "    NOP\n"
    data = ASCEND.to_dict()
    data["target"]["name"] = "slow_scalar"
    data["scalar"]["op_cycles"] = 7
    slow = Target.from_dict(data)
    for target in (ASCEND, slow):
        program = parse(text.format(target.name), target)
        results = [timing.simulate(program, target, trace=True, engine=e)
                   for e in ("reference", "cython")]
        assert results[0].same_timing(results[1])
        assert results[0].cycles == target.launch_overhead_cycles + 10 * target.scalar_op_cycles + 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["VADD", "VSUB", "VMUL", "VMAX", "VMIN", "VEXP", "VABS",
                                 "VRELU", "VNEG", "VADDS", "VMULS"]), min_size=1, max_size=6),
       st.integers(1, 8), st.sampled_from([float16, float32]), st.integers(0, 2**32 - 1))
def test_register_programs_compute_what_numpy_does(ops, iterations, dtype, seed):
    """A loop streaming ``iterations`` registers of x and y through a random chain of
    register ops; the executor's result against the same chain in NumPy."""
    width = VECTOR_REGISTER_BYTES // dtype.itemsize
    n = width * iterations
    suffix = dtype.suffix
    body = []
    for op in ops:
        if op in ("VADD", "VSUB", "VMUL", "VMAX", "VMIN"):
            body.append(f"    {op}.{suffix} Q0, Q0, Q1")
        elif op in ("VADDS", "VMULS"):
            body.append(f"    {op}.{suffix} Q0, Q0, #0.5")
        else:
            body.append(f"    {op}.{suffix} Q0, Q0")
    y_at = n * dtype.itemsize
    text = "\n".join([
        ".program p target=ascend910b",
        f".tensor x {dtype.name} [{n}] in", f".tensor y {dtype.name} [{n}] in",
        f".tensor out {dtype.name} [{n}] out", ".core 0",
        f"    COPY.{suffix} UB[0x0:1x{n},{n},1], GM[x][0:1x{n},{n},1]",
        f"    COPY.{suffix} UB[{y_at:#x}:1x{n},{n},1], GM[y][0:1x{n},{n},1]",
        "    SET_FLAG MTE2, VEC, 0", "    WAIT_FLAG MTE2, VEC, 0",
        "    MOV R0, #0", f"    MOV R1, #{iterations}", "next:",
        f"    VLD.{suffix} Q0, UB[R0]", f"    VLD.{suffix} Q1, UB[R0+{y_at:#x}]", *body,
        f"    VST.{suffix} UB[R0], Q0", f"    ADD R0, R0, #{VECTOR_REGISTER_BYTES}",
        "    SUB R1, R1, #1", "    BNE R1, #0, next",
        "    SET_FLAG VEC, MTE3, 0", "    WAIT_FLAG VEC, MTE3, 0",
        f"    COPY.{suffix} GM[out][0:1x{n},{n},1], UB[0x0:1x{n},{n},1]"])
    rng = np.random.default_rng(seed)
    x, y = (rng.uniform(-2, 2, n).astype(dtype.np) for _ in range(2))
    out = np.zeros(n, dtype.np)
    execute(parse(text), ASCEND, [x, y, out])
    want = x.astype(np.float32)
    yy = y.astype(np.float32)
    for op in ops:
        want = {"VADD": lambda v: v + yy, "VSUB": lambda v: v - yy, "VMUL": lambda v: v * yy,
                "VMAX": lambda v: np.maximum(v, yy), "VMIN": lambda v: np.minimum(v, yy),
                "VEXP": np.exp, "VABS": np.abs, "VRELU": lambda v: np.maximum(v, 0),
                "VNEG": np.negative, "VADDS": lambda v: v + 0.5,
                "VMULS": lambda v: v * 0.5}[op](want).astype(dtype.np).astype(np.float32)
    np.testing.assert_allclose(out.astype(np.float32), want, rtol=1e-6, atol=0)


def test_the_bound_of_a_block_counts_only_the_bytes_it_touches():
    symbols = (Symbol("big", float32, (1 << 24,), "in"), Symbol("out", float32, (64,), "out"))
    block = parse_block("COPY.F32 UB[0x0:1x64,64,1], GM[big][0:1x64,64,1]\n"
                        "COPY.F32 UB[0x0:1x64,64,1], GM[big][32:1x64,64,1]\n"
                        "COPY.F32 UB[0x0:2x8,8,1], GM[big][0:2x8,200,3]\n"
                        "COPY.F32 GM[out][0:1x64,64,1], UB[0x0:1x64,64,1]\n", symbols, ASCEND)
    # 96 elements of big (0..95), a strided 2x8 (row 0: 0, 3, .. 21, inside those; row 1:
    # 200, 203, .. 221, new), and 64 of out
    assert touched_gm_bytes(block) == 4 * (96 + 8 + 64)
    result = timing.simulate(block, ASCEND,
                             bound_cycles=program_bound(block, ASCEND, touched_gm_bytes(block)))
    assert result.cycles >= result.bound_cycles
    assert program_bound(block, ASCEND) > result.cycles   # every byte of big: not a bound


# ----------------------------------------------------------------- the example

def _example():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "examples" / "hybrid.py"
    spec = importlib.util.spec_from_file_location("hybrid_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.filterwarnings("ignore::pypto.ScheduleFallbackWarning")
def test_the_hybrid_example_centres_columns_without_races_in_fewer_cycles():
    """examples/hybrid.py's raw block, smaller: NumPy's values, no race, and fewer
    simulated cycles and GM bytes than the compiler's workloads for the same expression."""
    example = _example()
    x = pypto.tensor(np.random.default_rng(5).standard_normal((256, 128)), dtype="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("error", HazardWarning)
        raw_out, raw, _ = example.timed(example.center_raw_kernel(256, 128, 8), x)
    compiled_out, compiled, _ = example.timed(example.center_compiled, x)
    want = x.numpy() - x.numpy().mean(axis=0, keepdims=True)
    np.testing.assert_allclose(raw_out, want, atol=1e-5)
    np.testing.assert_allclose(compiled_out, want, atol=1e-5)
    assert raw.cycles < compiled.cycles and raw.gm_read_bytes < compiled.gm_read_bytes
