"""``Schedule``: one point of a schedule space, a frozen mapping knob -> value."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from typing import Any

from pypto.errors import ScheduleError


class Schedule(Mapping[str, Any]):
    """Knob values (ints, strings, bools), immutable, with canonical JSON and a key.

    Example:
        >>> from pypto.schedule_space import Schedule
        >>> Schedule({"m1": 128, "n1": 128}).to_json()
        '{"m1":128,"n1":128}'
    """

    __slots__ = ("_items",)

    def __init__(self, knobs: Mapping[str, Any] | None = None, **kw: Any) -> None:
        items = dict(knobs or {}, **kw)
        for k, v in items.items():
            if not isinstance(k, str) or not isinstance(v, (int, str, bool)) or \
                    isinstance(v, float):
                raise ScheduleError(f"schedule knob {k!r}={v!r}: knobs are strings mapped to "
                                    "ints, strings or bools")
        self._items = dict(sorted(items.items()))

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(tuple(self._items.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Schedule):
            return self._items == other._items
        return isinstance(other, Mapping) and self._items == dict(other)

    def replace(self, **changes: Any) -> Schedule:
        return Schedule({**self._items, **changes})

    def to_json(self) -> str:
        return json.dumps(self._items, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_json(text: str) -> Schedule:
        return Schedule(json.loads(text))

    @property
    def key(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def __repr__(self) -> str:
        return f"Schedule({self._items!r})"
