"""Screenshots of the two HTML pages for the docs: docs/tuning_report.png and
docs/profile.png. Tunes examples/gemm.py (two runs, model and random, in a fresh database;
the model's scores give the predicted-vs-measured panel),
writes `pypto report`, profiles examples/gemm.py and examples' softmax, and captures both
pages in headless Chromium (tests/browser.py). Run: python docs/make_screenshots.py
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from browser import Browser  # noqa: E402


def pypto(*args: str, cwd: pathlib.Path) -> None:
    subprocess.run([sys.executable, "-m", "pypto.cli", *args], cwd=cwd, check=True,
                   capture_output=True, text=True)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = pathlib.Path(tmp)
        db = f"sqlite:///{tmp_path / 'shots.db'}"
        gemm = str(ROOT / "examples" / "gemm.py")
        pypto("tune", gemm, "--trials", "100", "--seed", "1", "--strategy", "model", "--db", db,
              cwd=tmp_path)
        pypto("tune", gemm, "--trials", "200", "--strategy", "random", "--seed", "2",
              "--db", db, cwd=tmp_path)
        pypto("report", "--db", db, "-o", str(tmp_path / "report.html"), cwd=tmp_path)
        pypto("run", gemm, "--profile", "--html", str(tmp_path / "profile.html"), cwd=tmp_path)
        with Browser() as b:
            for name, out in (("report.html", "tuning_report.png"),
                              ("profile.html", "profile.png")):
                page = b.open(tmp_path / name, wait_for="window.pyptoDoneAt !== undefined",
                              timeout=180)
                page.eval("window.pyptoRenderAll()", timeout=300)
                assert page.errors == [], page.errors
                page.screenshot(ROOT / "docs" / out, width=1400, height=1900)
                print(f"wrote docs/{out}")


if __name__ == "__main__":
    main()
