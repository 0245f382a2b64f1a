"""The benchmark suite (``../shared/workloads/suite.json``: published model shapes) as
compiled PyPTO kernels, for the benchmark scripts.

    from suite import load_cases
    for case in load_cases(ops={"matmul", "conv2d"}):
        case.compiled, case.index   # the Compiled kernel and its main workload's index
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypto

ROOT = Path(__file__).resolve().parent.parent
SUITE = Path(os.environ.get("PYPTO_SUITE", ROOT.parent / "shared" / "workloads" / "suite.json"))
DTYPE = "float16"
_EPILOGUES: dict[str, Callable[[Any], Any]] = {"relu": pypto.relu, "gelu": pypto.gelu}


@dataclass
class Case:
    name: str
    op: str
    source: str
    compiled: Any          # pypto Compiled
    index: int             # the workload the case is about (the matmul or conv)

    @property
    def workload(self) -> Any:
        return self.compiled.workloads[self.index]


def _tail(x: Any, ops: Iterable[str]) -> Any:
    for name in ops:
        x = _EPILOGUES[name](x)
    return x


def _kernel(entry: dict[str, Any]) -> tuple[Callable[..., Any], list[Any], str]:
    op, tail = entry["op"], entry.get("epilogue", [])
    if op == "matmul":
        batch = (entry["batch"],) if "batch" in entry else ()
        specs = [pypto.spec((*batch, entry["M"], entry["K"]), DTYPE),
                 pypto.spec((*batch, entry["K"], entry["N"]), DTYPE)]
        return (lambda a, b: _tail(pypto.matmul(a, b), tail)), specs, "matmul"
    if op == "conv2d":
        x = pypto.spec((entry["N"], entry["H"], entry["W"], entry["C"]), DTYPE, layout="NHWC")
        w = pypto.spec((entry["K"], entry["C"], entry["R"], entry["S"]), DTYPE)
        stride, pad = entry.get("stride", 1), entry.get("pad", 0)
        return (lambda a, b: _tail(pypto.conv2d(a, b, stride=stride, padding=pad), tail)), \
            [x, w], "conv2d"
    if op == "softmax":
        return (lambda a: pypto.softmax(a)), [pypto.spec((entry["rows"], entry["cols"]),
                                                         DTYPE)], "vector"
    if op == "layernorm":
        return (lambda a: pypto.layernorm(a)), [pypto.spec((entry["rows"], entry["cols"]),
                                                           DTYPE)], "vector"
    if op == "elementwise":
        shape, chain = tuple(entry["shape"]), entry["chain"]
        if chain and chain[0] == "add":
            return (lambda a, b: _tail(a + b, chain[1:])), \
                [pypto.spec(shape, DTYPE), pypto.spec(shape, DTYPE)], "vector"
        return (lambda a: _tail(a, chain)), [pypto.spec(shape, DTYPE)], "vector"
    raise ValueError(f"suite entry {entry['name']!r}: unknown op {op!r}")


def load_cases(ops: set[str] | None = None, names: set[str] | None = None,
               target: str = "ascend910b", path: Path = SUITE) -> list[Case]:
    """The suite's entries (those of ``ops`` / ``names`` when given), compiled with
    their default schedules on ``target`` (the database is not consulted)."""
    entries = json.loads(path.read_text())["workloads"]
    cases = []
    old = os.environ.get("PYPTO_DB")
    os.environ["PYPTO_DB"] = "sqlite://"  # an empty in-memory database: defaults only
    try:
        for entry in entries:
            if (ops and entry["op"] not in ops) or (names and entry["name"] not in names):
                continue
            fn, specs, family = _kernel(entry)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                compiled = pypto.kernel(fn).lower(*specs, target=target)
            index = next(i for i, wl in enumerate(compiled.workloads) if wl.family == family)
            cases.append(Case(entry["name"], entry["op"], entry.get("source", ""), compiled,
                              index))
    finally:
        if old is None:
            os.environ.pop("PYPTO_DB", None)
        else:
            os.environ["PYPTO_DB"] = old
    return cases


def steepest_descent(cost: Any, space: Any, start: Any, max_steps: int) -> tuple[Any, Any]:
    """Move to the cheapest of ``space.neighbors`` (ties by schedule key) while it is
    cheaper, at most ``max_steps`` times: ``(schedule, cost)`` where it stopped."""
    best, best_cost = start, cost(start)
    for _ in range(max_steps):
        scored = [(cost(n), n.key, n) for n in space.neighbors(best)]
        if not scored:
            break
        value, _, schedule = min(scored, key=lambda t: (t[0], t[1]))
        if value >= best_cost:
            break
        best, best_cost = schedule, value
    return best, best_cost
