"""Bad input gets a clear one-line error naming the input, never a traceback (issue 15,
defect 7): command-line options out of range, output paths that are directories, absurd
target descriptors, JSON-lines logs with numbers, lengths or nesting no record has, a
device given as a log, PTO programs with strides near 2**63 or 5,000 cores; and what
PyPTO prints from a file or a database cannot drive the terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pypto.cli import app
from pypto.cli_output import MAX_SEED, printable, usable_cpus
from pypto.codegen.asm import parse
from pypto.db import open_store
from pypto.db.jsonl import FIELD_LENGTHS, MAX_LINE_BYTES, import_records
from pypto.errors import DatabaseError, LogFormatError, SimError, TargetError
from pypto.sim.check import check_program
from pypto.sim.executor import execute
from pypto.sim.timing import simulate
from pypto.targets import load_target
from pypto.targets.sanity import VECTOR_OPS

ROOT = Path(__file__).resolve().parents[1]
GEMM_LOG = ROOT / "tuning_logs" / "gemm.jsonl"
TARGETS = ROOT / "pypto" / "targets"
PG_URL = os.environ.get("PYPTO_TEST_PG_URL")
runner = CliRunner()

SCRIPT = """
import numpy as np, pypto
from pathlib import Path
Path(__file__).with_name("ran").write_text("yes")

@pypto.kernel
def double(a):
    return a + a

with pypto.Context(device_type="npu", target="ascend910b"):
    double(pypto.tensor(np.ones((16, 16)), dtype="float16"))
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "k.py"
    path.write_text(SCRIPT)
    return path


def one_line_error(result, *words: str) -> None:  # type: ignore[no-untyped-def]
    """Exit 1, one line on the output, ``error:``, every word in it, no traceback."""
    output = result.output if hasattr(result, "output") else result.stdout + result.stderr
    code = result.exit_code if hasattr(result, "exit_code") else result.returncode
    assert code == 1, output
    assert "Traceback" not in output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    for word in words:
        assert word in lines[0], (word, lines[0])


# -- pypto tune options ------------------------------------------------------------------


@pytest.mark.parametrize("option, value, words", [
    ("--seed", "-1", ["--seed", "-1", str(MAX_SEED)]),
    ("--seed", str(2**70), ["--seed", str(2**70)]),
    ("--trials", str(10**20), ["--trials", "at most 1,000,000,000"]),
    ("--trials", "0", ["--trials must be at least 1"]),
    ("--timeout", "nan", ["--timeout", "nan"]),
    ("--timeout", "inf", ["--timeout", "inf"]),
    ("--timeout", "-3", ["--timeout", "-3"]),
    ("--early-stopping", str(10**25), ["--early-stopping", "at most"]),
    ("--workers", str(usable_cpus() + 1), [f"--workers {usable_cpus() + 1}",
                                          f"at most --workers {usable_cpus()}"]),
    ("--report", ".", ["--report", "is a directory"]),
])
def test_a_tune_option_out_of_range_is_one_line(option: str, value: str, words: list[str],
                                                 script: Path, tmp_path: Path) -> None:
    value = str(tmp_path) if value == "." else value
    result = runner.invoke(app, ["tune", str(script), "--db", str(tmp_path / "t.db"),
                                 "--trials", "2", option, value])
    one_line_error(result, *words)
    assert not (tmp_path / "ran").exists()          # refused before the script ran


@pytest.mark.parametrize("option, value", [("--seed", "-1"), ("--timeout", "nan"),
                                           ("--trials", str(10**20))])
def test_the_same_in_a_real_process(option: str, value: str, script: Path,
                                    tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "pypto.cli", "tune", str(script), "--db",
                             str(tmp_path / "t.db"), option, value], capture_output=True,
                            text=True, cwd=tmp_path, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    one_line_error(result, option)


@pytest.mark.parametrize("option", ["--html", "--trace"])
def test_run_profile_into_a_directory_is_refused_before_running(option: str, script: Path,
                                                                 tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(script), "--profile", option, str(tmp_path)])
    one_line_error(result, option, "is a directory", "give a file name")
    assert not (tmp_path / "ran").exists()


