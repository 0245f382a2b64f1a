"""PTO assembly: printing and parsing round-trip exactly, and bad text gets clear errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pypto.codegen.asm import parse, parse_instruction, print_instruction, print_program
from pypto.codegen.isa import (
    BINARY,
    BRANCHES,
    F_ACCUMULATE,
    F_ATOMIC,
    F_RELU,
    F_TRANSPOSE,
    INSTR,
    REDUCE,
    SCALAR_ALU,
    SCALAR_IMM,
    UNARY,
    VECTOR_REGISTER_BYTES,
    Mem,
    Op,
    Pipe,
)
from pypto.codegen.memories import isa_view, memory_map
from pypto.codegen.program import Operand, Program, StreamBuilder, Symbol
from pypto.errors import AsmError
from pypto.ir.dtypes import ALL, float16, float32
from pypto.targets import Target, available_targets, load_target

EXAMPLE = """\
.program NAME target=ascend910b
.tensor A float16 [1024,1024] in
.tensor C float16 [1024,1024] out
.core 0
    COPY.F16 L1[0x0:128x256,256,1], GM[A][0:128x256,1024,1]
    SET_FLAG MTE2, MTE1, 0
    WAIT_FLAG MTE2, MTE1, 0
    COPY.F16.T L0B[0x0:64x128,128,1], L1[0x8000:128x64,64,1]
    MMAD.F32.F16.ACC L0C[0x0:128x128,128,1], L0A[0x0:128x64,64,1], L0B[0x0:64x128,128,1]
    COPY.F16.F32 GM[C][0:128x128,1024,1], L0C[0x0:128x128,128,1]
    VADDS.F16 UB[0x0:16x64,64,1], UB[0x800:16x64,64,1], #1.5
    VDUP.F32 UB[0x0:16x1,1,1], #-inf
    BARRIER
