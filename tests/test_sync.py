"""The compiled code-generation helpers (``pypto/codegen/_sync.pyx``) against their
Python specifications: the synchronization pass (``sync.insert_sync_reference``), row
building (``program.emit_reference``) and packing (``np.array(rows, dtype=INSTR)``).

Byte for byte, on (a) the streams codegen makes for random small matmul, vector and
conv2d workloads under random schedules, with the targets' event ids and with only 1-3
(so the "out of event ids" path runs), and (b) random hand-built streams of overlapping
regions on a few memories and pipes. Then whole lowerings with and without the
extension.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pypto
from pypto import native
from pypto.codegen import lower as lowering
from pypto.codegen import sync
from pypto.codegen.isa import F_ACCUMULATE, INSTR, Mem, Op, Pipe
from pypto.codegen.program import Operand, StreamBuilder, emit_reference
from pypto.errors import PyptoError
from pypto.ir.dtypes import float16, float32, int8, int32
from pypto.targets import available_targets, load_target
from tests.strategies import dims, random_schedule

_sync = pytest.importorskip("pypto.codegen._sync", reason="the compiled pass is not built")

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
TARGETS = {name: load_target(name) for name in available_targets()}


def reference(stream: np.ndarray, event_ids: int) -> np.ndarray:
    rows = sync.insert_sync_reference(stream.tolist(), event_ids)
    return np.array(rows, dtype=INSTR) if rows else np.zeros(0, dtype=INSTR)


def assert_same_sync(stream: np.ndarray, event_ids: int) -> np.ndarray:
    """The compiled pass gives the reference's bytes (or both raise the same error)."""
    try:
        want = reference(stream, event_ids)
    except PyptoError as error:
        with pytest.raises(PyptoError) as raised:
            _sync.insert_sync(stream, event_ids)
        assert str(raised.value) == str(error)
        return stream
    got = _sync.insert_sync(stream, event_ids)
    assert got is not None, "a codegen-like stream left the compiled pass's domain"
    assert got.dtype == INSTR and got.tobytes() == want.tobytes()
    return got


# -- (a) streams from code generation -------------------------------------------------------

def unsynced_streams(wl, schedule, target) -> list[np.ndarray]:  # type: ignore[no-untyped-def]
    """The per-core streams ``lower`` hands to the sync pass."""
    seen: list[np.ndarray] = []

    def record(stream: np.ndarray, event_ids: int) -> np.ndarray:
        seen.append(stream)
        return stream

    original = lowering.insert_sync
    lowering.insert_sync = record  # type: ignore[assignment]
    try:
        lowering.lower(wl, schedule, target)
    finally:
        lowering.insert_sync = original
    return seen


