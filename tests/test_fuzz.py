"""Fuzz tests (issue 15): whatever a user feeds PyPTO, it answers with a ``PyptoError`` or
works; never another exception, never a native crash.

* PTO assembly: mutated seed programs (``fuzz/seeds``, the codegen corpus's assembly and
  hand-written raw-mode and multi-core programs) and mutated random programs (the engine
  equality tests' generator, printed as text) through parse -> check -> the functional
  executor -> both timing engines.
* JSON-lines logs: records with fields replaced by random JSON, and raw text.
* Target descriptors: shipped files with values replaced by random TOML values.
* The campaign driver (``fuzz/run.py``) itself: a native crash in a child is caught and
  its input saved.

The long campaigns (``fuzz/run.py``, Atheris) are scripts, their figures are in
``docs/RELIABILITY.md``.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pypto.db import open_store
from pypto.db.jsonl import import_records
from pypto.errors import DatabaseError, LogFormatError, TargetError
from pypto.targets import Target, available_targets, load_target

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fuzz"))

from pto import mutate, mutate_program, run_program, run_text, seed_texts  # noqa: E402

from tests.test_engine_equality import TARGETS, random_programs  # noqa: E402

SEEDS = seed_texts()
SLOW = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.data_too_large])


def test_the_seeds_run_cleanly() -> None:
    """The seeds are good programs (but the two defect-1 reproducers, refused): a mutant
    starts from something that gets through every stage."""
    outcomes = [(text, run_text(text)) for text in SEEDS]
    assert len(SEEDS) >= 40
    refused = [text for text, outcome in outcomes if outcome != "ok"]
    assert len(refused) == 2 and all("COPY.F32 " in t and "A int8" in t for t in refused)


@settings(max_examples=300, **SLOW)
@given(seed=st.integers(0, 2**32 - 1))
def test_mutated_seed_programs_raise_only_pypto_errors(seed: int) -> None:
    rng = random.Random(seed)
    run_text(mutate(rng.choice(SEEDS), rng, SEEDS))


@settings(max_examples=60, **SLOW)
@given(data=st.data(), target=st.sampled_from(sorted(TARGETS)), seed=st.integers(0, 2**32 - 1))
def test_mutated_generated_programs_raise_only_pypto_errors(data: st.DataObject, target: str,
                                                         seed: int) -> None:
    """Programs as code builds them (no text: fields the parser would never produce),
    generated, then with fields set to edge values of their types."""
    program = data.draw(random_programs(TARGETS[target]))
    assert run_program(program) in ("ok", "SimError")   # as generated: runs, or refused
    run_program(mutate_program(program, random.Random(seed), edits=data.draw(st.integers(1, 4))))


@settings(max_examples=100, **SLOW)
@given(text=st.text(max_size=400))
def test_any_text_raises_only_pypto_errors(text: str) -> None:
    run_text(".program p target=ascend910b\n.tensor A float16 [64] in\n.core 0\n" + text)


# -- JSON-lines logs ----------------------------------------------------------------------

GOOD = json.loads((ROOT / "tuning_logs" / "gemm.jsonl").read_text().splitlines()[0])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


FIELDS = [p for p in _paths(GOOD) if p]


def _replaced(path: tuple, value: object) -> dict:
    line = json.loads(json.dumps(GOOD))
    here = line
    for step in path[:-1]:
        here = here[step]
    here[path[-1]] = value
    return line


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with open_store(str(tmp_path_factory.mktemp("fuzz") / "f.db")) as s:
        yield s


@settings(max_examples=150, **SLOW)
@given(data=st.data())
def test_a_log_with_any_field_replaced_imports_or_is_refused(data: st.DataObject, store,
                                                             tmp_path_factory) -> None:
    lines = [_replaced(data.draw(st.sampled_from(FIELDS)), data.draw(JSON))
             for _ in range(data.draw(st.integers(1, 3)))]
    log = tmp_path_factory.mktemp("log") / "l.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    try:
        import_records(store, log)
    except LogFormatError as e:
        assert e.problems and all(isinstance(n, int) for n, _ in e.problems)
    for row in store.summary():          # whatever came in reads back
        row.workload.describe()


@settings(max_examples=100, **SLOW)
@given(text=st.text(max_size=300) | st.binary(max_size=300))
def test_any_bytes_as_a_log_are_refused_cleanly(text: str | bytes, store,
                                                tmp_path_factory) -> None:
    log = tmp_path_factory.mktemp("raw") / "r.jsonl"
    if isinstance(text, bytes):
        log.write_bytes(text)
    else:
        log.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        import_records(store, log)
    except (LogFormatError, DatabaseError):
        pass


# -- target descriptors -------------------------------------------------------------------

TOML_VALUES = st.sampled_from([
    "0", "-1", "1", "1e300", "-1e300", "inf", "nan", "2.5", "9223372036854775807",
    "9223372036854775808", "'x'", "''", "true", "[]", "{}", "[1, 2]", "{ a = 1 }",
    "1e-300", "4096", "5000", "0.0", "127", "128"])


@settings(max_examples=200, **SLOW)
@given(name=st.sampled_from(available_targets()), data=st.data())
def test_a_target_with_any_value_replaced_loads_or_is_refused(name: str, data: st.DataObject,
                                                              tmp_path_factory) -> None:
    lines = (ROOT / "pypto" / "targets" / f"{name}.toml").read_text().splitlines()
    values = [i for i, line in enumerate(lines) if re.match(r"^\s*[\w\"\->]+\s*=", line)]
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.sampled_from(values))
        key, rest = lines[i].split("=", 1)
        if rest.strip().startswith("{") and data.draw(st.booleans()):
            fields = re.findall(r"(\w+)\s*=\s*([^,}]+)", rest)
            field = data.draw(st.sampled_from(fields))[0]
            rest = re.sub(rf"{field}\s*=\s*[^,}}]+", f"{field} = {data.draw(TOML_VALUES)}", rest)
            lines[i] = f"{key}={rest}"
        else:
            lines[i] = f"{key}= {data.draw(TOML_VALUES)}"
    path = tmp_path_factory.mktemp("t") / f"{name}.toml"
    path.write_text("\n".join(lines))
    try:
        target = load_target(path)
    except TargetError as e:
        assert str(path) in str(e)
        return
    # a target that loads is one the compiler and both engines can use
    assert isinstance(target, Target)
    text = next(t for t in SEEDS if f"target={name}" in t)
    run_text(text.replace(f"target={name}", f"target={name}"))


# -- the campaign driver -------------------------------------------------------------------


def test_the_driver_saves_a_crashing_input_and_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = subprocess.run(
        [sys.executable, str(ROOT / "fuzz" / "run.py"), "--programs", "30", "--workers", "2",
         "--out", str(out), "--quiet", "--crash-at", "7", "--seed", "5"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 1, result.stderr       # a crash is a finding
    summary = json.loads((out / "summary.json").read_text())
    assert summary["programs"] == 30 and summary["native_crashes"] == 1
    assert summary["non_pypto_exceptions"] == 0 and summary["hangs"] == 0
    crash = out / "findings" / "crash-7.pto"
    sys.path.insert(0, str(ROOT / "fuzz"))
    from run import program_text

    assert crash.read_text() == program_text(seed_texts(), 5, 7)   # the input it ran
    assert "Segmentation fault" in (out / "findings" / "crash-7.txt").read_text()
    assert "native crashes       1" in result.stdout