.core 1
"""

HEADER = (".program p target=ascend910b\n.tensor A float16 [16,16] in\n.tensor B float32 [] out\n"
          ".core 0\n")
ASCEND = load_target("ascend910b")
# Programs for no packaged target (memories spelled by role) and for each packaged one.
TARGETS: list[Target | None] = [None, *(load_target(name) for name in available_targets())]
IDENTIFIER = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True)
INT32 = st.integers(-2**31, 2**31 - 1)
#: addresses the text carries (an operand reaching 2**62 bytes or more is refused)
ADDRESS = st.integers(-2**40, 2**40)


def same(a: Program, b: Program) -> bool:
    """Equal, and bit-identical too (``==`` on floats takes -0.0 for 0.0)."""
    return a == b and all(x.tobytes() == y.tobytes() for x, y in zip(a.cores, b.cores))


# ----------------------------------------------------------------- random programs

@st.composite
def operands(draw, mem: Mem, num_symbols: int) -> Operand:
    gm = draw(st.integers(0, num_symbols - 1)) if mem == Mem.GM else -1
    rows, cols = draw(st.one_of(st.tuples(INT32, INT32), st.tuples(st.integers(0, 256),
                                                                    st.integers(0, 256))))
    small = st.integers(-4096, 4096)
    # the widest the text carries: an operand reaching 2**62 bytes or more is refused
    # (tests/test_fuzz.py and test_bad_instructions_name_line_and_column), so addresses
    # and strides stay where 2**31 rows and columns of 8-byte elements still fit
    stride = st.integers(-2**26, 2**26)
    return Operand(mem, draw(st.one_of(ADDRESS, st.integers(0, 1 << 20))),
                   rows, cols, draw(st.one_of(small, stride)), draw(st.one_of(small, stride)),
                   gm)


@st.composite
def instructions(draw, builder: StreamBuilder, num_symbols: int) -> None:
    memories = builder.memories
    on_chip = sorted(code for code in memories.names if code != Mem.GM)
    dtype = draw(st.sampled_from(ALL))
    sdtype = draw(st.one_of(st.none(), st.sampled_from(ALL)))
    flags = draw(st.sampled_from([0, F_TRANSPOSE, F_ACCUMULATE, F_TRANSPOSE | F_ACCUMULATE,
                                  F_RELU, F_ATOMIC, F_RELU | F_ATOMIC]))
    kind = draw(st.sampled_from(["copy", "mmad", "sync", "plain", "vector", "imm", "scalar",
                                 "register"]))
    if kind == "scalar":
        draw(scalar_instructions(builder))
    elif kind == "register":
        draw(register_instructions(builder, num_symbols))
    elif kind == "copy":
        src, dst = draw(st.sampled_from(sorted(memories.copy_pipes)))
        if Mem.GM in (src, dst) and not num_symbols:
            src, dst = memories.roles["vector"], memories.roles["vector"]
        ops = [draw(operands(dst, num_symbols)), draw(operands(src, num_symbols))]
        bases = {"pipe2": draw(REGISTER_BASE), "event": draw(REGISTER_BASE)}
        builder.emit(Op.COPY, *ops, dtype=dtype, sdtype=sdtype, flags=flags, **bases)
    elif kind == "mmad":
        ops = [draw(operands(memories.roles[role], num_symbols))
               for role in ("acc", "left", "right")]
        builder.emit(Op.MMAD, *ops, dtype=dtype, sdtype=sdtype, flags=flags)
    elif kind == "sync":
        op = draw(st.sampled_from([Op.SET_FLAG, Op.WAIT_FLAG]))
        pipe, pipe2 = draw(st.sampled_from(list(Pipe))), draw(st.sampled_from(list(Pipe)))
        builder.emit(op, pipe=pipe, pipe2=pipe2, event=draw(st.integers(-128, 127)),
                     flags=flags)
    elif kind == "plain":
        builder.emit(draw(st.sampled_from([Op.BARRIER, Op.SYNC_ALL, Op.NOP])), flags=flags)
    else:
        pool = sorted(SCALAR_IMM | {Op.VDUP}) if kind == "imm" else sorted(BINARY | UNARY | REDUCE)
        op = draw(st.sampled_from(pool))
        count = 3 if op in BINARY else 1 if op == Op.VDUP else 2
        mems = st.sampled_from(on_chip + ([Mem.GM] if num_symbols else []))
        ops = [draw(operands(draw(mems), num_symbols)) for _ in range(count)]
        tensors = [o.gm for o in ops if o.mem == Mem.GM]
        for o in ops:  # an instruction names at most one GM tensor
            o.gm = tensors[0] if o.mem == Mem.GM else -1
        imm = draw(st.floats(allow_nan=False)) if kind == "imm" else 0.0
        builder.emit(op, *ops, dtype=dtype, sdtype=sdtype, flags=flags, imm=imm)


# A register-based address: 0 (none) or Rn as n + 1.
REGISTER_BASE = st.sampled_from([0, 0, 0, 1, 2, 32])
REGISTER = st.integers(0, 31)


@st.composite
def scalar_instructions(draw, builder: StreamBuilder) -> None:
    """MOV, ADD, SUB, MUL with registers or an integer immediate (-1 marks it), and
    branches (their targets are drawn once the stream is complete: ``programs``)."""
    op = draw(st.sampled_from(sorted(SCALAR_ALU | BRANCHES)))
    imm_or_register = st.one_of(REGISTER, st.just(-1))
    d, a = draw(REGISTER), draw(imm_or_register if op == Op.MOV else REGISTER)
    b = 0 if op == Op.MOV else draw(imm_or_register)
    imm = float(draw(st.integers(-2**53, 2**53))) if -1 in (a, b) else 0.0
    builder.emit(op, Operand(Mem.NONE, d, 0, 0, 0, 0), Operand(Mem.NONE, a, 0, 0, 0, 0),
                 Operand(Mem.NONE, b, 0, 0, 0, 0), imm=imm)


@st.composite
def register_instructions(draw, builder: StreamBuilder, num_symbols: int) -> None:
    """VLD/VST of one whole register, at any address with a base register or none; and
    vector ops on whole registers."""
    dtype = draw(st.sampled_from(ALL))
    per_row = VECTOR_REGISTER_BYTES // dtype.itemsize
    registers = builder.memories.roles["registers"]

    def register() -> Operand:
        return Operand(registers, VECTOR_REGISTER_BYTES * draw(REGISTER), 1, per_row, per_row)

    if draw(st.booleans()):
        vector = builder.memories.roles["vector"]
        memory = Operand(vector, draw(st.one_of(ADDRESS, st.integers(0, 1 << 20))), 1, per_row,
                         per_row)
        base = draw(REGISTER_BASE)
        if draw(st.booleans()):
            builder.emit(Op.VLD, register(), memory, dtype=dtype, event=base)
        else:
            builder.emit(Op.VST, memory, register(), dtype=dtype, pipe2=base)
        return
    op = draw(st.sampled_from(sorted(BINARY | UNARY)))
    count = 3 if op in BINARY else 2
    builder.emit(op, *[register() for _ in range(count)], dtype=dtype)


def with_branch_targets(draw, stream: np.ndarray) -> np.ndarray:
    """``stream`` with each branch going to a drawn instruction (or the end)."""
    for i in np.flatnonzero(np.isin(stream["op"], [int(op) for op in BRANCHES])):
        stream["d_addr"][i] = draw(st.integers(0, len(stream)))
    return stream


@st.composite
def programs(draw) -> Program:
    """A random program, for no packaged target (``target=`` a random name) or one."""
    target = draw(st.sampled_from(TARGETS))
    names = draw(st.lists(IDENTIFIER, max_size=4, unique=True))
    symbols = tuple(
        Symbol(name, draw(st.sampled_from(ALL)),
               tuple(draw(st.lists(st.integers(0, 4096), max_size=3))),
               draw(st.sampled_from(["in", "out", "tmp"])))
        for name in names)
    name = draw(IDENTIFIER) if target is None else target.name
    known = target or (load_target(name) if name in available_targets() else None)
    # the parser refuses a core the target does not have
    most = 4 if known is None else min(4, max(known.cube_cores, known.vector_cores))
    cores = []
    for _ in range(draw(st.integers(0, most))):
        builder = StreamBuilder(target)
        for _ in range(draw(st.integers(0, 12))):
            draw(instructions(builder, len(symbols)))
        cores.append(with_branch_targets(draw, builder.array()))
    return Program(draw(IDENTIFIER), name, symbols, tuple(cores))


@settings(max_examples=200, deadline=None)
@given(programs())
def test_print_then_parse_round_trips(program: Program) -> None:
    text = print_program(program)
    back = parse(text)
    assert same(back, program)
    assert print_program(back) == text


@settings(max_examples=100, deadline=None)
@given(programs())
def test_instructions_round_trip_one_by_one(program: Program) -> None:
    target = load_target(program.target) if program.target in available_targets() else None
    for stream in program.cores:
        for row in stream.tolist():
            line = print_instruction(row, program.symbols, target)
            assert repr(parse_instruction(line, program.symbols, target=target)) == repr(row)
        if len(stream):
            assert print_instruction(stream[0], program.symbols, target) == \
                print_instruction(stream.tolist()[0], program.symbols, target)


# ----------------------------------------------------------------- fixed texts

def test_the_documented_example_round_trips() -> None:
    program = parse(EXAMPLE)
    assert print_program(program) == EXAMPLE
    assert len(program.cores) == 2 and len(program.cores[1]) == 0
    first, set_flag, wait_flag = program.cores[0][:3]
    assert (first["pipe"], first["gm"], first["a_mem"], first["a_cs"]) == (Pipe.MTE2, 0, Mem.GM, 1)
    assert (set_flag["pipe"], set_flag["pipe2"]) == (Pipe.MTE2, Pipe.MTE1)
    assert (wait_flag["pipe"], wait_flag["pipe2"]) == (Pipe.MTE1, Pipe.MTE2)
    mmad = program.cores[0][4]
    assert (mmad["dtype"], mmad["sdtype"], mmad["flags"]) == (float32.code, float16.code,
                                                             F_ACCUMULATE)
    assert program.cores[0][7]["imm"] == -math.inf
    assert program.symbols[0] == Symbol("A", float16, (1024, 1024), "in")


def test_parse_matches_stream_builder() -> None:
    builder = StreamBuilder(ASCEND)
    builder.emit(Op.COPY, Operand(Mem.VECTOR, 0x40, 16, 16, 16),
                 Operand(Mem.GM, 32, 16, 16, 64, 1, 1), dtype=float16)
    builder.emit(Op.VMULS, Operand(Mem.VECTOR, 0, 16, 16, 16),
                 Operand(Mem.VECTOR, 0x40, 16, 16, 16), dtype=float32, sdtype=float16, imm=-0.0)
    builder.emit(Op.BARRIER)
    text = (".program k target=ascend910b\n.tensor X int8 [4] tmp\n"
            ".tensor Y int32 [2,3,4] in\n.core 0\n"
            "    COPY.F16 UB[0x40:16x16,16,1], GM[Y][32:16x16,64,1]\n"
            "    VMULS.F32.F16 UB[0x0:16x16,16,1], UB[0x40:16x16,16,1], #-0.0\n"
            "    BARRIER\n")
    expected = Program("k", "ascend910b", parse(text).symbols, (builder.array(),))
    assert same(parse(text), expected)


def test_sync_all_and_atomic_copies_round_trip() -> None:
    builder = StreamBuilder(ASCEND)
    builder.emit(Op.SYNC_ALL)
    builder.emit(Op.COPY, Operand(Mem.GM, 64, 16, 16, 32, 1, 0), Operand(Mem.ACC, 0, 16, 16, 16),
                 dtype=float16, sdtype=float32, flags=F_ATOMIC)
    builder.emit(Op.COPY, Operand(Mem.GM, 0, 16, 16, 32, 1, 0), Operand(Mem.ACC, 0, 16, 16, 16),
                 dtype=float16, sdtype=float32, flags=F_RELU | F_ATOMIC)
    text = (".program k target=ascend910b\n.tensor C float16 [16,32] out\n.core 0\n"
            "    SYNC_ALL\n"
            "    COPY.F16.F32.ATOMIC GM[C][64:16x16,32,1], L0C[0x0:16x16,16,1]\n"
            "    COPY.F16.F32.RELU.ATOMIC GM[C][0:16x16,32,1], L0C[0x0:16x16,16,1]\n")
    program = Program("k", "ascend910b", (Symbol("C", float16, (16, 32), "out"),),
                      (builder.array(),))
    assert print_program(program) == text
    assert same(parse(text), program)
    assert same(parse(text.replace("SYNC_ALL", "sync_all").replace(".RELU.ATOMIC",
                                                                       ".atomic.relu")), program)
    assert program.cores[0][0]["pipe"] == Pipe.SCALAR
    with pytest.raises(AsmError, match="SYNC_ALL takes no dtype suffix"):
        parse_instruction("SYNC_ALL.F16", ())
    with pytest.raises(AsmError, match="SYNC_ALL takes no operands"):
        parse_instruction("SYNC_ALL UB[0x0:1x1,1,1]", (), target=ASCEND)


def test_parsing_is_lenient_about_space_case_and_comments() -> None:
    messy = """
