"""Programs and cycles stay what they were: every entry of ``tests/corpus/codegen_corpus.json``
(random workloads of every family and target, under their default schedule and random
points of their spaces, recorded before the core was restacked) lowers to the same PTO
assembly, byte for byte, and simulates to the same cycles.

A change meant to alter programs or cycles regenerates the corpus
(``python tests/corpus/make_codegen_corpus.py``) and says so in its commit.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from pypto.codegen.lower import lower
from pypto.ir.workload import Workload
from pypto.schedule_space import Schedule, complete
from pypto.sim.roofline import workload_bound
from pypto.sim.timing import simulate
from pypto.targets import load_target

CORPUS = json.loads((Path(__file__).parent / "corpus" / "codegen_corpus.json").read_text())
ENTRIES = CORPUS["entries"]


def test_the_corpus_covers_every_family_and_target():
    assert len(ENTRIES) >= 200
    assert {e["workload"]["family"] for e in ENTRIES} == {"matmul", "vector", "conv2d"}
    assert {e["target"] for e in ENTRIES} == {"ascend910b", "ascend310", "mlu370"}


@pytest.mark.parametrize("index", range(len(ENTRIES)))
def test_program_and_cycles_are_unchanged(index):
    entry = ENTRIES[index]
    wl = Workload.from_json(entry["workload"])
    assert wl.to_json() == entry["workload"]
    target = load_target(entry["target"])
    # recorded before the fusion axes existed (completed to their fused values, which
    # give the programs recorded)
    schedule = complete(wl, Schedule(entry["schedule"]))
    program = lower(wl, schedule, target)
    assert program.num_instructions == entry["instructions"]
    assert hashlib.sha256(program.asm().encode()).hexdigest() == entry["asm_sha256"], \
        (entry["kernel"], schedule.to_json())
    result = simulate(program, target, bound_cycles=workload_bound(wl, target))
    assert result.cycles == entry["cycles"], (entry["kernel"], schedule.to_json())
