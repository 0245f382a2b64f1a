"""``pypto db ...`` through Typer's CliRunner, and once as a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import pypto
from pypto.cli import app
from pypto.compile import resolver as lookup
from pypto.db import Record, open_store
from pypto.db.models import SCHEMA_REVISION
from pypto.sim import MODEL_VERSION

runner = CliRunner()
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("PYPTO_DB", raising=False)
    lookup.reset()
    yield
    lookup.reset()


@pytest.fixture(scope="module")
def compiled():
    k = pypto.kernel(lambda a, b: pypto.matmul(a, b))
    return k.lower(pypto.spec((128, 96), "float16"), pypto.spec((96, 64), "float16"))


@pytest.fixture
def db(tmp_path: Path, compiled) -> str:
    """A database with three current records (one failed) and one stale record."""
    path = str(tmp_path / "db" / "pypto.db")
    wl, target, s = compiled.workloads[0], compiled.target, compiled.schedules[0]
    with open_store(path) as store:
        store.add(wl, target, [
            Record.measured(wl, target, s, cycles=15000),
            Record.measured(wl, target, s.replace(l1_depth=1), cycles=14000),
            Record.measured(wl, target, s.replace(l0_depth=1), status="error", error="boom"),
            Record.measured(wl, target, s.replace(l0_depth=3), cycles=10,
                            model_version="sim-0.old"),
        ])
    return path


def invoke(*args: str):
    return runner.invoke(app, list(args))


def test_stats_without_a_database_creates_none(tmp_path: Path) -> None:
    path = tmp_path / "none" / "pypto.db"
    result = invoke("db", "stats", "--db", str(path))
    assert result.exit_code == 0 and "no database yet" in result.output
    assert not path.parent.exists()


def test_stats_list_show_best(db: str, compiled) -> None:
    key = compiled.workloads[0].key
    stats = invoke("db", "stats", "--db", db)
    assert stats.exit_code == 0, stats.output
    assert "records    4" in stats.output and "1 stale record(s)" in stats.output
    listed = invoke("db", "list", "--db", db)
    assert listed.exit_code == 0 and key[:12] in listed.output
    assert "2/3" in listed.output and "14,000" in listed.output and "(stale)" in listed.output
    shown = invoke("db", "show", key[:8], "--db", db)
    assert shown.exit_code == 0 and key in shown.output
    assert shown.output.index("14,000 cycles") < shown.output.index("15,000 cycles")
    assert "boom" in shown.output
    best = invoke("db", "best", key[:8], "--db", db)
    assert best.exit_code == 0
    name, cycles, schedule = best.output.strip().split("\t")
    assert (name, cycles) == ("ascend910b", "14000")
    assert json.loads(schedule)["l1_depth"] == 1


def test_export_import_round_trip_and_idempotence(db: str, tmp_path: Path) -> None:
    log = tmp_path / "logs" / "records.jsonl"
    result = invoke("db", "export", str(log), "--db", db)
    assert result.exit_code == 0 and "exported 4 record(s)" in result.output
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {line["version"] for line in lines} == {1}
    assert all(line["workload"]["spec"] and line["target"]["name"] == "ascend910b"
               for line in lines)
    fresh = str(tmp_path / "fresh.db")
    first = invoke("db", "import", str(log), "--db", fresh)
    assert first.exit_code == 0 and "4 record(s) added" in first.output
    again = invoke("db", "import", str(log), "--db", fresh)
    assert again.exit_code == 0 and "0 record(s) added, 4 already present" in again.output
    with open_store(fresh) as store:
        assert store.stats().records == 4


def test_import_rejects_a_malformed_file_naming_its_lines(db: str, tmp_path: Path) -> None:
    log = tmp_path / "records.jsonl"
    assert invoke("db", "export", str(log), "--db", db).exit_code == 0
    lines = log.read_text().splitlines()
    broken = json.loads(lines[1])
    broken["cycles"] = "fast"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], json.dumps(broken), lines[2], "[1, 2]"]) + "\n")
    fresh = str(tmp_path / "fresh.db")
    result = invoke("db", "import", str(bad), "--db", fresh)
    assert result.exit_code == 1
    assert "line 2:" in result.output and "line 4:" in result.output
    assert "nothing imported" in result.output and "--skip-bad" in result.output
    assert "Traceback" not in result.output
    assert "no database yet" in invoke("db", "stats", "--db", fresh).output
    skipped = invoke("db", "import", str(bad), "--db", fresh, "--skip-bad")
    assert skipped.exit_code == 0, skipped.output
    assert "2 record(s) added" in skipped.output
    assert "skipped 2 bad line(s) (--skip-bad)" in skipped.output


def test_prune_stale(db: str) -> None:
    refused = invoke("db", "prune", "--db", db)
    assert refused.exit_code == 1 and "--stale" in refused.output
    result = invoke("db", "prune", "--stale", "--db", db)
    assert result.exit_code == 0 and "deleted 1 stale record(s)" in result.output
    with open_store(db) as store:
        assert {r.model_version for r in store.records()} == {MODEL_VERSION}


def test_upgrade(tmp_path: Path, db: str) -> None:
    result = invoke("db", "upgrade", "--db", db)
    assert result.exit_code == 0 and "up to date" in result.output
    new = invoke("db", "upgrade", "--db", str(tmp_path / "new.db"))
    assert new.exit_code == 0 and f"none -> {SCHEMA_REVISION}" in new.output


def test_user_errors_are_one_line(tmp_path: Path, db: str) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"\x00\x01garbage" * 50)
    cases = [
        ("db", "stats", "--db", str(garbage)),
        ("db", "show", "ffffffff", "--db", db),
        ("db", "best", "ffffffff", "--db", db),
        ("db", "import", str(tmp_path / "missing.jsonl"), "--db", db),
        ("db", "list", "--db", "mysql://u@h/x"),
    ]
    for args in cases:
        result = invoke(*args)
        assert result.exit_code == 1, (args, result.output)
        assert result.output.startswith("error: ") and result.output.count("\n") == 1, \
            (args, result.output)
        assert "Traceback" not in result.output
    assert garbage.read_bytes() == b"\x00\x01garbage" * 50


def test_a_real_subprocess(tmp_path: Path, db: str) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"version": 1}\n')
    run = [sys.executable, "-m", "pypto.cli", "db"]
    out = subprocess.run(run + ["import", str(bad), "--db", db], capture_output=True,
                         text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 1
    assert out.stderr.startswith("error: ") and "line 1" in out.stderr
    assert "Traceback" not in out.stderr
    ok = subprocess.run(run + ["stats", "--db", db], capture_output=True, text=True,
                        timeout=120, cwd=ROOT)
    assert ok.returncode == 0 and "records    4" in ok.stdout


def test_json_output_of_stats_list_show_best(db: str, compiled) -> None:
    key = compiled.workloads[0].key
    stats = json.loads(invoke("db", "stats", "--db", db, "--json").output)
    assert stats["records"] == 4 and stats["stale"] == 1 and stats["exists"] is True
    assert sum(stats["by_status"].values()) == 4
    listed = json.loads(invoke("db", "list", "--db", db, "--json").output)
    current = [row for row in listed if not row["stale"]]
    assert [(r["workload"], r["ok"], r["records"], r["best_cycles"]) for r in current] == \
        [(key, 2, 3, 14000)]
    shown = json.loads(invoke("db", "show", key[:8], "--db", db, "--json").output)
    assert shown["workload"]["key"] == key and len(shown["records"]) == 4
    ok = [r["cycles"] for r in shown["records"] if r["status"] == "ok"]
    assert 14000 in ok and 15000 in ok
    assert any(r["error"] == "boom" for r in shown["records"])
    best = json.loads(invoke("db", "best", key[:8], "--db", db, "--json").output)
    assert [(b["target"], b["cycles"]) for b in best] == [("ascend910b", 14000)]
    assert best[0]["schedule"]["l1_depth"] == 1
    none = invoke("db", "best", key[:8], "--db", db, "--json", "--target", "mlu370")
    assert none.exit_code == 1 and "no ok record" in none.output


def test_import_keeps_each_records_source(db: str, tmp_path: Path) -> None:
    log = tmp_path / "a.jsonl"
    assert invoke("db", "export", str(log), "--db", db).exit_code == 0
    fresh = str(tmp_path / "fresh.db")
    assert invoke("db", "import", str(log), "--db", fresh).exit_code == 0
    with open_store(db) as a, open_store(fresh) as b:
        def sources(s):
            return sorted((r.schedule_key, r.model_version, r.source) for r in s.records())
        assert sources(a) == sources(b)
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    lines[0]["source"] = "bogus"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    result = invoke("db", "import", str(bad), "--db", str(tmp_path / "f2.db"))
    assert result.exit_code == 1 and "source 'bogus'" in result.output


def test_export_import_export_is_byte_identical(db: str, tmp_path: Path) -> None:
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    assert invoke("db", "export", str(first), "--db", db).exit_code == 0
    fresh = str(tmp_path / "fresh.db")
    assert invoke("db", "import", str(first), "--db", fresh).exit_code == 0
    assert invoke("db", "export", str(second), "--db", fresh).exit_code == 0
    assert second.read_bytes() == first.read_bytes()


@pytest.mark.parametrize("log", sorted((ROOT / "tuning_logs").glob("*.jsonl")),
                         ids=lambda p: p.name)
def test_the_shipped_logs_round_trip_byte_identical(log: Path, tmp_path: Path) -> None:
    """export -> import -> export of each shipped log gives the same bytes."""
    fresh, again = str(tmp_path / "fresh.db"), tmp_path / "again.jsonl"
    assert invoke("db", "import", str(log), "--db", fresh).exit_code == 0
    assert invoke("db", "export", str(again), "--db", fresh).exit_code == 0
    assert again.read_bytes() == log.read_bytes()


def test_the_run_history_travels_with_the_records(tmp_path: Path, compiled) -> None:
    """Records of tuning runs export with their run; import finds or adds it (once), so
    a database's runs come back and export -> import -> export stays identical."""
    from pypto.db import TargetInfo, WorkloadInfo

    wl, target, s = compiled.workloads[0], compiled.target, compiled.schedules[0]
    src = str(tmp_path / "src.db")
    with open_store(src) as store:
        runs = [store.start_run(strategy=name, trials_asked=2, command=f"pypto tune -s {name}",
                                host="h", workload=WorkloadInfo.of(wl),
                                target=TargetInfo.of(target)) for name in ("tpe", "model")]
        store.add(wl, target, [
            Record.measured(wl, target, s, cycles=15000, run_id=runs[0]),
            Record.measured(wl, target, s.replace(l1_depth=1), cycles=14000, run_id=runs[1]),
            Record.measured(wl, target, s.replace(l0_depth=1), status="error", error="boom",
                            run_id=runs[1]),
            Record.measured(wl, target, s.replace(l0_depth=3), cycles=14500)])
        store.update_run(runs[0], trials_done=1, best_cycles=15000, status="done")
        store.update_run(runs[1], trials_done=2, status="interrupted")
        before = sorted(store.runs(), key=lambda r: r.id)
    first, second = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    assert invoke("db", "export", str(first), "--db", src).exit_code == 0
    fresh = str(tmp_path / "fresh.db")
    result = invoke("db", "import", str(first), "--db", fresh)
    assert result.exit_code == 0 and "2 run(s) added" in result.output, result.output
    again = invoke("db", "import", str(first), "--db", fresh)
    assert again.exit_code == 0 and "run(s) added" not in again.output
    assert invoke("db", "export", str(second), "--db", fresh).exit_code == 0
    assert second.read_bytes() == first.read_bytes()
    with open_store(fresh) as store:
        after = sorted(store.runs(), key=lambda r: r.id)
        by_run = {r.schedule_key: r.run_id for r in store.records()}

    def without_id(r):
        return (r.strategy, r.status, r.trials_asked, r.trials_done, r.best_cycles,
                r.command, r.host, r.workload_key, r.target_key, r.started_at, r.finished_at)

    assert [without_id(r) for r in after] == [without_id(r) for r in before]
    ids = {r.strategy: r.id for r in after}
    assert by_run[s.key] == ids["tpe"]
    assert by_run[s.replace(l1_depth=1).key] == by_run[s.replace(l0_depth=1).key] == ids["model"]
    assert by_run[s.replace(l0_depth=3).key] is None


def test_a_bad_run_in_a_log_names_the_line(db: str, tmp_path: Path) -> None:
    log = tmp_path / "1.jsonl"
    assert invoke("db", "export", str(log), "--db", db).exit_code == 0
    line = json.loads(log.read_text().splitlines()[0])
    line["run"] = {"strategy": "tpe", "status": "exploded", "trials_asked": 1,
                   "trials_done": 1, "best_cycles": None, "command": "", "host": "",
                   "started_at": None, "finished_at": None}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(line) + "\n")
    result = invoke("db", "import", str(bad), "--db", str(tmp_path / "f.db"))
    assert result.exit_code == 1 and "line 1: run.status 'exploded'" in result.output