; a whole-line comment
   .program   NAME   target=ascend910b   ; trailing comment
.tensor A float16 [ 1024 , 1024 ] in
.tensor C float16 [1024,1024] out

.core 0
copy.f16 l1 [ 0x0 : 128 X 256 , 256 , 1 ] ,GM [ A ] [0:128x256,1024,1]  ; load
  set_flag mte2 ,mte1,0
WAIT_FLAG MTE2,MTE1 , 0
COPY.f16.t L0B[0:64x128,128,1], L1[32768:128x64,64,1]
MMAD.F32.F16.ACC L0C[0x0:128x128,128,1], L0A[0x0:128x64,64,1], L0B[0x0:64x128,128,1]
COPY.F16.F32 GM[C][0x0:128x128,1024,1], L0C[0x0:128x128,128,1]
VADDS.F16 UB[0x0:16x64,64,1], UB[0x800:16x64,64,1], # 1.50
VDUP.F32 UB[0x0:16x1,1,1], #-INF
barrier ;
.core 1
"""
    assert print_program(parse(messy)) == EXAMPLE


@pytest.mark.parametrize("value", [math.inf, -math.inf, -0.0, 0.0, 5e-324, 1.7976931348623157e308,
                                   0.1, -1e-7])
def test_immediates_round_trip_bit_exactly(value: float) -> None:
    builder = StreamBuilder()
    builder.emit(Op.VDUP, Operand(Mem.VECTOR, 0, 1, 1, 1), dtype=float32, imm=value)
    line = print_instruction(builder.rows[0], (), ASCEND)
    assert line == f"VDUP.F32 UB[0x0:1x1,1,1], #{value!r}"
    assert repr(parse_instruction(line, (), target=ASCEND)[8]) == repr(value)


def test_nan_immediate_round_trips() -> None:
    builder = StreamBuilder()
    builder.emit(Op.VMAXS, Operand(Mem.VECTOR, 0, 1, 1, 1), Operand(Mem.VECTOR, 0, 1, 1, 1),
                 dtype=float16, imm=math.nan)
    line = print_instruction(builder.rows[0], ())
    assert line == "VMAXS.F16 VECTOR[0x0:1x1,1,1], VECTOR[0x0:1x1,1,1], #nan"  # by role
    assert math.isnan(parse_instruction(line, ())[8])


def test_empty_program_and_no_cores() -> None:
    program = Program("p", "t", (), ())
    assert print_program(program) == ".program p target=t\n"
    assert parse(".program p target=t\n") == program


# ----------------------------------------------------------------- errors

def error_of(text: str) -> AsmError:
    with pytest.raises(AsmError) as caught:
        parse(text)
    return caught.value


BAD_INSTRUCTIONS = [
    # (instruction line, words in the message, column)
    ("    VFOO.F16 UB[0x0:1x1,1,1]", "unknown opcode 'VFOO'", 5),
    ("    VADD.F64 UB[0x0:1x1,1,1]", "unexpected suffix '.F64'", 9),
    ("    VADD UB[0x0:1x1,1,1]", "needs a dtype suffix", 9),
    ("    BARRIER.F16", "takes no dtype suffix", 12),
    ("    VADD.F16 UB[0x0:1x1,1,1], UB[0x0:1x1,1,1]", "takes 3 operands (d, a, b), found 2",
     46),
    ("    VRELU.F16 UB[0x0:1x1,1,1], UB[0x0:1x1,1,1], UB[0x0:1x1,1,1]", "too many operands",
     47),
    ("    BARRIER UB[0x0:1x1,1,1]", "BARRIER takes no operands", 13),
    ("    VRELU.F16 0x0, UB[0x0:1x1,1,1]", "expected a memory operand like UB[0x0:16x16,16,1]",
     15),
    ("    VRELU.F16 L9[0x0:1x1,1,1], UB[0x0:1x1,1,1]",
     "unknown memory 'L9' on ascend910b (expected one of GM, L1, L0A, L0B, L0C, UB, Q)", 15),
    ("    VRELU.F16 VECTOR[0x0:1x1,1,1], UB[0x0:1x1,1,1]", "unknown memory 'VECTOR'", 15),
    ("    VRELU.F16 UB[0x0:1x1,1], UB[0x0:1x1,1,1]", "expected [ADDR:ROWSxCOLS,RS,CS] after UB",
     17),
    ("    VRELU.F16 UB[0x0:1x1,1,1] UB[0x0:1x1,1,1]", "expected ','", 31),
    ("    COPY.F16 UB[0x0:1x1,1,1], GM[X][0:1x1,1,1]", "unknown tensor 'X' (declared: A, B)",
     34),
    ("    COPY.F16 L0A[0x0:1x1,1,1], GM[A][0:1x1,1,1]",
     "no copy path from GM to L0A on ascend910b (COPY paths: GM->L1, GM->UB", 5),
    ("    VADD.F16 GM[A][0:1x1,1,1], GM[B][0:1x1,1,1], UB[0x0:1x1,1,1]", "only one GM tensor",
     35),
    ("    SET_FLAG MTE2, MTE9, 0", "unknown pipe", 20),
    ("    WAIT_FLAG MTE2, MTE1, x", "expected an event number", 27),
    ("    SET_FLAG MTE2, MTE1, 300", "300 is out of range for event", 26),
    ("    VRELU.F16 UB[0x0:99999999999x1,1,1], UB[0x0:1x1,1,1]", "out of range for rows", 22),
    ("    VADDS.F16 UB[0x0:1x1,1,1], UB[0x0:1x1,1,1], 1.5", "expected an immediate", 49),
    ("    VADDS.F16 UB[0x0:1x1,1,1], UB[0x0:1x1,1,1], #one", "expected a number after '#'", 49),
    ("    VADD.F16UB[0x0:1x1,1,1]", "unexpected suffix '.F16UB'", 9),
    ("    123", "expected an instruction mnemonic", 5),
]


@pytest.mark.parametrize(("line", "words", "column"), BAD_INSTRUCTIONS)
def test_bad_instructions_name_line_and_column(line: str, words: str, column: int) -> None:
    error = error_of(HEADER + line + "\n")
    assert words in str(error)
    assert (error.line, error.column, error.text) == (5, column, line)
    assert f"line 5, column {column}: " in str(error)


BAD_PROGRAMS = [
    # (text, words in the message, line, column)
    (".program p target=t\n    BARRIER\n", "instruction before .core", 2, 5),
    ("    BARRIER\n", "expected .program NAME target=TARGET", 1, 5),
    (".program p\n", "expected .program NAME target=TARGET", 1, 9),
    (".program p target=t\n.program q target=t\n", "a second .program", 2, 1),
    (".program p target=t\n.core 1\n", "expected .core 0", 2, 7),
    (".program p target=t\n.core 0\n.core 0\n", "expected .core 1", 3, 7),
    (".program p target=t\n.core\n", "expected a core number", 2, 6),
    (".program p target=t\n.kernel x\n", "unknown directive '.kernel'", 2, 1),
    (".program p target=t\n.tensor A float64 [1] in\n", "unknown dtype 'float64'", 2, 11),
    (".program p target=t\n.tensor A float16 [1,x] in\n", "non-negative integer dimension",
     2, 22),
    (".program p target=t\n.tensor A float16 [1] inout\n", "unknown role 'inout'", 2, 23),
    (".program p target=t\n.tensor A float16 [1] in\n.tensor A float16 [1] in\n",
     "declared twice", 3, 9),
    (".program p target=t\n.tensor A float16 in\n", "expected .tensor NAME DTYPE", 2, 8),
    (".program p target=t\n.core 0\n.tensor A float16 [1] in\n", ".tensor after .core", 3, 1),
    (".program p target=t extra\n", "unexpected text 'extra'", 1, 21),
    ("", "empty program", 1, None),
]


@pytest.mark.parametrize(("text", "words", "line", "column"), BAD_PROGRAMS)
def test_bad_programs_name_line_and_column(text: str, words: str, line: int,
                                           column: int | None) -> None:
    error = error_of(text)
    assert words in str(error)
    assert (error.line, error.column) == (line, column)


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_any_edit_of_good_text_parses_or_raises_asm_error(data: st.DataObject) -> None:
    text = EXAMPLE
    for _ in range(data.draw(st.integers(1, 3))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 6)))
        insert = data.draw(st.text("0123456789abxX:,[]#.-+ ;\n\tGMUBL1AFT", max_size=4))
        text = text[:start] + insert + text[end:]
    try:
        parse(text)
    except AsmError as error:
        assert error.line is not None and error.line >= 1


def test_parse_instruction_reports_its_line_number() -> None:
    with pytest.raises(AsmError, match="line 42, column 1: unknown opcode 'NOPE'"):
        parse_instruction("NOPE", (), lineno=42)
    with pytest.raises(AsmError, match="expected an instruction"):
        parse_instruction("   ; only a comment", (), lineno=3)


def unprintable(**fields: object) -> np.ndarray:
    builder = StreamBuilder()
    builder.emit(Op.VADD, *[Operand(Mem.VECTOR, 0, 1, 1, 1)] * 3, dtype=float16)
    stream = builder.array()
    for name, value in fields.items():
        stream[name] = value
    return stream


@pytest.mark.parametrize(("fields", "words"), [
    ({"pipe": Pipe.MTE2}, "field pipe is 1 but the text means 5"),
    ({"event": 3}, "field event"),
    ({"gm": 0}, "field gm"),
    ({"imm": -0.0}, "field imm"),
    ({"b_mem": 0}, "operand b has no memory"),
    ({"flags": 16}, "only .T, .ACC, .RELU, .ATOMIC exist"),
    ({"dtype": 9}, "dtype code 9"),
    ({"op": 200}, "opcode code 200"),
])
def test_printing_refuses_what_the_text_cannot_carry(fields: dict, words: str) -> None:
    program = Program("p", "t", (), (np.zeros(0, INSTR), unprintable(**fields)))
    with pytest.raises(AsmError, match="core 1, instruction 0: ") as caught:
        print_program(program)
    assert words in str(caught.value)


def test_printing_refuses_bad_names() -> None:
    with pytest.raises(AsmError, match="program name"):
        print_program(Program("two words", "t", (), ()))
    with pytest.raises(AsmError, match="tensor 'a b'"):
        print_program(Program("p", "t", (Symbol("a b", float16, (1,), "in"),), ()))


# ----------------------------------------------------------------- memory names

def test_memories_are_spelled_as_the_target_names_them() -> None:
    """The ISA codes memories by role; each target's names are what the text carries."""
    mlu = load_target("mlu370")
    text = (".program k target=mlu370\n.tensor A float16 [16,16] in\n.core 0\n"
            "    COPY.F16 SRAM[0x0:16x16,16,1], GM[A][0:16x16,16,1]\n"
            "    COPY.F16 NRAM[0x0:16x16,16,1], SRAM[0x0:16x16,16,1]\n"
            "    VEXP.F16 NRAM[0x200:16x16,16,1], NRAM[0x0:16x16,16,1]\n")
    program = parse(text)
    first, second, third = program.cores[0]
    assert (first["d_mem"], first["pipe"]) == (Mem.STAGE, Pipe.MTE2)
    assert (second["d_mem"], second["a_mem"], second["pipe"]) == (Mem.LEFT, Mem.STAGE, Pipe.MTE1)
    assert third["d_mem"] == third["a_mem"] == memory_map(mlu).roles["vector"] == Mem.LEFT
    assert print_program(program) == text
    assert print_program(program, mlu) == text
    # for a target that is not packaged: by role, unless the Target is passed
    data = mlu.to_dict()
    data["target"]["name"] = "mine"
    mine = Program("k", "mine", program.symbols, program.cores)
    assert print_program(mine, Target.from_dict(data)) == text.replace("mlu370", "mine")
    assert "COPY.F16 LEFT[0x0:16x16,16,1], STAGE[0x0:16x16,16,1]" in print_program(mine)
    assert same(parse(print_program(mine)), mine)