def test_run_profile_under_a_file_is_refused(script: Path, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    result = runner.invoke(app, ["run", str(script), "--profile", "--html",
                                 str(tmp_path / "afile" / "p.html")])
    one_line_error(result, "--html", "is a file, not a directory")


def test_report_into_a_directory_is_refused(tmp_path: Path) -> None:
    one_line_error(runner.invoke(app, ["report", "-o", str(tmp_path), "--db",
                                       str(tmp_path / "none.db")]), "--output", "directory")


@pytest.mark.parametrize("args", [["db", "list", "--limit", "-1"],
                                  ["db", "show", "abc", "--limit", "-5"],
                                  ["dashboard", "--port", str(2**70)]])
def test_negative_limits_and_impossible_ports_are_usage_errors(args: list[str],
                                                               tmp_path: Path) -> None:
    result = runner.invoke(app, [*args, "--db", str(tmp_path / "x.db")])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert args[-2] in result.output


# -- targets -------------------------------------------------------------------------------


def target_variant(tmp_path: Path, old: str, new: str) -> Path:
    text, n = re.subn(old, new, (TARGETS / "ascend910b.toml").read_text(), flags=re.MULTILINE)
    assert n == 1, old
    path = tmp_path / "odd.toml"
    path.write_text(text)
    return path


ABSURD_TARGETS = [
    # (what, pattern, replacement, words the message must hold)
    ("clock 1e300", r"^clock_ghz = 1\.85", "clock_ghz = 1e300", ["target.clock_ghz", "1e+300"]),
    ("5,000 cores", r"^cube_cores = 24", "cube_cores = 5000", ["target.cube_cores", "5000"]),
    ("GM capacity 1", r"^GM  = \{ capacity = 68719476736", "GM  = { capacity = 1",
     ["memories.GM.capacity", "L1"]),
    ("no GM->L1 path", r'^"GM->L1" = .*$', "", ['paths."GM->L1"', "missing"]),
    ("no cost for exp", r"^exp = 4\.0$", "", ["vector.op_cycles.exp", "missing"]),
    ("event ids past int8", r"^event_ids = 8", "event_ids = 200", ["sync.event_ids"]),
    ("memory past 2**48", r"^GM  = \{ capacity = 68719476736", "GM  = { capacity = "
     f"{2**60}", ["memories.GM.capacity"]),
    ("no float16 fractal", r"^float16 = \{.*$", "", ["cube.fractal.float16"]),
    ("path latency", r'^"GM->L1" = \{ pipe = "MTE2", bytes_per_cycle = 110, latency = 1400',
     '"GM->L1" = { pipe = "MTE2", bytes_per_cycle = 110, latency = 100000000000',
     ['paths."GM->L1".latency']),
]


@pytest.mark.parametrize("what, old, new, words", ABSURD_TARGETS,
                         ids=[t[0] for t in ABSURD_TARGETS])
def test_an_absurd_target_is_refused_at_load(what: str, old: str, new: str, words: list[str],
                                             tmp_path: Path) -> None:
    path = target_variant(tmp_path, old, new)
    with pytest.raises(TargetError) as info:
        load_target(path)
    for word in [str(path), *words]:
        assert word in str(info.value), (what, word, str(info.value))


def test_a_tune_on_an_absurd_target_stops_at_once(script: Path, tmp_path: Path) -> None:
    path = target_variant(tmp_path, r"^clock_ghz = 1\.85", "clock_ghz = 1e300")
    result = runner.invoke(app, ["tune", str(script), "--db", str(tmp_path / "t.db"),
                                 "--target", str(path)])
    one_line_error(result, "target.clock_ghz")
    assert not (tmp_path / "t.db").exists()


def test_every_vector_opcode_has_a_required_cost() -> None:
    from pypto.codegen import isa

    assert set(VECTOR_OPS) == {op.name[1:].lower() for op in isa.VECTOR}


# -- JSON-lines logs ----------------------------------------------------------------------


def good_line() -> dict:
    return json.loads(GEMM_LOG.read_text().splitlines()[0])


def changed(**fields: object) -> str:
    line = good_line()
    line.update(fields)
    return json.dumps(line)


def with_shape(shape: str) -> str:
    return json.dumps(good_line()).replace('"shape": [1024, 1024]', f'"shape": {shape}', 1)


BAD_LINES = [
    ("cycles 1e30", changed(cycles=1e30), "cycles as a positive int"),
    ("cycles 10**30", changed(cycles=10**30), "more than a 64-bit count"),
    ("dims 2**63", with_shape(f"[{2**63}, 1024]"), str(2**63)),
    ("dims Infinity", with_shape("[Infinity, 1024]"), "Infinity is no JSON number"),
    ("dims NaN", with_shape("[NaN, 1024]"), "NaN is no JSON number"),
    ("dims 1e400", with_shape("[1e400, 1024]"), "workload: "),
    ("100k-deep array", "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("100k-deep object", changed()[:-1] + ', "x": ' + '{"a":' * 100_000 + "1" + "}" * 100_000
     + "}", "nested too deeply"),
    ("5000-char model_version", changed(model_version="x" * 5000),
     "model_version is 5000 characters long"),
    ("long target name", json.dumps({**good_line(), "target": {"name": "t" * 65,
                                                                "key": "0" * 64}}),
     "target.name is 65 characters"),
    ("pypto_version not a string", changed(pypto_version={"a": 1}), "pypto_version"),
    ("run count past int64", changed(run={"strategy": "tpe", "status": "done",
                                          "trials_asked": 2**64, "command": "", "host": ""}),
     "run.trials_asked"),
]


