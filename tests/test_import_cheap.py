"""`import pypto` must not load the optional heavy libraries; they load on first use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("optuna", "xgboost", "sqlalchemy", "plotly", "typer", "rich", "jinja2", "alembic",
         "psycopg")

# Runs in a fresh interpreter: this test process has likely imported some of them already.
PROBE = f"""
import sys
import pypto
print(",".join(m for m in {HEAVY!r} if m in sys.modules))
"""


def test_import_pypto_loads_no_heavy_module() -> None:
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=root, capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    loaded = [m for m in result.stdout.strip().split(",") if m]
    assert loaded == [], f"`import pypto` imported {loaded}; import them where first used"