def test_the_same_code_prints_each_targets_name() -> None:
    builder = StreamBuilder()
    builder.emit(Op.VEXP, Operand(Mem.LEFT, 0, 1, 16, 16), Operand(Mem.LEFT, 0, 1, 16, 16),
                 dtype=float16)
    row = builder.rows[0]
    assert print_instruction(row, (), ASCEND).startswith("VEXP.F16 L0A[")
    assert print_instruction(row, (), load_target("mlu370")).startswith("VEXP.F16 NRAM[")
    assert print_instruction(row, ()).startswith("VEXP.F16 LEFT[")


def test_a_role_a_target_codes_otherwise_does_not_print() -> None:
    """On an MLU the vector memory is NRAM, coded LEFT: VECTOR names nothing there."""
    builder = StreamBuilder()
    builder.emit(Op.VEXP, Operand(Mem.VECTOR, 0, 1, 16, 16), Operand(Mem.VECTOR, 0, 1, 16, 16),
                 dtype=float16)
    with pytest.raises(AsmError, match="in VECTOR, a memory code mlu370 does not use"):
        print_instruction(builder.rows[0], (), load_target("mlu370"))


def test_copy_pipes_come_from_the_target() -> None:
    """A target that runs a path on another pipe gets COPYs on that pipe."""
    data = ASCEND.to_dict()
    data["target"]["name"] = "slow_l1"
    data["paths"]["GM->L1"]["pipe"] = "MTE3"
    custom = Target.from_dict(data)
    operands = (Operand(Mem.STAGE, 0, 16, 16, 16), Operand(Mem.GM, 0, 16, 16, 16, gm=0))
    mine, packaged = StreamBuilder(custom), StreamBuilder(ASCEND)
    mine.emit(Op.COPY, *operands, dtype=float16)
    packaged.emit(Op.COPY, *operands, dtype=float16)
    assert mine.array()["pipe"][0] == Pipe.MTE3 and packaged.array()["pipe"][0] == Pipe.MTE2
    line = "COPY.F16 L1[0x0:16x16,16,1], GM[A][0:16x16,16,1]"
    symbols = (Symbol("A", float16, (16, 16), "in"),)
    assert parse_instruction(line, symbols, target=custom)[1] == Pipe.MTE3
    assert print_instruction(mine.rows[0], symbols, custom) == line
    with pytest.raises(AsmError, match="field pipe is 6 but the text means 1"):
        print_instruction(mine.rows[0], symbols, ASCEND)
    assert isa_view().copy_pipe(Mem.GM, Mem.STAGE) == Pipe.MTE2
