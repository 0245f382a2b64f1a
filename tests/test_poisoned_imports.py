"""A log cannot poison the database (issue 15, defect 3): once one imported record
`{"m1": 7}` with 1 cycle shadowed the shipped GEMM's 500 valid records (the example fell
back to the default), and a spec with `outputs: [5000015]` imported and then broke
`pypto db list` / `show` for good."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pypto
from pypto.cli import app
from pypto.compile.resolver import ScheduleResolver
from pypto.db import Record, TargetInfo, WorkloadInfo, open_store
from pypto.db.jsonl import import_records
from pypto.errors import LogFormatError
from pypto.sim.roofline import workload_bound
from pypto.targets import load_target

ROOT = Path(__file__).resolve().parents[1]
GEMM_LOG = ROOT / "tuning_logs" / "gemm.jsonl"
runner = CliRunner()


def good_line() -> dict:
    return json.loads(GEMM_LOG.read_text().splitlines()[0])


def write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def with_schedule(line: dict, **knobs: object) -> dict:
    out = copy.deepcopy(line)
    out["schedule"].update(knobs)
    out.pop("schedule_key")
    return out


def test_an_invalid_schedule_is_refused_naming_its_line(tmp_path: Path) -> None:
    poisoned = with_schedule(good_line(), m1=7)
    poisoned["cycles"] = 1
    log = write(tmp_path / "bad.jsonl", [good_line(), poisoned])
    with open_store(f"sqlite:///{tmp_path / 'db.db'}") as store:
        with pytest.raises(LogFormatError, match=r"line 2: the schedule is not valid .*m1"):
            import_records(store, log)
        assert store.stats().exists is False or store.stats().records == 0
        report = import_records(store, log, skip_bad=True)
        assert report.added == 1 and [n for n, _ in report.skipped] == [2]


def test_cycles_below_the_roofline_bound_are_refused(tmp_path: Path) -> None:
    fast = good_line()
    fast["cycles"] = 1
    log = write(tmp_path / "fast.jsonl", [fast])
    with open_store(f"sqlite:///{tmp_path / 'db.db'}") as store:
        with pytest.raises(LogFormatError, match="below the workload's roofline bound"):
            import_records(store, log)


def test_a_spec_naming_nodes_it_does_not_have_is_refused(tmp_path: Path) -> None:
    line = good_line()
    spec = line["workload"]["spec"]
    spec["outputs"] = [5000015]
    # a forger recomputes the key: the spec must still be refused for what it is
    line["workload"]["key"] = hashlib.sha256(
        json.dumps(spec, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    log = write(tmp_path / "forged.jsonl", [line])
    db = f"sqlite:///{tmp_path / 'db.db'}"
    result = runner.invoke(app, ["db", "import", str(log), "--db", db])
    assert result.exit_code == 1 and "outputs [5000015] name nodes" in result.output
    for command in (["db", "list"], ["db", "stats"]):
        result = runner.invoke(app, [*command, "--db", db])
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_lookup_skips_a_record_that_does_not_validate_now(tmp_path: Path) -> None:
    """Records written around the importer (an older PyPTO, another tool): the lookup
    takes the fastest one that validates and is physically possible."""
    target = load_target("ascend910b")
    compiled = pypto.kernel(pypto.matmul).lower(pypto.spec((1024, 1024), "float16"),
                                                pypto.spec((1024, 1024), "float16"),
                                                target="ascend910b")
    wl = compiled.workloads[0]
    line = good_line()
    valid = pypto.schedule_space.Schedule(line["schedule"])
    invalid = pypto.schedule_space.Schedule({**line["schedule"], "m1": 7})
    too_fast = pypto.schedule_space.Schedule({**line["schedule"], "n1": 128})
    bound = workload_bound(wl, target)
    url = f"sqlite:///{tmp_path / 'db.db'}"
    with open_store(url) as store:
        store.add_records([Record(wl.key, target.key, invalid, cycles=1, target_name="ascend910b"),
                           Record(wl.key, target.key, too_fast, cycles=bound - 1,
                                  target_name="ascend910b"),
                           Record(wl.key, target.key, valid, cycles=line["cycles"],
                                  target_name="ascend910b")],
                          workloads=[WorkloadInfo.of(wl)], targets=[TargetInfo.of(target)])
    schedule, source = ScheduleResolver(url).resolve(wl, target)
    assert source == "tuned" and dict(schedule) == dict(valid)
