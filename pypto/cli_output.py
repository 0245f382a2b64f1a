"""How the ``pypto`` command line talks: logging (``-v``, ``--log-level``), errors (one
line, or with ``--traceback`` the whole traceback, the user script's own for a script that
failed), ``--version``, and where a script's own prints go while a command inspects it.

The global options work before or after the command (``pypto -v tune x.py`` and
``pypto tune x.py -v``): ``GlobalOptionsGroup`` moves them to the front before Click
parses the command line.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import runpy
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperGroup

_PACKAGE = str(Path(__file__).resolve().parent)
LEVELS = ("debug", "info", "warning", "error")
#: options of the whole program, taken anywhere on the command line (with their value)
FLAGS = frozenset({"--verbose", "--traceback", "--version"})
VALUED = frozenset({"--log-level"})


@dataclass
class Settings:
    """What the global options asked for (one command per process)."""

    traceback: bool = False
    verbose: int = 0


SETTINGS = Settings()


def hoist(args: list[str]) -> list[str]:
    """``args`` with the global options (and their values) moved to the front; nothing
    after ``--`` moves."""
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if arg in FLAGS or (len(arg) > 1 and arg[0] == "-" and set(arg[1:]) == {"v"}):
            front.append(arg)
        elif name in VALUED:
            front.append(arg)
            if "=" not in arg and i + 1 < len(args):
                i += 1
                front.append(args[i])
        else:
            rest.append(arg)
        i += 1
    return front + rest


class GlobalOptionsGroup(TyperGroup):
    """A Typer group that takes the global options anywhere on the command line."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist(list(args)))


def configure(verbose: int, level: str | None, show_traceback: bool) -> None:
    """Log PyPTO's messages on stderr: warnings by default, ``-v`` info, ``-vv`` debug;
    ``--log-level`` names the level."""
    SETTINGS.verbose, SETTINGS.traceback = verbose, show_traceback
    if level is not None and level.lower() not in LEVELS:
        typer.echo(f"error: --log-level must be one of {', '.join(LEVELS)}, got {level!r}",
                   err=True)
        raise typer.Exit(2)
    name = level.upper() if level else ("DEBUG" if verbose > 1 else
                                        "INFO" if verbose == 1 else "WARNING")
    from rich.logging import RichHandler

    from pypto.report.console import console

    logger = logging.getLogger("pypto")
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = RichHandler(console=console(stderr=True), show_time=False, show_path=False,
                          markup=False, rich_tracebacks=False)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(name)
    logger.propagate = False


def version_text() -> str:
    import platform

    from pypto.sim import MODEL_VERSION
    from pypto.version import __version__

    return (f"pypto {__version__} (timing model {MODEL_VERSION}, Python "
            f"{platform.python_version()})")


#: what a terminal would act on instead of showing: C0 and C1 controls but newline and
#: tab (ESC starts colour and cursor sequences, CR overwrites the line), and the Unicode
#: marks that reorder or hide text (bidirectional overrides, zero-width characters)
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e"
                          "\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with the characters a terminal would act on written as escapes
    (``\\x1b``), so a name or an error read from a file or a database prints as what it
    is: it cannot recolour, clear or rewrite the screen."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                            else f"\\u{ord(m.group()):04x}", text)


def echo(text: str, err: bool = False) -> None:
    """``typer.echo`` of ``printable(text)``."""
    typer.echo(printable(text), err=err)


def fail(message: str) -> typer.Exit:
    """Say ``error: message`` on stderr; with ``--traceback``, first the traceback of the
    exception being handled (a failed script's own). Returns the ``Exit(1)`` to raise."""
    if SETTINGS.traceback:
        shown = script_exception(sys.exc_info()[1])
        if shown is not None:
            typer.echo("".join(traceback.format_exception(shown)).rstrip(), err=True)
    echo(f"error: {message}", err=True)
    return typer.Exit(1)


def script_exception(exc: BaseException | None) -> BaseException | None:
    """The exception a user's script raised, when ``exc`` (a ``ScriptError``) stands for
    it, else ``exc``: the traceback worth showing."""
    from pypto.frontend.capture import ScriptError

    if isinstance(exc, ScriptError):
        cause = exc.__cause__ or exc.__context__
        if cause is not None:
            # from the script's first frame on: how PyPTO ran it is no part of the story
            tb = cause.__traceback__
            while tb is not None and tb.tb_next is not None and _runner_frame(tb.tb_frame):
                tb = tb.tb_next
            return cause.with_traceback(tb)
    return exc


def _runner_frame(frame: Any) -> bool:
    name = frame.f_code.co_filename
    return name.startswith((_PACKAGE, "<frozen runpy>")) or name == runpy.__file__


@contextlib.contextmanager
def script_output() -> Iterator[None]:
    """Keep what an inspected script prints out of a command's output: dropped, or with
    ``-v`` sent to stderr."""
    target = sys.stderr if SETTINGS.verbose else io.StringIO()
    with contextlib.redirect_stdout(target):
        yield


# -- option values a command checks before doing anything -----------------------------------

#: the most trials (or --early-stopping patience) a command takes: counts are stored as
#: 64-bit integers, and a billion trials of the fastest workload would take years
MAX_COUNT = 1_000_000_000
#: Optuna, NumPy and the strategies take seeds of 32 bits
MAX_SEED = 2**32 - 1
#: ``--timeout`` above this many seconds (about 31 years) means no timeout at all
MAX_SECONDS = 1e9


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, where the system has one)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_tune_options(*, trials: int, workers: int, timeout: float | None,
                       early_stopping: int | None, seed: int | None) -> None:
    """Raise ``typer.Exit(1)`` with one line naming the first bad option of ``pypto tune``."""
    import math

    if trials < 1:
        raise fail(f"--trials must be at least 1, got {trials}")
    if trials > MAX_COUNT:
        raise fail(f"--trials must be at most {MAX_COUNT:,}, got {trials}")
    cpus = usable_cpus()
    if workers < 1:
        raise fail(f"--workers must be at least 1, got {workers}")
    if workers > cpus:
        raise fail(f"--workers {workers} is more than the {cpus} CPU(s) this machine lets "
                   f"PyPTO use: give at most --workers {cpus} (each worker simulates on a "
                   "CPU of its own)")
    if timeout is not None and not (math.isfinite(timeout) and 0 < timeout <= MAX_SECONDS):
        raise fail(f"--timeout must be a number of seconds between 0 and {MAX_SECONDS:g} "
                   f"(leave it out for no timeout), got {timeout}")
    if early_stopping is not None and early_stopping < 1:
        raise fail(f"--early-stopping must be at least 1, got {early_stopping}")
    if early_stopping is not None and early_stopping > MAX_COUNT:
        raise fail(f"--early-stopping must be at most {MAX_COUNT:,}, got {early_stopping}")
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise fail(f"--seed must be between 0 and {MAX_SEED} (2**32 - 1), got {seed}")


_EXAMPLE_NAMES = {"--html": "profile.html", "--trace": "trace.json"}


def writable_file(path: Path, option: str) -> None:
    """Raise ``typer.Exit(1)`` unless ``path`` can be a file a command writes (checked
    before the command's work, so a typo does not cost a whole run)."""
    if path.is_dir():
        example = path / _EXAMPLE_NAMES.get(option, "out.html")
        raise fail(f"{option} {path} is a directory: give a file name, like {example}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise fail(f"{option} {path}: {parent} is a file, not a directory")