@pytest.mark.parametrize("what, line, words", BAD_LINES, ids=[b[0] for b in BAD_LINES])
def test_a_bad_line_is_named_and_nothing_imported(what: str, line: str, words: str,
                                                  tmp_path: Path) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text(json.dumps(good_line()) + "\n" + line + "\n")
    result = runner.invoke(app, ["db", "import", str(log), "--db", str(tmp_path / "x.db")])
    one_line_error(result, "line 2:", words, "nothing imported")
    result = runner.invoke(app, ["db", "import", str(log), "--db", str(tmp_path / "x.db"),
                                 "--skip-bad"])
    assert result.exit_code == 0 and "1 record(s) added" in result.output, result.output


@pytest.mark.skipif(not PG_URL, reason="set PYPTO_TEST_PG_URL for PostgreSQL")
def test_field_lengths_are_checked_alike_on_postgresql(tmp_path: Path) -> None:
    """PostgreSQL once refused the whole file (``StringDataRightTruncation``) without
    naming the line; now the line check refuses it first, as on SQLite."""
    log = tmp_path / "bad.jsonl"
    log.write_text(json.dumps(good_line()) + "\n" + changed(model_version="x" * 5000) + "\n")
    result = runner.invoke(app, ["db", "import", str(log), "--db", PG_URL or ""])
    one_line_error(result, "line 2: model_version is 5000 characters long")