@st.composite
def small_workloads(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    """(workload, target) of a random small matmul, vector chain or conv2d."""
    target = TARGETS[draw(st.sampled_from(sorted(TARGETS)), label="target")]
    kind = draw(st.sampled_from(["matmul", "matmul_epilogue", "vector", "softmax", "conv2d"]))
    f16 = "float16"
    if kind.startswith("matmul"):
        m, n, k = (draw(st.integers(1, 160)) for _ in range(3))
        ta, tb = draw(st.booleans()), draw(st.booleans())
        dtype = f16 if kind != "matmul" else draw(st.sampled_from([f16, "float32", "int8"]))
        specs = [pypto.spec((k, m) if ta else (m, k), dtype),
                 pypto.spec((n, k) if tb else (k, n), dtype)]
        if kind == "matmul":
            def fn(a, b):  # type: ignore[no-untyped-def]
                return pypto.matmul(a, b, transpose_a=ta, transpose_b=tb)
        else:
            specs.append(pypto.spec((n,), f16))

            def fn(a, b, bias):  # type: ignore[no-untyped-def]
                return pypto.relu(pypto.matmul(a, b, transpose_a=ta, transpose_b=tb) + bias)
    elif kind == "vector":
        shape = draw(dims(max_rank=3, max_size=64))
        specs = [pypto.spec(shape, f16), pypto.spec(shape, f16)]

        def fn(a, b):  # type: ignore[no-untyped-def]
            return pypto.sum(pypto.exp(a) * b + a, axis=-1)
    elif kind == "softmax":
        shape = draw(dims(max_rank=2, max_size=64))
        specs = [pypto.spec(shape, "float32")]

        def fn(a):  # type: ignore[no-untyped-def]
            return pypto.softmax(a, axis=-1)
    else:
        c, k = draw(st.integers(1, 20)), draw(st.integers(1, 20))
        h, w = draw(st.integers(3, 10)), draw(st.integers(3, 10))
        specs = [pypto.spec((1, c, h, w), f16), pypto.spec((k, c, 3, 3), f16)]

        def fn(x, wt):  # type: ignore[no-untyped-def]
            return pypto.relu(pypto.conv2d(x, wt, padding=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = pypto.kernel(fn).lower(*specs, target=target)
    families = [wl.family for wl in compiled.workloads]
    wanted = "conv2d" if kind == "conv2d" else "vector" if kind in ("vector", "softmax") \
        else "matmul"
    wl = compiled.workloads[families.index(wanted) if wanted in families else -1]
    return wl, compiled.target


@settings(SETTINGS, max_examples=120)
@given(st.data(), small_workloads())
def test_compiled_pass_equals_reference_on_generated_code(data, case):
    wl, target = case
    schedule = data.draw(random_schedule(wl, target))
    for stream in unsynced_streams(wl, schedule, target):
        assert_same_sync(stream, target.event_ids)
        assert_same_sync(stream, data.draw(st.integers(1, 3), label="few event ids"))


def test_default_gemm_streams_are_identical():
    """A whole 256^3 GEMM under its default schedule, on every target."""
    for target in TARGETS.values():
        compiled = pypto.kernel(lambda a, b: pypto.matmul(a, b)).lower(
            pypto.spec((256, 256), "float16"), pypto.spec((256, 256), "float16"),
            target=target)
        wl, schedule = compiled.workloads[0], compiled.schedules[0]
        for stream in unsynced_streams(wl, schedule, target):
            assert_same_sync(stream, target.event_ids)
            assert_same_sync(stream, 1)


# -- (b) hand-built streams -------------------------------------------------------------------

# A few memories with small address ranges, so regions overlap often.
MEMS = (Mem.STAGE, Mem.LEFT, Mem.ACC, Mem.VECTOR)
CODES = (float16.code, float32.code, int8.code, int32.code)
OPS = (Op.COPY, Op.MMAD, Op.VADD, Op.VEXP, Op.NOP, Op.BARRIER, Op.SYNC_ALL,
       Op.SET_FLAG, Op.WAIT_FLAG)


@st.composite
def region(draw: st.DrawFn) -> tuple:
    """(mem, addr, rows, cols, rs, cs): mostly on-chip and overlapping, sometimes GM,
    empty (no rows or columns) or absent."""
    kind = draw(st.sampled_from(["chip"] * 6 + ["gm", "empty", "none"]))
    if kind == "none":
        return (0, 0, 0, 0, 0, 0)
    mem = Mem.GM if kind == "gm" else draw(st.sampled_from(MEMS))
    rows, cols = draw(st.integers(1, 8)), draw(st.integers(1, 64))
    if kind == "empty":
        rows = draw(st.sampled_from([0, -1]))
    addr = 32 * draw(st.integers(0, 200)) + draw(st.sampled_from([0, 0, 0, 2, 7]))
    rs = draw(st.sampled_from([cols, cols + 16, 0, 1, 256]))
    cs = draw(st.sampled_from([1, 1, 2, 0]))
    return (int(mem), addr, rows, cols, rs, cs)


@st.composite
def hand_row(draw: st.DrawFn) -> tuple:
    op = draw(st.sampled_from(OPS))
    pipe = draw(st.sampled_from(list(Pipe)))
    flags = draw(st.sampled_from([0, F_ACCUMULATE, 1, 3]))
    operands = [draw(region()) for _ in range(3)]
    return (int(op), int(pipe), int(draw(st.sampled_from(list(Pipe)))), draw(st.integers(0, 2)),
            draw(st.sampled_from(CODES)), draw(st.sampled_from(CODES)), flags,
            draw(st.integers(-1, 3)), 0.0, *operands[0], *operands[1], *operands[2])


@settings(max_examples=400, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(hand_row(), max_size=120), st.integers(1, 3))
def test_compiled_pass_equals_reference_on_hand_built_streams(rows, event_ids):
    stream = np.array(rows, dtype=INSTR) if rows else np.zeros(0, dtype=INSTR)
    assert_same_sync(stream, event_ids)
    assert_same_sync(stream, 8)
    # the list form returns lists
    assert sync.insert_sync(rows, event_ids) == sync.insert_sync_reference(rows, event_ids)


def test_out_of_event_ids_moves_the_set_later():
    """Three loads then three uses with one event id: the second set has to wait until
    the first flag is consumed, so it moves after the first wait (past the third load,
    whose use then needs no flag of its own)."""
    b = StreamBuilder()
    for slot in range(3):
        b.emit(Op.COPY, Operand(Mem.STAGE, 4096 * slot, 16, 16, 16),
               Operand(Mem.GM, 256 * slot, 16, 16, 16, gm=0), dtype=float16)
    for slot in range(3):
        b.emit(Op.COPY, Operand(Mem.LEFT, 512 * slot, 16, 16, 16),
               Operand(Mem.STAGE, 4096 * slot, 16, 16, 16), dtype=float16)
    ops = [Op(op).name for op in assert_same_sync(b.array(), 1)["op"]]
    assert ops == ["COPY", "SET_FLAG", "COPY", "COPY", "WAIT_FLAG", "COPY", "SET_FLAG",
                   "WAIT_FLAG", "COPY", "COPY"]
    ops = [Op(op).name for op in assert_same_sync(b.array(), 8)["op"]]
    assert ops[:6] == ["COPY", "SET_FLAG", "COPY", "SET_FLAG", "COPY", "SET_FLAG"]


def _two_copies() -> np.ndarray:
    b = StreamBuilder()
    b.emit(Op.COPY, Operand(Mem.STAGE, 0, 4, 16, 16), Operand(Mem.GM, 0, 4, 16, 16, gm=0),
           dtype=float16)
    b.emit(Op.COPY, Operand(Mem.LEFT, 0, 4, 16, 16), Operand(Mem.STAGE, 0, 4, 16, 16),
           dtype=float16)
    return b.array()


@pytest.mark.parametrize("change", [
    {"d_rs": -40},               # a region of no bytes: the reference's buckets decide
    {"pipe": 7},                 # a pipe the Pipe enum lacks
    {"dtype": 9},                # a dtype code the reference has no size for
])
def test_streams_outside_the_domain_go_to_the_reference(change):
    stream = _two_copies()
    for name, value in change.items():
        stream[name][0] = value
    assert _sync.insert_sync(stream, 8) is None
    try:
        want = reference(stream, 8)
    except (KeyError, ValueError) as error:
        with pytest.raises(type(error)):
            sync.insert_sync(stream, 8)
    else:
        assert sync.insert_sync(stream, 8).tobytes() == want.tobytes()


def test_strides_an_end_address_could_overflow_with_are_left_to_the_reference():
    # (the reference itself would walk 2**32 address buckets here, so it is not run)
    stream = _two_copies()
    stream["d_rs"][0] = 1 << 40
    assert _sync.insert_sync(stream, 8) is None
    stream = _two_copies()
    assert _sync.insert_sync(stream, 0) is None and _sync.insert_sync(stream, 128) is None


# -- row building and packing -------------------------------------------------------------

@st.composite
def operand(draw: st.DrawFn) -> Operand:
    mem = draw(st.sampled_from(list(Mem)[1:]))
    return Operand(mem, draw(st.integers(-5, 1 << 20)), draw(st.integers(0, 64)),
                   draw(st.integers(0, 64)), draw(st.integers(-3, 300)), draw(st.integers(0, 4)),
                   gm=draw(st.integers(-1, 5)))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_compiled_emit_and_pack_equal_the_reference(data):
    compiled, ref = StreamBuilder(), StreamBuilder()
    for _ in range(data.draw(st.integers(0, 12))):
        op = data.draw(st.sampled_from(list(Op)))
        operands = data.draw(st.lists(operand(), max_size=4))
        kwargs = {}
        if data.draw(st.booleans()):
            kwargs["dtype"] = data.draw(st.sampled_from([float16, float32, int8, int32]))
        if data.draw(st.booleans()):
            kwargs["sdtype"] = data.draw(st.sampled_from([float16, float32, int8, int32]))
        if data.draw(st.booleans()):
            kwargs["imm"] = data.draw(st.one_of(st.floats(allow_nan=False), st.integers(-9, 9)))
        if op not in (Op.COPY,) or data.draw(st.booleans()):
            kwargs["pipe"] = data.draw(st.sampled_from(list(Pipe)))
        kwargs.update(flags=data.draw(st.integers(0, 15)), event=data.draw(st.integers(0, 7)),
                      pipe2=data.draw(st.sampled_from(list(Pipe))))
        try:
            want = emit_reference(ref, op, *operands, **kwargs)
        except ValueError:  # no copy path between these memories
            with pytest.raises(ValueError):
                compiled.emit(op, *operands, **kwargs)
            continue
        assert compiled.emit(op, *operands, **kwargs) == want
    assert compiled.rows == ref.rows
    assert [tuple(map(type, r)) for r in compiled.rows] == [tuple(map(type, r)) for r in ref.rows]
    assert compiled.array().tobytes() == np.array(ref.rows, dtype=INSTR).tobytes() \
        if ref.rows else len(compiled.array()) == 0


def test_pack_leaves_what_it_cannot_pack_to_numpy():
    row = (1, 1, 0, 0, 0, 0, 0, -1, 0.0) + (2, 0, 4, 4, 4, 1) * 3
    assert _sync.pack([row]).tobytes() == np.array([row], dtype=INSTR).tobytes()
    for bad in ([row[:5]], [list(row)], [(300,) + row[1:]], [row[:9] + (np.int64(2),) + row[10:]],
                [row[:8] + ("x",) + row[9:]]):
        assert _sync.pack(bad) is None


# -- whole lowerings ------------------------------------------------------------------------

@SETTINGS
@given(st.data(), small_workloads())
def test_lowering_is_identical_without_the_extension(data, case):
    wl, target = case
    schedule = data.draw(random_schedule(wl, target))
    fast = lowering.lower(wl, schedule, target)
    with native.force_python():
        assert StreamBuilder().emit.__func__ is emit_reference
        assert sync._extension() is None
        slow = lowering.lower(wl, schedule, target)
    assert fast == slow
    assert [c.tobytes() for c in fast.cores] == [c.tobytes() for c in slow.cores]


def test_missing_extension_warns_once():
    with native.not_built("pypto.codegen._sync"):
        with pytest.warns(RuntimeWarning, match="pip install -e .") as caught:
            b = StreamBuilder()
        assert caught[0].filename == __file__  # points at the caller
        b.emit(Op.COPY, Operand(Mem.STAGE, 0, 4, 16, 16), Operand(Mem.GM, 0, 4, 16, 16, gm=0),
               dtype=float16)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            first = sync.insert_sync(b.array(), 8)
            again = sync.insert_sync(b.array(), 8)
    assert first.tobytes() == again.tobytes() == reference(b.array(), 8).tobytes()
