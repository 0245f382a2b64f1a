"""Hybrid mode: a raw block of hand-written PTO assembly inside a kernel, against what
the compiler makes of the same computation, timed on the simulated NPU.

The computation centres the columns of a matrix: ``x - x.mean(axis=0)``. The compiler
splits it into three workloads: a column sum, which reads ``x`` down its columns (one
element every row: every element a short DMA run), the scaling of the sums, and the
subtraction, which reads ``x`` again. The raw block reads ``x`` once, along its rows:
each of 32 cores loads 32 rows into its vector buffer and keeps them there while the
cores add their partial column sums into GM (an atomic add between two ``SYNC_ALL``
meetings), then subtracts the mean from the rows it holds and writes them out.

    python examples/hybrid.py              # the raw block against the default schedules
    python examples/hybrid.py --search 32  # ... and the best of 32 sampled schedules
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import pypto
from pypto.sim.result import SimResult

ROWS, COLS, CORES = 1024, 1024, 32


def center_columns_asm(rows: int, cols: int, cores: int) -> str:
    """The raw block: core c centres rows [c * rows/cores, (c+1) * rows/cores) of GM[x]
    into GM[out]; GM[sums] collects the column sums. Per core, UB holds its rows at 0x0,
    a scratch of 8 rows after them, and one row for the zeros (core 0) or the mean."""
    per = rows // cores
    row = cols * 4                        # bytes of one fp32 row
    scratch, single = per * row, per * row + 8 * row
    region = f"1x{cols},{cols},1"
    lines = []
    for core in range(cores):
        first = core * per * cols         # element offset of the core's first row
        lines += [
            f".core {core}",
            f"    COPY.F32 UB[0x0:{per}x{cols},{cols},1], GM[x][{first}:{per}x{cols},{cols},1]",
            "    SET_FLAG MTE2, VEC, 0",
            "    WAIT_FLAG MTE2, VEC, 0",
            # column sums of the core's rows: 32 rows -> 8 (three adds of 8 rows), -> 1
            f"    VADD.F32 UB[{scratch:#x}:8x{cols},{cols},1], UB[0x0:8x{cols},{cols},1], "
            f"UB[{8 * row:#x}:8x{cols},{cols},1]",
        ]
        for block in range(2, per // 8):
            lines.append(f"    VADD.F32 UB[{scratch:#x}:8x{cols},{cols},1], "
                         f"UB[{scratch:#x}:8x{cols},{cols},1], "
                         f"UB[{block * 8 * row:#x}:8x{cols},{cols},1]")
        for half in (4, 2, 1):
            lines.append(f"    VADD.F32 UB[{scratch:#x}:{half}x{cols},{cols},1], "
                         f"UB[{scratch:#x}:{half}x{cols},{cols},1], "
                         f"UB[{scratch + half * row:#x}:{half}x{cols},{cols},1]")
        if core == 0:                     # the sums start at zero
            lines += [f"    VDUP.F32 UB[{single:#x}:{region}], #0.0",
                      "    SET_FLAG VEC, MTE3, 0",
                      "    WAIT_FLAG VEC, MTE3, 0",
                      f"    COPY.F32 GM[sums][0:{region}], UB[{single:#x}:{region}]"]
        lines += [
            "    SYNC_ALL",                   # every core's zeros and partial sums are ready
            f"    COPY.F32.ATOMIC GM[sums][0:{region}], UB[{scratch:#x}:{region}]",
            "    SYNC_ALL",                   # every partial sum is in
            f"    COPY.F32 UB[{single:#x}:{region}], GM[sums][0:{region}]",
            "    SET_FLAG MTE2, VEC, 1",
            "    WAIT_FLAG MTE2, VEC, 1",
            f"    VMULS.F32 UB[{single:#x}:{region}], UB[{single:#x}:{region}], #{1.0 / rows!r}",
            f"    VSUB.F32 UB[0x0:{per}x{cols},{cols},1], UB[0x0:{per}x{cols},{cols},1], "
            f"UB[{single:#x}:{per}x{cols},0,1]",
            "    SET_FLAG VEC, MTE3, 1",
            "    WAIT_FLAG VEC, MTE3, 1",
            f"    COPY.F32 GM[out][{first}:{per}x{cols},{cols},1], UB[0x0:{per}x{cols},{cols},1]",
        ]
    return "\n".join(lines) + "\n"


@pypto.kernel
def center_compiled(x):
    return x - pypto.mean(x, axis=0, keepdims=True)


def center_raw_kernel(rows: int, cols: int, cores: int) -> pypto.Kernel:
    code = center_columns_asm(rows, cols, cores)

    @pypto.kernel
    def center_raw(x):
        with pypto.raw():
            _, out = pypto.inline_asm(code, x=x, outputs={
                "sums": pypto.spec((1, cols), "float32"),
                "out": pypto.spec((rows, cols), "float32")})
        return out

    return center_raw


def timed(kernel: pypto.Kernel, x: pypto.Tensor) -> tuple[np.ndarray, SimResult, str]:
    """The kernel's result, its timing and the profiler's report."""
    with pypto.Profiler() as prof:
        out = kernel(x)
    # under `pypto tune` (capture mode) kernels run off the device: no profiled call
    result = prof.calls[0].result if prof.calls else kernel.lower(x).simulate()
    return out.numpy(), result, prof.report()


def best_sampled(kernel: pypto.Kernel, x: pypto.Tensor, samples: int, seed: int = 0
                 ) -> int:
    """The cycles of the compiled kernel with, for each workload, the fastest of the
    default and ``samples`` schedules drawn from its space (measured: lowered and
    simulated)."""
    import random

    from pypto.schedule_space import space_for

    compiled = kernel.lower(x)
    rng = random.Random(seed)
    total = 0
    for i, wl in enumerate(compiled.workloads):
        space = space_for(wl, compiled.target)
        best = compiled.simulate_each()[i].cycles
        for _ in range(samples):
            trial = compiled.with_schedule(i, space.sample(rng))
            best = min(best, trial.simulate_each()[i].cycles)
        total += best
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--search", type=int, default=0, metavar="N",
                        help="also time the best of N sampled schedules of each workload")
    args = parser.parse_args()
    # no tuned schedules are needed here: the defaults are what the comparison is about
    warnings.simplefilter("ignore", pypto.ScheduleFallbackWarning)
    rng = np.random.default_rng(0)
    x = pypto.tensor(rng.standard_normal((ROWS, COLS)), dtype="float32")
    want = x.numpy() - x.numpy().mean(axis=0, keepdims=True)
    with pypto.Context(device_type="npu", target="ascend910b"):
        compiled_out, compiled, _ = timed(center_compiled, x)
        raw_out, raw, report = timed(center_raw_kernel(ROWS, COLS, CORES), x)
        searched = best_sampled(center_compiled, x, args.search) if args.search else None
    for name, out in (("compiled", compiled_out), ("raw block", raw_out)):
        error = float(np.abs(out - want).max())
        assert error < 1e-4, f"{name}: max |error| {error:.2e} vs NumPy"
        print(f"{name:<10} max |error| vs NumPy {error:.1e}")
    print(report)
    print(f"{'':<28}{'cycles':>10}{'us':>9}{'GM read MiB':>13}{'GM write MiB':>14}")
    for name, r in (("compiler (3 workloads)", compiled), ("raw block", raw)):
        print(f"{name:<28}{r.cycles:>10}{r.time_us:>9.2f}{r.gm_read_bytes / 2**20:>13.2f}"
              f"{r.gm_write_bytes / 2**20:>14.2f}")
    print(f"the raw block takes {compiled.cycles / raw.cycles:.1f}x fewer cycles and reads "
          f"{compiled.gm_read_bytes / raw.gm_read_bytes:.1f}x fewer GM bytes than the "
          "compiler's default schedules")
    if searched is not None:
        print(f"best of {args.search} sampled schedules per workload: {searched} cycles; the "
              f"raw block takes {searched / raw.cycles:.1f}x fewer")


if __name__ == "__main__":
    main()