def test_field_lengths_are_the_columns_lengths() -> None:
    from pypto.db import models as m

    columns = {"model_version": m.RecordRow.__table__.c.model_version,
               "pypto_version": m.RecordRow.__table__.c.pypto_version,
               "target.name": m.TargetRow.__table__.c.name}
    assert {k: c.type.length for k, c in columns.items()} == FIELD_LENGTHS


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom", "."])
def test_a_device_or_a_directory_is_no_log(path: str, tmp_path: Path) -> None:
    given_path = str(tmp_path) if path == "." else path
    if not Path(given_path).exists():
        pytest.skip(f"{path} does not exist here")
    result = subprocess.run([sys.executable, "-m", "pypto.cli", "db", "import", given_path,
                             "--db", str(tmp_path / "x.db")], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    one_line_error(result, given_path, "give a JSON-lines file")


def test_a_fifo_is_no_log(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with open_store(str(tmp_path / "x.db")) as store, pytest.raises(DatabaseError,
                                                                   match="not a regular file"):
        import_records(store, fifo)


def test_a_line_longer_than_the_limit_is_not_read_whole(tmp_path: Path) -> None:
    log = tmp_path / "long.jsonl"
    with log.open("w") as f:
        f.write('{"x": "' + "y" * (MAX_LINE_BYTES + 10) + '"}\n')
        f.write(json.dumps(good_line()) + "\n")
    with open_store(str(tmp_path / "x.db")) as store:
        with pytest.raises(LogFormatError) as info:
            import_records(store, log)
        assert info.value.problems == [(1, f"longer than {MAX_LINE_BYTES} bytes: not a record")]
        assert import_records(store, log, skip_bad=True).added == 1


# -- PTO programs ----------------------------------------------------------------------------


def program(body: str, tensors: str = ".tensor A float16 [16] in") -> str:
    return f".program p target=ascend910b\n{tensors}\n.core 0\n{body}\n"


@pytest.mark.parametrize("operand", [
    "UB[0x0:3x1,4611686018427387904,1]",        # rows x stride past 2**63 (it once wrapped)
    "UB[0x0:1x1,1,9223372036854775807]",        # a stride of 2**63 - 1 elements of 2 bytes
    "UB[0x7fffffffffffffff:1x16,16,1]",         # an address at the end of int64
])
def test_strides_and_addresses_near_2_63_are_refused_naming_the_line(operand: str) -> None:
    """The text is a faithful listing of any instruction (it parses); the check refuses
    it before the int64 arithmetic of the bounds checks could wrap."""
    prog = parse(program(f"    COPY.F16 {operand}, GM[A][0:1x16,16,1]"))
    target = load_target("ascend910b")
    with pytest.raises(SimError, match=r"line 4.*operand d reaches 2\*\*62 bytes or more"):
        check_program(prog, target)
    with pytest.raises(SimError, match="operand d reaches"):
        simulate(prog, target)
    gm = [np.zeros(16, dtype=np.float16)]
    with pytest.raises(SimError):
        execute(prog, target, gm)


def test_a_tensor_past_2_63_bytes_is_refused() -> None:
    prog = parse(program("    NOP", f".tensor A float16 [{2**62},2] in"))
    with pytest.raises(SimError, match=r"tensor A of \d+ elements takes more bytes than any"):
        check_program(prog, load_target("ascend910b"))


def test_5000_cores_are_refused_before_running() -> None:
    body = "    COPY.F16 UB[0x0:1x16,16,1], GM[A][0:1x16,16,1]"
    prog = parse(".program p target=ascend910b\n.tensor A float16 [16] in\n" + "".join(
        f".core {i}\n{body}\n" for i in range(5000)))
    target = load_target("ascend910b")
    for run in (lambda: check_program(prog, target), lambda: simulate(prog, target),
                lambda: simulate(prog, target, engine="reference")):
        with pytest.raises(SimError, match="p: 5000 cores, but ascend910b has 48"):
            run()


@settings(max_examples=30, deadline=None)
@given(shift=st.integers(40, 62), dtype=st.sampled_from(["F16", "F32"]))
def test_a_one_element_operand_runs_whatever_its_unused_stride(shift: int, dtype: str) -> None:
    """The stride along a dimension of one element is never taken: the executor copies
    the element (it once passed the stride times the item size to ``as_strided``, which
    overflowed a C long)."""
    np_dtype = {"F16": np.float16, "F32": np.float32}[dtype]
    name = {"F16": "float16", "F32": "float32"}[dtype]
    text = (f".program p target=ascend910b\n.tensor A {name} [4] in\n.tensor B {name} [4] out\n"
            f".core 0\n    COPY.{dtype} UB[0x0:1x1,1,1], GM[A][2:1x1,1,1]\n"
            "    SET_FLAG MTE2, MTE3, 0\n    WAIT_FLAG MTE2, MTE3, 0\n"
            f"    COPY.{dtype} GM[B][1:1x1,1,1], UB[0x0:1x1,1,1]\n")
    prog = parse(text)
    for stream in prog.cores:         # what only a program built in code can hold
        stream["a_rs"] = stream["a_cs"] = stream["d_rs"] = stream["d_cs"] = 2**shift
    gm = [np.array([1, 2, 3, 4], dtype=np_dtype), np.zeros(4, dtype=np_dtype)]
    execute(prog, load_target("ascend910b"), gm)
    assert gm[1].tolist() == [0, 3, 0, 0]


# -- what is printed -------------------------------------------------------------------------


@given(st.text())
def test_printable_text_holds_no_control_character_but_newline_and_tab(text: str) -> None:
    shown = printable(text)
    assert not any((ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f for c in shown)
    assert not any(c in shown for c in "\u202e\u2066\u200b")
    if text.isprintable():
        assert shown == text


def test_control_characters_from_a_log_print_escaped(tmp_path: Path) -> None:
    line = good_line()
    line.update(status="error", cycles=None, error="bad \x1b[2J\x1b[31mred\x07\r!")
    line["target"] = {"name": "evil\x1b]0;title\x07", "key": "0" * 64}
    log = tmp_path / "ansi.jsonl"
    log.write_text(json.dumps(line) + "\n")
    db = str(tmp_path / "x.db")
    assert runner.invoke(app, ["db", "import", str(log), "--db", db]).exit_code == 0
    shown = runner.invoke(app, ["db", "show", line["workload"]["key"][:12], "--db", db]).output
    shown += runner.invoke(app, ["db", "list", "--db", db]).output
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    assert "bad \\x1b[2J\\x1b[31mred\\x07\\x0d!" in shown
    assert "evil\\x1b]0;title\\x07" in shown


# -- a read-only database --------------------------------------------------------------------


@pytest.fixture
def read_only_db(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A PyPTO database (WAL, as PyPTO makes them) in a directory nobody may write, the
    file too: ``chattr +i``, which holds even for root (the tests may run as root)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "p.db"
    assert runner.invoke(app, ["db", "import", str(GEMM_LOG), "--db", str(db)]).exit_code == 0
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    done = subprocess.run(["chattr", "+i", str(db), str(folder)], capture_output=True)
    if done.returncode != 0 or os.access(folder, os.W_OK):
        subprocess.run(["chattr", "-i", str(db), str(folder)], capture_output=True)
        pytest.skip("cannot make a read-only directory here (chattr +i)")
    yield db
    subprocess.run(["chattr", "-i", str(db), str(folder)], check=True)


LOOKUP = """
import numpy as np, pypto
@pypto.kernel
def gemm(A, B):
    return pypto.matmul(A, B)
with pypto.Context(device_type="npu", target="ascend910b"):
    A = pypto.tensor(np.ones((1024, 1024)), dtype="float16")
    print(gemm.lower(A, A).sources[0])
"""


def test_a_read_only_database_can_still_be_read(read_only_db: Path, tmp_path: Path) -> None:
    for command in (["db", "stats"], ["db", "list"]):
        result = runner.invoke(app, [*command, "--db", str(read_only_db)])
        assert result.exit_code == 0 and "500" in result.output, result.output
    script = tmp_path / "lookup.py"
    script.write_text(LOOKUP)
    found = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT),
                                             "PYPTO_DB": str(read_only_db)})
    assert found.stdout.strip() == "tuned", found.stderr
    assert sorted(p.name for p in read_only_db.parent.iterdir()) == ["p.db"]   # nothing added


def test_writing_a_read_only_database_says_so(read_only_db: Path) -> None:
    result = runner.invoke(app, ["db", "import", str(GEMM_LOG), "--db", str(read_only_db)])
    one_line_error(result, "is read-only for PyPTO here", "--db")


# -- a password with an unescaped "@" ------------------------------------------------------


def test_an_unescaped_at_in_a_password_is_not_taken_for_the_host() -> None:
    """SQLAlchemy reads ``user:ab@cd@host`` as the password ``ab`` on host ``cd@host``; the
    driver's error then printed ``cd`` (the password's tail) as a host it cannot resolve."""
    result = runner.invoke(app, ["db", "stats", "--db",
                                 "postgresql+psycopg://u:s3c@r3t-Zq@127.0.0.1:1/x"])
    one_line_error(result, "cannot connect", "127.0.0.1")
    assert "r3t-Zq" not in result.output and "s3c" not in result.output


@pytest.mark.skipif(not PG_URL, reason="set PYPTO_TEST_PG_URL for PostgreSQL")
def test_a_password_with_an_unescaped_at_connects(tmp_path: Path) -> None:
    """The server of the tests trusts loopback connections: the password is not checked,
    but the host must be the real one for the connection to succeed."""
    url = (PG_URL or "").replace("://postgres@", "://postgres:s3c@r3t-Zq@", 1)
    assert url != PG_URL
    result = runner.invoke(app, ["db", "stats", "--db", url])
    assert result.exit_code == 0, result.output
    assert "r3t-Zq" not in result.output and "s3c" not in result.output


def test_a_reader_that_goes_away_is_no_error(tmp_path: Path) -> None:
    """``pypto db show KEY | head -2`` once ended in ``error: Broken pipe``."""
    db = str(tmp_path / "x.db")
    assert runner.invoke(app, ["db", "import", str(GEMM_LOG), "--db", db]).exit_code == 0
    key = json.loads(GEMM_LOG.read_text().splitlines()[0])["workload"]["key"]
    shown = subprocess.Popen([sys.executable, "-m", "pypto.cli", "db", "show", key[:12],
                              "--db", db, "--limit", "500"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert shown.stdout is not None and shown.stderr is not None
    assert shown.stdout.readline().startswith(b"workload")
    shown.stdout.close()          # the reader goes away, as head does
    assert shown.wait(timeout=120) in (0, 141)
    assert shown.stderr.read() == b""
