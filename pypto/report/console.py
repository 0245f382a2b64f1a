"""Rich consoles for PyPTO's text output.

Rich draws at the terminal's width, and at 80 columns when the output is not a terminal
(a pipe, a file, CI's log), where it would fold tables and cut long lines. Without a
terminal (and without ``$COLUMNS``) our consoles are as wide as the text: nothing is
folded, ``grep`` sees whole lines.
"""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

#: the width without a terminal: wider than any line PyPTO prints
UNBOUNDED = 10_000


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): the terminal's width, else unbounded."""
    from rich.console import Console

    out = Console(stderr=stderr)
    if not out.is_terminal and "COLUMNS" not in os.environ:
        out.width = UNBOUNDED
    return out


def render(*renderables: Any) -> str:
    """Rich renderables (tables...) as plain text, each at its natural width, with no
    trailing spaces."""
    from rich.console import Console

    buffer = io.StringIO()
    out = Console(file=buffer, width=UNBOUNDED, color_system=None, highlight=False,
                  emoji=False, markup=False)
    for item in renderables:
        out.print(item)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())
