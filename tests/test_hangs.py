"""``pypto tune --timeout`` bounds the capture run too (issue 15, defect 6): a script that
never returns once hung ``pypto tune loops.py --timeout 5`` silently. Now it is stopped
at the limit with a message saying where it was; a script stuck where no exception
reaches it has every thread's traceback printed and the process ended."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pypto.frontend.capture import ScriptError, run_script, time_limit

ROOT = Path(__file__).resolve().parent.parent

LOOPS = textwrap.dedent("""
    import pypto

    @pypto.kernel
    def k(a, b):
        return pypto.matmul(a, b)

    def settle(n):
        while True:
            try:
                n += 1
            except Exception:       # a script's own handler must not swallow the stop
                pass

    settle(3)
""")


def _tune(script: Path, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pypto.cli", "tune", str(script),
                           "--db", f"sqlite:///{tmp_path / 't.db'}", *extra],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_script_that_never_returns_is_stopped_at_the_timeout(tmp_path: Path) -> None:
    script = tmp_path / "loops.py"
    script.write_text(LOOPS)
    done = _tune(script, tmp_path, "--timeout", "2")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    message = " ".join(done.stderr.split())
    # the line of the loop the stop found it on
    assert re.search(rf"error: {re.escape(str(script))}:(9|10|11), in settle\(\) \(`.+`\): "
                     "still running after 2 s", message), message
    assert "--timeout" in message


def test_the_message_names_the_call_the_script_was_in(tmp_path: Path) -> None:
    script = tmp_path / "sleeps.py"
    script.write_text("import time\n\nprint('hello')\ntime.sleep(1000)\n")
    lib = tmp_path / "helper.py"
    lib.write_text("def spin():\n    while True:\n        pass\n")
    caller = tmp_path / "calls.py"
    caller.write_text("import helper\n\nhelper.spin()\n")
    with pytest.raises(ScriptError, match=r"sleeps.py:4, in the script's top level "
                                          r"\(`time.sleep\(1000\)`\): still running after "
                                          r"0.5 s"):
        with time_limit(0.5, script):
            run_script(script)
    with pytest.raises(ScriptError, match=r"calls.py:3, in the script's top level "
                                          r"\(`helper.spin\(\)`\), calling .*helper.py:[23], "
                                          r"in spin\(\)"):
        with time_limit(0.5, caller):
            run_script(caller)
    # the timer and the handler are as they were
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.default_int_handler)


def test_a_script_within_its_time_runs_as_usual(tmp_path: Path) -> None:
    script = tmp_path / "quick.py"
    script.write_text("import sys\nsys.modules['__main__'].done = 42\nx = 42\n")
    with time_limit(30, script):
        run_script(script)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_script_stuck_out_of_reach_has_its_traceback_dumped(tmp_path: Path) -> None:
    """SIGALRM blocked, so the stop cannot be raised in it: after the grace period the
    watchdog prints every thread's traceback and exits with status 1."""
    script = tmp_path / "stuck.py"
    script.write_text("import signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, "
                      "[signal.SIGALRM])\nwhile True:\n    pass\n")
    code = ("import sys; from pypto.frontend import capture as c; c.GRACE_S = 1.0\n"
            f"with c.time_limit(0.5, {str(script)!r}):\n"
            f"    c.run_script({str(script)!r})\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "Timeout" in done.stderr
    assert f'File "{script}", line 4' in done.stderr or f'File "{script}", line 3' in \
        done.stderr
