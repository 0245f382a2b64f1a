"""``Workload.key``, ``Workload.family_key`` and ``Schedule.key`` (DESIGN §3, STYLE practice 1).

A key is the sha256 of canonical JSON: equal values anywhere share it, and changing any
field changes it. ``family_key`` drops the sizes only, so nearest-shape lookup can find
the same computation at another shape but never another op chain, dtype or layout.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pypto
from pypto.ir.workload import TensorSpec, WNode, Workload
from pypto.schedule_space import Schedule

ROOT = Path(__file__).resolve().parent.parent
HEX64 = re.compile(r"[0-9a-f]{64}")
F16, F32 = "float16", "float32"


def spec(*shape: int, dtype: str = F16, layout: str | None = None) -> pypto.frontend.kernel.Spec:
    return pypto.spec(shape, dtype, layout=layout)


def only_workload(fn: Callable[..., Any], *specs: Any, **options: Any) -> Workload:
    workloads = pypto.kernel(**options)(fn).lower(*specs).workloads
    assert len(workloads) == 1, workloads
    return workloads[0]


def hand_built() -> Workload:
    """relu(A @ B) for A [32, 48], B [48, 64] in float16, built without the frontend."""
    return Workload(
        family="matmul",
        inputs=(TensorSpec((32, 48), F16), TensorSpec((48, 64), F16)),
        nodes=(
            WNode("load", (), (("input", 0), ("offset", 0), ("strides", (48, 1))), (32, 48), F16),
            WNode("load", (), (("input", 1), ("offset", 0), ("strides", (64, 1))), (48, 64), F16),
            WNode("matmul", (0, 1), (("transpose_a", False), ("transpose_b", False)), (32, 64),
                  F16),
            WNode("add_scalar", (2,), (("value", 0.1),), (32, 64), F16),
            WNode("relu", (3,), (), (32, 64), F16),
        ),
        outputs=(4,),
        attrs=(("space", (32, 64)),),
    )


# -- key format and canonical JSON -------------------------------------------------------------


def test_key_is_sha256_hex_of_canonical_json() -> None:
    wl = hand_built()
    assert HEX64.fullmatch(wl.key) and HEX64.fullmatch(wl.family_key)
    text = wl.canonical_json()
    assert wl.key == hashlib.sha256(text.encode()).hexdigest()
    # Canonical: sorted keys, no whitespace, re-serialising gives the same text.
    assert json.dumps(json.loads(text), sort_keys=True, separators=(",", ":")) == text
    assert " " not in text
    # Floats are written exactly (hex), never by chance formatting.
    assert (0.1).hex() in text and "0.1," not in text and "0.1}" not in text


def test_equal_workloads_share_the_key() -> None:
    a, b = hand_built(), hand_built()
    assert a is not b and a == b
    assert a.key == b.key and a.family_key == b.family_key


def test_key_is_stable_across_processes() -> None:
    probe = (
        "import pypto\n"
        "from pypto.schedule_space import Schedule\n"
        "from tests.test_workload_key import hand_built\n"
        "wl = pypto.kernel(lambda a, b: pypto.softmax(a @ b)).lower("
        "pypto.spec((16, 32), 'float32'), pypto.spec((32, 64), 'float32')).workloads\n"
        "sched = Schedule(z=1, a='x', m=True)\n"
        "print(' '.join([w.key for w in wl] + [w.family_key for w in wl]"
        " + [hand_built().key, sched.key]))\n"
    )
    here_wl = pypto.kernel(lambda a, b: pypto.softmax(a @ b)).lower(
        pypto.spec((16, 32), F32), pypto.spec((32, 64), F32)).workloads
    here = ([w.key for w in here_wl] + [w.family_key for w in here_wl]
            + [hand_built().key, Schedule(m=True, a="x", z=1).key])
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == here


# -- every field changes the key ---------------------------------------------------------------


def replace_node(wl: Workload, index: int, **changes: Any) -> Workload:
    nodes = list(wl.nodes)
    nodes[index] = dataclasses.replace(nodes[index], **changes)
    return dataclasses.replace(wl, nodes=tuple(nodes))


def replace_input(wl: Workload, index: int, **changes: Any) -> Workload:
    inputs = list(wl.inputs)
    inputs[index] = dataclasses.replace(inputs[index], **changes)
    return dataclasses.replace(wl, inputs=tuple(inputs))


def replace_attr(attrs: tuple, name: str, value: Any) -> tuple:
    return tuple(sorted({**dict(attrs), name: value}.items()))


_W = hand_built()
# (name, changed workload, whether the change is only a size, so family_key stays)
VARIANTS: list[tuple[str, Workload, bool]] = [
    ("family", dataclasses.replace(_W, family="vector"), False),
    ("input shape", replace_input(_W, 0, shape=(16, 48)), True),
    ("input rank", replace_input(_W, 0, shape=(1, 32, 48)), False),
    ("input dtype", replace_input(_W, 1, dtype=F32), False),
    ("input layout", replace_input(_W, 1, layout="NZ"), False),
    ("inputs reordered", dataclasses.replace(_W, inputs=_W.inputs[::-1]), True),
    ("input added", dataclasses.replace(_W, inputs=_W.inputs + (TensorSpec((64,), F16),)),
     False),
    ("node op", replace_node(_W, 4, op="gelu"), False),
    ("node args", replace_node(_W, 2, args=(1, 0)), False),
    ("node attr value", replace_node(_W, 2, attrs=replace_attr(_W.nodes[2].attrs,
                                                                "transpose_b", True)), False),
    ("node attr added", replace_node(_W, 4, attrs=(("alpha", 2),)), False),
    ("node attr bool vs int", replace_node(_W, 2, attrs=replace_attr(_W.nodes[2].attrs,
                                                                      "transpose_b", 0)), False),
    ("float attr by one ulp", replace_node(_W, 3, attrs=(("value", 0.10000000000000002),)),
     False),
    ("float attr int-valued", replace_node(_W, 3, attrs=(("value", 1.0),)), False),
    ("int attr", replace_node(_W, 3, attrs=(("value", 1),)), False),
    ("load input index", replace_node(_W, 0, attrs=replace_attr(_W.nodes[0].attrs,
                                                                 "input", 1)), False),
    ("load offset", replace_node(_W, 0, attrs=replace_attr(_W.nodes[0].attrs, "offset", 16)),
     True),
    ("load strides", replace_node(_W, 1, attrs=replace_attr(_W.nodes[1].attrs,
                                                             "strides", (1, 48))), True),
    ("node shape", replace_node(_W, 4, shape=(32, 32)), True),
    ("node rank", replace_node(_W, 4, shape=(1, 32, 64)), False),
    ("node dtype", replace_node(_W, 4, dtype=F32), False),
    ("node added", dataclasses.replace(_W, nodes=_W.nodes + (WNode("exp", (4,), (), (32, 64),
                                                                     F16),)), False),
    ("outputs", dataclasses.replace(_W, outputs=(3,)), False),
    ("outputs added", dataclasses.replace(_W, outputs=(2, 4)), False),
    ("attrs space", dataclasses.replace(_W, attrs=(("space", (16, 64)),)), True),
    ("attrs added", dataclasses.replace(_W, attrs=_W.attrs + (("split_k", 2),)), False),
]


@pytest.mark.parametrize("name, changed, size_only", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_changing_any_field_changes_the_key(name, changed, size_only) -> None:
    base = hand_built()
    assert changed.key != base.key, name
    if size_only:
        assert changed.family_key == base.family_key, name
    else:
        assert changed.family_key != base.family_key, name


def test_workload_equality_agrees_with_the_key() -> None:
    base = hand_built()
    for _, changed, _ in VARIANTS:
        assert (changed == base) == (changed.key == base.key)
    as_int = replace_node(base, 3, attrs=(("value", 1),))
    as_float = replace_node(base, 3, attrs=(("value", 1.0),))
    assert (as_int == as_float) == (as_int.key == as_float.key)


def test_all_variants_have_distinct_keys() -> None:
    keys = [hand_built().key] + [v[1].key for v in VARIANTS]
    assert len(set(keys)) == len(keys)


# -- workloads from kernels ------------------------------------------------------------------

KERNELS: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
    ("mm f16 32x48x64", lambda a, b: a @ b, (spec(32, 48), spec(48, 64))),
    ("mm f16 64x48x64", lambda a, b: a @ b, (spec(64, 48), spec(48, 64))),
    ("mm f16 32x48x32", lambda a, b: a @ b, (spec(32, 48), spec(48, 32))),
    ("mm f16 32x96x64", lambda a, b: a @ b, (spec(32, 96), spec(96, 64))),
    ("mm f32 32x48x64", lambda a, b: a @ b, (spec(32, 48, dtype=F32), spec(48, 64, dtype=F32))),
    ("mm int8", lambda a, b: a @ b, (spec(32, 64, dtype="int8"), spec(64, 32, dtype="int8"))),
    ("mm b.T", lambda a, b: a @ b.T, (spec(32, 48), spec(64, 48))),
    ("mm relu", lambda a, b: pypto.relu(a @ b), (spec(32, 48), spec(48, 64))),
    ("mm gelu", lambda a, b: pypto.gelu(a @ b), (spec(32, 48), spec(48, 64))),
    ("mm + bias", lambda a, b, c: a @ b + c, (spec(32, 48), spec(48, 64), spec(64))),
    ("batched mm", lambda a, b: a @ b, (spec(2, 32, 48), spec(48, 64))),
    ("add f16", lambda x, y: x + y, (spec(16, 64), spec(16, 64))),
    ("add f32", lambda x, y: x + y, (spec(16, 64, dtype=F32), spec(16, 64, dtype=F32))),
    ("mul f16", lambda x, y: x * y, (spec(16, 64), spec(16, 64))),
    ("add 3-D", lambda x, y: x + y, (spec(2, 8, 64), spec(2, 8, 64))),
    ("add NHWC", lambda x, y: x + y, (spec(1, 4, 4, 64, layout="NHWC"),
                                      spec(1, 4, 4, 64, layout="NHWC"))),
    ("add NCHW", lambda x, y: x + y, (spec(1, 4, 4, 64, layout="NCHW"),
                                      spec(1, 4, 4, 64, layout="NCHW"))),
    ("add + 0.5", lambda x: x + 0.5, (spec(16, 64),)),
    ("add + 0.25", lambda x: x + 0.25, (spec(16, 64),)),
    ("relu", lambda x: pypto.relu(x), (spec(16, 64),)),
    ("exp", lambda x: pypto.exp(x), (spec(16, 64),)),
    ("softmax 16x64", lambda x: pypto.softmax(x), (spec(16, 64, dtype=F32),)),
    ("softmax 32x128", lambda x: pypto.softmax(x), (spec(32, 128, dtype=F32),)),
    ("row sum", lambda x: x.sum(axis=-1), (spec(16, 64, dtype=F32),)),
    ("row max", lambda x: x.max(axis=-1), (spec(16, 64, dtype=F32),)),
]


@pytest.fixture(scope="module")
def lowered() -> dict[str, Workload]:
    return {name: only_workload(fn, *specs) for name, fn, specs in KERNELS}


def test_different_kernels_give_different_keys(lowered) -> None:
    keys = {name: wl.key for name, wl in lowered.items()}
    assert all(HEX64.fullmatch(k) for k in keys.values())
    assert len(set(keys.values())) == len(keys), keys


@pytest.mark.parametrize("same", [
    ("mm f16 32x48x64", "mm f16 64x48x64"), ("mm f16 32x48x64", "mm f16 32x48x32"),
    ("mm f16 32x48x64", "mm f16 32x96x64"), ("softmax 16x64", "softmax 32x128"),
])
def test_family_key_ignores_sizes(lowered, same) -> None:
    a, b = (lowered[n] for n in same)
    assert a.key != b.key
    assert a.family_key == b.family_key


@pytest.mark.parametrize("different", [
    ("mm f16 32x48x64", "mm f32 32x48x64"),      # dtype
    ("mm f16 32x48x64", "mm int8"),
    ("mm f16 32x48x64", "relu"),                 # matmul vs vector
    ("mm f16 32x48x64", "mm relu"),              # epilogue
    ("mm relu", "mm gelu"),
    ("mm f16 32x48x64", "mm b.T"),               # transpose
    ("mm f16 32x48x64", "batched mm"),
    ("add f16", "add f32"),
    ("add f16", "mul f16"),
    ("add f16", "add 3-D"),                      # rank
    ("add NHWC", "add NCHW"),                    # layout
    ("add + 0.5", "add + 0.25"),                 # a constant is not a size
    ("row sum", "row max"),
])
def test_family_key_keeps_everything_but_sizes(lowered, different) -> None:
    a, b = (lowered[n] for n in different)
    assert a.family_key != b.family_key


def test_same_workload_from_different_kernels_shares_the_key() -> None:
    specs = (spec(16, 64), spec(16, 64))

    def first(a, b):
        return pypto.relu(a + b)

    def second(lhs, rhs):
        return pypto.relu(lhs + rhs)

    def third(p, q):
        unrelated = pypto.exp(q) * 2.0                  # traced first: shifts node ids
        return pypto.relu(p + q), unrelated

    one = only_workload(first, *specs)
    assert only_workload(second, *specs).key == one.key
    assert only_workload(lambda x, y: pypto.relu(x + y), *specs).key == one.key
    from_tensors = pypto.kernel(second).lower(pypto.ones((16, 64)), pypto.zeros((16, 64)))
    assert from_tensors.workloads[0].key == one.key
    third_keys = [w.key for w in pypto.kernel(third).lower(*specs).workloads]
    assert one.key in third_keys


def test_key_does_not_depend_on_the_target() -> None:
    specs = (spec(32, 48), spec(48, 64))
    on_910b = pypto.kernel(lambda a, b: a @ b).lower(*specs)
    on_310 = pypto.kernel(lambda a, b: a @ b).lower(*specs, target="ascend310")
    assert on_910b.workloads[0].key == on_310.workloads[0].key


# -- Schedule -------------------------------------------------------------------------------


def test_schedule_json_and_key_are_order_independent() -> None:
    a = Schedule({"n1": 64, "m1": 32, "cores": 2})
    b = Schedule(cores=2, m1=32, n1=64)
    c = Schedule({"m1": 32}, cores=2, n1=64)
    assert a.to_json() == b.to_json() == c.to_json() == '{"cores":2,"m1":32,"n1":64}'
    assert a.key == b.key == c.key and HEX64.fullmatch(a.key)
    assert a.key == hashlib.sha256(a.to_json().encode()).hexdigest()
    assert a == b and hash(a) == hash(b)
    assert Schedule.from_json(a.to_json()) == a
    assert Schedule.from_json('{"n1": 64, "cores": 2, "m1": 32}').key == a.key
    assert list(a) == ["cores", "m1", "n1"]


def test_changing_any_knob_changes_the_schedule_key() -> None:
    base = pypto.kernel(lambda x, y: x @ y).lower(spec(64, 64), spec(64, 64)).schedules[0]
    assert len(base) >= 5
    keys = {base.key}
    for knob, value in base.items():
        changed = base.replace(**{knob: value + "x" if isinstance(value, str) else value + 1})
        assert changed.key != base.key and changed != base, knob
        assert base[knob] == value                          # the original is unchanged
        keys.add(changed.key)
    keys.add(base.replace(extra=1).key)                     # a new knob
    keys.add(Schedule({k: v for k, v in base.items() if k != "cores"}).key)  # a dropped knob
    assert len(keys) == len(base) + 3


def test_schedule_values_of_different_types_have_different_keys() -> None:
    keys = {Schedule(x=1).key, Schedule(x=True).key, Schedule(x="1").key, Schedule(x=0).key,
            Schedule(y=1).key}
    assert len(keys) == 5


def test_schedule_is_immutable_and_rejects_non_json_values() -> None:
    s = Schedule(m1=32)
    with pytest.raises(TypeError):
        s["m1"] = 64  # type: ignore[index]
    with pytest.raises(pypto.ScheduleError, match="m1"):
        Schedule(m1=32.0)
    with pytest.raises(pypto.ScheduleError):
        Schedule({1: 2})  # type: ignore[dict-item]
    with pytest.raises(pypto.ScheduleError, match="tiles"):
        Schedule(tiles=[1, 2])
