"""Helpers every op family's space shares: rounding, the buffer-depth range, the grid
of core counts and of tile sizes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_DEPTH = 4  # buffers per value or level: 1 (none), 2 (ping-pong) .. 4
CORE_GRID = (1, 2, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48)
TILE_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def core_choices(available: int) -> tuple[int, ...]:
    """The core counts a space offers on a target with ``available`` cores."""
    return tuple(sorted({c for c in CORE_GRID if c <= available} | {available}))


def core_choice(count: int, available: int) -> int:
    """The largest core count on the spaces' grid that is at most ``count``."""
    return max(c for c in core_choices(available) if c <= max(1, count))


def tile_sizes(extent: int, unit: int, cap: int) -> tuple[int, ...]:
    """Tile sizes for an extent: unit x 1, 2, 3, 4, 6, 8, 12, 16, ... up to ``cap``, and
    the extent rounded up to the unit (one tile) when that is below ``cap``."""
    full = round_up(extent, unit)
    out = {unit * m for m in TILE_STEPS if unit * m <= min(full, cap)}
    if full <= cap:
        out.add(full)
    return tuple(sorted(out))


def at_most(choices: Sequence[Any], value: int) -> int:
    """The largest of ``choices`` (ascending ints) at most ``value``, else the smallest:
    where a default heuristic's halving lands between two points of an axis."""
    below = [c for c in choices if c <= value]
    return below[-1] if below else choices[0]
