"""Write the seed programs of the PTO fuzzers (``fuzz/seeds/*.pto``): the assembly of
small entries of the codegen corpus (every family and target PyPTO lowers), a raw-mode
loop, and the reproducers of issue 15's defect 1. Run from the repository root:

    python fuzz/make_seeds.py
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT / "fuzz" / "seeds"
MAX_INSTRUCTIONS = 150   # the reference engine runs each mutant too: keep them quick

HAND_WRITTEN = {
    "raw_square": """.program raw target=ascend910b
.tensor x float32 [256] in
.tensor out float32 [256] out
.core 0
    COPY.F32 UB[0x0:1x256,256,1], GM[x][0:1x256,256,1]
    SET_FLAG MTE2, VEC, 0
    WAIT_FLAG MTE2, VEC, 0
    MOV R0, #0
    MOV R1, #4
loop:
    VLD.F32 Q1, UB[R0]
    VMUL.F32 Q0, Q1, Q1
    VST.F32 UB[R0+0x400], Q0
    ADD R0, R0, #256
    SUB R1, R1, #1
    BNE R1, #0, loop
    SET_FLAG VEC, MTE3, 0
    WAIT_FLAG VEC, MTE3, 0
    COPY.F32 GM[out][0:1x256,256,1], UB[0x400:1x256,256,1]
""",
    "gm_dtype_write": """.program p target=ascend910b
.tensor A int8 [16384] out
.core 0
    COPY.F32 GM[A][0:1x16384,16384,1], UB[0x0:1x16384,16384,1]
""",
    "gm_dtype_read": """.program p target=ascend910b
.tensor A int8 [16384] in
.core 0
    COPY.F32 UB[0x0:1x16384,16384,1], GM[A][0:1x16384,16384,1]
""",
    "two_cores_sync_all": """.program p target=ascend310
.tensor A float16 [64,64] in
.tensor B float16 [64,64] out
.core 0
    COPY.F16 UB[0x0:32x64,64,1], GM[A][0:32x64,64,1]
    SET_FLAG MTE2, VEC, 0
    WAIT_FLAG MTE2, VEC, 0
    VEXP.F16 UB[0x1000:32x64,64,1], UB[0x0:32x64,64,1]
    SET_FLAG VEC, MTE3, 0
    WAIT_FLAG VEC, MTE3, 0
    COPY.F16 GM[B][0:32x64,64,1], UB[0x1000:32x64,64,1]
    SYNC_ALL
.core 1
    COPY.F16 UB[0x0:32x64,64,1], GM[A][2048:32x64,64,1]
    SET_FLAG MTE2, VEC, 0
    WAIT_FLAG MTE2, VEC, 0
    VREDSUM.F16 UB[0x1000:32x1,16,1], UB[0x0:32x64,64,1]
    BARRIER
    SYNC_ALL
""",
}


def main() -> None:
    from pypto.codegen.lower import lower
    from pypto.ir.workload import Workload
    from pypto.schedule_space import Schedule, complete
    from pypto.targets import load_target

    entries = json.loads((ROOT / "tests" / "corpus" / "codegen_corpus.json").read_text())
    SEEDS.mkdir(exist_ok=True)
    for old in SEEDS.glob("*.pto"):
        old.unlink()
    seen: dict[tuple[str, str], int] = {}
    for entry in entries["entries"]:
        group = (entry["kernel"], entry["target"])
        if entry["instructions"] > MAX_INSTRUCTIONS or seen.get(group, 0) >= 2:
            continue
        seen[group] = seen.get(group, 0) + 1
        wl = Workload.from_json(entry["workload"])
        target = load_target(entry["target"])
        program = lower(wl, complete(wl, Schedule(entry["schedule"])), target)
        name = f"{entry['kernel']}_{entry['target']}_{seen[group]}".replace(" ", "_")
        name = name.replace("+", "_").replace("(", "_").replace(")", "")
        (SEEDS / f"{name}.pto").write_text(program.asm())
    for name, text in HAND_WRITTEN.items():
        (SEEDS / f"{name}.pto").write_text(text)
    print(f"wrote {len(list(SEEDS.glob('*.pto')))} seeds to {SEEDS}")


if __name__ == "__main__":
    main()
