"""Target descriptors: the shipped files hold the published figures, and a bad file is a
``TargetError`` that names the file and the field, never a traceback from inside."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
import re

import pytest

from pypto.errors import TargetError
from pypto.targets import Memory, Path, Target, available_targets, load_target
from pypto.targets.target import PACKAGE_DIR, PIPES, ROLES

KIB, MIB = 1024, 1024 * 1024
TARGETS = ("ascend910b", "ascend310")


def source_text(name: str = "ascend910b") -> str:
    return (PACKAGE_DIR / f"{name}.toml").read_text()


def variant(tmp_path: pathlib.Path, old: str, new: str, name: str = "ascend910b",
            count: int = 1) -> pathlib.Path:
    """A copy of a shipped descriptor with ``old`` (a regex, matched ``count`` times)
    replaced by ``new``."""
    text, n = re.subn(old, new, source_text(name), flags=re.MULTILINE)
    assert n == count, f"pattern {old!r} matched {n} times in {name}.toml"
    path = tmp_path / f"{name}_variant.toml"
    path.write_text(text)
    return path


# -- the shipped targets ------------------------------------------------------------------


def test_both_targets_ship_and_load() -> None:
    assert set(TARGETS) <= set(available_targets())
    for name in TARGETS:
        target = load_target(name)
        assert isinstance(target, Target)
        assert target.name == name
        assert load_target(name) is target                    # cached per process
        assert load_target(name.upper()) is target
        assert load_target(target) is target
        assert load_target(PACKAGE_DIR / f"{name}.toml") == target
        assert load_target(str(PACKAGE_DIR / f"{name}.toml")) == target


def test_ascend910b_matches_published_figures() -> None:
    t = load_target("ascend910b")
    assert (t.vendor, t.clock_ghz, t.cube_cores, t.vector_cores) == ("Huawei", 1.85, 24, 48)
    capacities = {name: m.capacity for name, m in t.memories.items() if name != "GM"}
    assert capacities == {"L1": 512 * KIB, "L0A": 64 * KIB, "L0B": 64 * KIB,
                          "L0C": 128 * KIB, "UB": 192 * KIB, "Q": 32 * 256}
    assert (t.memory("UB").alignment, t.memory("L0A").alignment,
            t.memory("L0B").alignment, t.memory("L0C").alignment) == (32, 512, 512, 64)
    assert {role: t.role(role).name for role in ROLES} == {
        "global": "GM", "stage": "L1", "left": "L0A", "right": "L0B", "acc": "L0C",
        "vector": "UB", "registers": "Q"}
    assert t.fractal("float16") == (16, 16, 16) and t.fractal_passes("float16") == 1
    assert t.fractal("int8") == (16, 32, 16)
    assert t.fractal("float32") == (16, 8, 16) and t.fractal_passes("float32") == 2
    assert t.cube_macs_per_cycle == 4096
    assert t.peak_flops("float16") == pytest.approx(364e12, rel=0.01)   # 24*4096*2*1.85 GHz
    assert t.peak_flops("int8") == pytest.approx(2 * t.peak_flops("float16"))
    assert t.cube_issue_overhead == 21
    assert (t.fix_fixed_cycles, t.fix_cycles_per_row) == (164, 4.45)
    assert (t.event_ids, t.vector_bytes_per_cycle) == (8, 256)
    rates = {f"{s}->{d}": p.bytes_per_cycle for (s, d), p in t.paths.items()}
    # reads stream at the L2 read rate; DRAM's share per core (32-36) comes from the
    # chip-wide server
    assert rates["GM->L1"] == rates["GM->UB"] == t.l2_read_bytes_per_cycle == 110
    assert 32 <= t.gm_bytes_per_cycle_chip / t.cube_cores <= 37
    assert (rates["L1->L0A"], rates["L1->L0B"]) == (129.7, 85.4)       # measured
    assert (rates["L0C->GM"], rates["L0C->UB"]) == (118, 256)
    assert (rates["UB->GM"], rates["L1->UB"]) == (64, 128)
    pipes = {f"{s}->{d}": p.pipe for (s, d), p in t.paths.items()}
    assert pipes["GM->L1"] == "MTE2" and pipes["L1->L0A"] == "MTE1"
    assert pipes["L0C->GM"] == "FIX" and pipes["UB->GM"] == "MTE3"
    assert t.path("GM", "L1").min_burst == 512
    assert t.l2_bytes == 192 * MIB
    assert (t.l2_read_bytes_per_cycle, t.l2_write_bytes_per_cycle) == (110, 86)
    assert (t.l2_line_bytes, t.l2_hit_latency) == (512, 50)
    assert t.gm_bytes_per_cycle_chip * t.clock_ghz * 1e9 == pytest.approx(1.6e12, rel=0.01)
    # HBM2e sustains 85-90% of its nominal bandwidth in published measurements
    assert 0.85 <= t.gm_sustained_fraction <= 0.90
    assert t.launch_overhead_cycles == round(t.launch_overhead_us * 1850)


def test_ascend310_matches_published_figures() -> None:
    t = load_target("ascend310")
    assert (t.cube_cores, t.vector_cores) == (2, 2)
    capacities = {name: m.capacity for name, m in t.memories.items() if name != "GM"}
    assert capacities == {"L1": 1 * MIB, "L0A": 64 * KIB, "L0B": 64 * KIB,
                          "L0C": 256 * KIB, "UB": 256 * KIB, "Q": 32 * 256}
    assert t.l2_bytes == 8 * MIB
    assert t.gm_bytes_per_cycle_chip == 67
    assert t.path("GM", "L1").bytes_per_cycle == t.l2_read_bytes_per_cycle == 128
    assert (t.path("L1", "L0A").bytes_per_cycle, t.path("L1", "L0B").bytes_per_cycle) \
        == (512, 256)
    assert t.l2_read_bytes_per_cycle == 128
    # Published "about 8 TFLOP/s" fp16; the 680 MHz platform clock gives 11.1.
    assert 8e12 <= t.peak_flops("float16") <= 12e12
    assert t.fractal("float16") == (16, 16, 16)


@pytest.mark.parametrize("name", TARGETS)
def test_target_is_consistent(name: str) -> None:
    t = load_target(name)
    assert set(t.roles) == set(ROLES)
    for (src, dst), path in t.paths.items():
        assert (path.src, path.dst) == (src, dst)
        assert src in t.memories and dst in t.memories and path.pipe in PIPES
    # The codegen's standard routes exist on every shipped target.
    for src, dst in (("global", "stage"), ("global", "vector"), ("stage", "left"),
                     ("stage", "right"), ("acc", "global"), ("acc", "vector"),
                     ("vector", "global")):
        assert t.has_path(t.roles[src], t.roles[dst]), (src, dst)
    # Every fractal's left and right blocks fit the left and right memories.
    for dtype in t.fractals:
        assert t.role("left").capacity >= t.fractal(dtype)[0] * t.fractal(dtype)[1]


@pytest.mark.parametrize("name", TARGETS)
def test_every_vector_op_has_a_cost(name: str) -> None:
    isa = pytest.importorskip("pypto.codegen.isa")
    t = load_target(name)
    for op in isa.VECTOR:
        assert t.vector_op_cost(op.name[1:].lower()) > 0
    assert t.vector_op_cost("add") == 1.0


def test_pipe_names_match_the_isa() -> None:
    isa = pytest.importorskip("pypto.codegen.isa")
    assert set(PIPES) == {p.name for p in isa.Pipe}


@pytest.mark.parametrize("name", TARGETS)
def test_every_number_in_a_shipped_file_cites_a_source(name: str) -> None:
    """Each value line carries a comment, or sits under a comment that covers its block."""
    covered = False
    for line in source_text(name).splitlines():
        stripped = line.strip()
        if not stripped:
            covered = False
        elif stripped.startswith("#"):
            covered = True
        elif stripped.startswith("["):
            covered = covered or "#" in stripped
        elif "=" in stripped and not stripped.split("=", 1)[1].strip().startswith('"'):
            assert covered or "#" in stripped, f"{name}.toml: no source for {stripped!r}"


# -- values, not objects ----------------------------------------------------------------


def test_target_is_frozen_and_hashable() -> None:
    t = load_target("ascend910b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.clock_ghz = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        t.memories["L1"] = Memory("L1", 1, 1)  # type: ignore[index]
    assert {t: 1}[load_target("ascend910b")] == 1
    assert isinstance(t.path("GM", "L1"), Path)


def test_key_is_sha256_of_canonical_json() -> None:
    t = load_target("ascend910b")
    blob = json.dumps(t.to_dict(), sort_keys=True, separators=(",", ":"))
    assert t.key == hashlib.sha256(blob.encode()).hexdigest()
    assert json.loads(json.dumps(t.to_dict())) == t.to_dict()
    again = Target.from_dict(t.to_dict())
    assert again == t and again.key == t.key
    assert load_target("ascend310").key != t.key


def test_key_ignores_comments_and_location(tmp_path: pathlib.Path) -> None:
    t = load_target("ascend910b")
    same = variant(tmp_path, r"^(clock_ghz = 1\.85)\s*#.*$", r"\1   # a different comment")
    assert load_target(same).key == t.key
    assert load_target(same).source != t.source


@pytest.mark.parametrize(("old", "new"), [
    (r"^clock_ghz = 1\.85", "clock_ghz = 1.8"),
    (r"^name = \"ascend910b\"", 'name = "ascend910b_v2"'),
    (r"^L1  = \{ capacity = 524288", "L1  = { capacity = 262144"),
    (r"alignment = 64 \}", "alignment = 128 }"),
    (r"^left = \"L0A\"", 'left = "L0B"'),
    (r"^int8 = \{ m = 16, k = 32", "int8 = { m = 16, k = 64"),
    (r"^exp = 4\.0", "exp = 5.0"),
    (r"^event_ids = 8", "event_ids = 4"),
    (r"^hit_latency = 50", "hit_latency = 60"),
    (r"bytes_per_cycle = 129\.7", "bytes_per_cycle = 130"),
    (r"latency = 1400, min_burst = 512 }\n\"GM->UB\"",
     'latency = 900, min_burst = 512 }\n"GM->UB"'),
    (r"min_burst = 32, row_cycles = 4\.45 }\n\"L0C->UB\"",
     'min_burst = 32, row_cycles = 5 }\n"L0C->UB"'),
    (r"^chip_bytes_per_cycle = 864\.9", "chip_bytes_per_cycle = 800"),
    (r"^sustained_fraction = 0\.87", "sustained_fraction = 0.9"),
    (r"^\"UB->UB\".*$", ""),
])
def test_key_changes_with_any_field(tmp_path: pathlib.Path, old: str, new: str) -> None:
    changed = load_target(variant(tmp_path, old, new))
    assert changed.key != load_target("ascend910b").key
    assert changed != load_target("ascend910b")


# -- bad input --------------------------------------------------------------------------


def test_unknown_target_name_lists_available_ones() -> None:
    with pytest.raises(TargetError) as err:
        load_target("ascend999")
    message = str(err.value)
    assert "ascend999" in message
    for name in TARGETS:
        assert name in message


def test_missing_file_is_a_target_error(tmp_path: pathlib.Path) -> None:
    with pytest.raises(TargetError, match="nothere.toml"):
        load_target(tmp_path / "nothere.toml")
    with pytest.raises(TargetError, match="name, a path or a Target"):
        load_target(42)  # type: ignore[arg-type]


BAD_FILES = [
    # (what is wrong, pattern, replacement, words the message must contain)
    ("toml syntax", r"^clock_ghz = 1\.85", "clock_ghz = = 1.85", ["invalid TOML", "line"]),
    ("missing field", r"^cube_cores = 24.*\n", "", ["missing", "target.cube_cores"]),
    ("missing role", r"^acc = \"L0C\"\n", "", ["missing", "roles.acc"]),
    ("missing path field", r"latency = 1400, min_burst = 512 }\n\"GM->UB\"",
     'min_burst = 512 }\n"GM->UB"', ["missing", 'paths."GM->L1".latency']),
    ("string for a number", r"^clock_ghz = 1\.85", 'clock_ghz = "fast"',
     ["target.clock_ghz", "number"]),
    ("float for an int", r"^event_ids = 8", "event_ids = 8.5", ["sync.event_ids", "integer"]),
    ("bool for an int", r"^queue_depth = 32", "queue_depth = true", ["sync.queue_depth"]),
    ("table for a number", r"^bytes = 201326592", "bytes = { x = 1 }", ["l2.bytes"]),
    ("nan", r"^clock_ghz = 1\.85", "clock_ghz = nan", ["target.clock_ghz", "finite"]),
    ("zero size", r"^L1  = \{ capacity = 524288", "L1  = { capacity = 0",
     ["memories.L1.capacity", "positive"]),
    ("negative size", r"capacity = 196608", "capacity = -4", ["memories.UB.capacity"]),
    ("zero rate", r"bytes_per_cycle = 85\.4", "bytes_per_cycle = 0",
     ['paths."L1->L0B".bytes_per_cycle', "positive"]),
    ("negative latency", r"^hit_latency = 50", "hit_latency = -1", ["l2.hit_latency", ">= 0"]),
    ("zero fractal", r"^float16 = \{ m = 16", "float16 = { m = 0", ["cube.fractal.float16.m"]),
    ("alignment", r"capacity = 196608, alignment = 32", "capacity = 196608, alignment = 48",
     ["memories.UB.alignment", "power of two"]),
    ("role to nowhere", r"^left = \"L0A\"", 'left = "L0X"', ["roles.left", "L0X"]),
    ("path to nowhere", r"^\"UB->UB\"", '"UB->L2X"', ['paths."UB->L2X"', "L2X"]),
    ("path name", r"^\"UB->UB\"", '"UB-UB"', ["paths.UB-UB", "SRC->DST"]),
    ("duplicate path", r"^\"UB->UB\"", '"UB -> GM"', ['paths."UB -> GM"', "second time"]),
    ("pipe", r"^\"UB->UB\" = \{ pipe = \"VEC\"", '"UB->UB" = { pipe = "VECTOR"',
     ['paths."UB->UB".pipe', "MTE2"]),
    ("extra section", r"^\[sync\]", "[cubee]\nx = 1\n\n[sync]", ["cubee", "section"]),
    ("extra field", r"^clock_ghz = 1\.85", "clock_ghz = 1.85\nclock_gz = 2",
     ["target.clock_gz", "unknown"]),
    ("extra role", r"^acc = \"L0C\"", 'acc = "L0C"\naccum = "L0C"', ["roles.accum"]),
    ("extra path field", r"^\"UB->UB\" = \{ pipe = \"VEC\"",
     '"UB->UB" = { pipe = "VEC", speed = 3', ['paths."UB->UB".speed']),
    ("memory not a table", r"^L0B = \{.*$", "L0B = 65536", ["memories.L0B", "table"]),
    ("empty name", r"^name = \"ascend910b\"", 'name = ""', ["target.name"]),
]


@pytest.mark.parametrize(("what", "old", "new", "words"), BAD_FILES,
                         ids=[case[0] for case in BAD_FILES])
def test_malformed_file_names_the_field(tmp_path: pathlib.Path, what: str, old: str, new: str,
                                        words: list[str]) -> None:
    path = variant(tmp_path, old, new)
    with pytest.raises(TargetError) as err:
        load_target(path)
    message = str(err.value)
    assert str(path) in message
    for word in words:
        assert word in message, f"{what}: {word!r} not in {message!r}"


def test_toml_syntax_error_names_the_line(tmp_path: pathlib.Path) -> None:
    lines = source_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.startswith("event_ids"))
    path = variant(tmp_path, r"^event_ids = 8", "event_ids = = 8")
    with pytest.raises(TargetError, match=rf"invalid TOML: .*\bline {line}\b"):
        load_target(path)


def test_missing_section_and_non_table_descriptor() -> None:
    data = load_target("ascend910b").to_dict()
    del data["sync"]
    with pytest.raises(TargetError, match="missing required field 'sync'"):
        Target.from_dict(data)
    with pytest.raises(TargetError, match="must be a table"):
        Target.from_dict([1, 2])  # type: ignore[arg-type]
    data = load_target("ascend910b").to_dict()
    data["memories"] = {}
    with pytest.raises(TargetError, match="at least one memory"):
        Target.from_dict(data)


def test_non_utf8_file(tmp_path: pathlib.Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(source_text().replace("Huawei", "Hu\u00e4wei").encode("latin-1"))
    with pytest.raises(TargetError, match="UTF-8"):
        load_target(path)


@pytest.mark.parametrize("name", TARGETS)
def test_any_damaged_line_gives_a_target_error(tmp_path: pathlib.Path, name: str) -> None:
    """Delete each line, or replace its value with junk: a Target or a TargetError, always."""
    lines = source_text(name).splitlines()
    path = tmp_path / "damaged.toml"
    for i, line in enumerate(lines):
        edits = [""]
        if "=" in line and not line.lstrip().startswith("#"):
            key = line.split("=", 1)[0]
            edits += [f"{key}= 'x'", f"{key}= -1", f"{key}= 0", f"{key}= {{}}", f"{key}= []"]
        for edit in edits:
            path.write_text("\n".join(lines[:i] + [edit] + lines[i + 1:]))
            try:
                load_target(path)
            except TargetError as e:
                assert str(path) in str(e)


@pytest.mark.parametrize("name", TARGETS)
def test_lookups_name_what_is_missing(name: str) -> None:
    t = load_target(name)
    with pytest.raises(TargetError, match="NRAM"):
        t.memory("NRAM")
    with pytest.raises(TargetError, match="accumulator"):
        t.role("accumulator")
    with pytest.raises(TargetError, match="GM->L0A"):
        t.path("GM", "L0A")
    with pytest.raises(TargetError, match="int32"):
        t.fractal("int32")
    with pytest.raises(TargetError, match="sinh"):
        t.vector_op_cost("sinh")
