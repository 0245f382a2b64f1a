"""The reference timing engine: the timing rules of the simulated NPU, written as
plainly as possible. It is the specification; the Cython engine (``_engine.pyx``) must
give identical results, field for field, and is what normally runs.

Rules (one core; all cycle counts are integers, rounded up where a rate divides):

* **Issue.** The scalar unit issues one instruction per cycle in program order (the
  first at cycle 0) into the queue of its pipe. A queue holds ``queue_depth``
  instructions; when it is full, issue waits until the instruction ``queue_depth``
  places earlier on that pipe has started (a *queue stall*).
* **Pipes** run their instructions in order. An instruction starts when it is issued
  and its pipe is *free*; the time a pipe waits for issue is *starved* time.
* **Work.** A DMA occupies its pipe for ``ceil(eff / rate + rows * row_cycles)`` and
  completes ``latency`` cycles after that (so transfers overlap their latency). ``eff``
  counts each contiguous run as at least ``min_burst`` bytes (the short-row penalty);
  element-strided rows are one run per element. A COPY reads ``sdtype`` elements and
  writes ``dtype`` ones (the FIX pipe converts the fp32 accumulator on the way out):
  ``eff`` counts the bytes read; GM traffic (L2 lines, DRAM time, GM bytes) counts the
  GM tensor's own (read: ``sdtype``, written: ``dtype``), and ``path_bytes`` the bytes
  written. An MMAD takes ``issue_overhead`` + fractals x passes; a vector op
  ``issue_overhead + ceil(bytes x op_cost / bytes_per_cycle)``.
* **GM and L2.** GM reads look up every 512-byte line they touch in an LRU,
  16-way set-associative L2 of the target's size (cold at launch). Hits move at the L2
  rate, misses at the path's GM rate (the access's bytes split between the two in
  proportion to its lines). DRAM works in whole lines: each missed line costs
  ``l2.line_bytes`` of DRAM reads, however few of its bytes the access wanted, and is
  then in L2 whole. Writes touch their lines in L2 (write-allocate) and cost DRAM the
  bytes written (short runs counted as ``min_burst``): the L2 keeps written bytes by
  mask and merges writes that share a line, so a partly written line costs only its
  written bytes, once. (A later read of a part of such a line that no write covered
  hits, as if fetched: a simplification; codegen reads a GM tensor it also writes only
  where it wrote it, or before.) DRAM traffic occupies a chip-wide DRAM server at
  ``target.dram_bytes_per_cycle`` (the nominal ``gm.chip_bytes_per_cycle`` times
  ``gm.sustained_fraction``), shared first come first served by all cores, so cores
  moving data together slow each other down. (The roofline bound uses the nominal
  figure.)
* **Flags.** ``SET_FLAG`` (on the source pipe) leaves its queue when reached and raises
  its flag one cycle after everything before it on that pipe has completed.
  ``WAIT_FLAG`` blocks the destination pipe until the matching ``SET_FLAG`` (the k-th
  wait on a (source, destination, event) key takes the k-th set) has raised it; a wait
  whose set comes later in program order, or never, is a deadlock error. ``BARRIER``
  waits until every pipe has completed everything.
* **Cores** run concurrently, each from cycle 0; the kernel takes the slowest core plus
  the launch overhead. Cores are advanced one instruction at a time, earliest issue
  time first (ties: lower core), which orders their use of L2 and the DRAM server.
* **SYNC_ALL** (a barrier across cores, as AscendC's ``SyncAll``). A core that reaches
  it drains as for ``BARRIER``: it *arrives* at max(issue, every pipe's completion) and
  parks. When every core of the program has arrived at its k-th ``SYNC_ALL`` (counted
  per core; every core must execute equally many, or it is an error), all are released
  at the latest arrival + ``sync_all_cycles``: every pipe of each core is free and done
  then, and each core's next instruction issues then (ties: lower core first). The
  trace shows a ``SYNC_ALL`` from the core's arrival to the release. With one core it
  is a ``BARRIER`` that takes ``sync_all_cycles``.
* **Scalar instructions** (raw mode's MOV, ADD, SUB, MUL, BNE, BLT) run on the scalar
  unit itself: one issued at cycle ``t`` takes ``scalar_op_cycles`` of the target, and
  the next instruction issues when it is done. (Their effects, the control flow and the
  register-based addresses, were worked out before timing: ``pypto.sim.scalar``.) VLD
  and VST are copies along the target's data path between the vector memory and the
  registers.
* **Atomic copies.** A ``COPY`` with ``F_ATOMIC`` (accumulate into GM) is timed exactly
  as the plain GM write it replaces: the same L2 lines, DRAM traffic and costs.
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict

import numpy as np

from pypto.codegen.isa import COPIES, INSTR, REDUCE, SCALAR_OPS, VECTOR, Mem, Op, Pipe
from pypto.codegen.memories import memory_map
from pypto.codegen.program import Program
from pypto.errors import SimError
from pypto.ir.dtypes import BY_CODE
from pypto.sim.result import TRACE, SimResult, target_facts
from pypto.targets import Target

F = {name: i for i, name in enumerate(INSTR.names)}
NPIPES = len(Pipe)
NMEMS = len(Mem)
L2_WAYS = 16
GM_ALIGN = 4096  # symbols' base addresses in the simulated GM address space


def vector_cost_name(op: Op) -> str:
    """The target's vector cost key of an opcode: VADDS -> adds, VREDSUM -> redsum."""
    return op.name[1:].lower()


def symbol_bases(program: Program) -> list[int]:
    bases, top = [], 0
    for s in program.symbols:
        bases.append(top)
        top += -(-s.size * s.dtype.itemsize // GM_ALIGN) * GM_ALIGN
    return bases


class L2:
    """An LRU set-associative cache of GM lines (tags only: timing, not data)."""

    def __init__(self, target: Target) -> None:
        self.line = target.l2_line_bytes
        self.sets = max(1, target.l2_bytes // (self.line * L2_WAYS))
        self.tags = [-1] * (self.sets * L2_WAYS)
        self.stamps = [0] * (self.sets * L2_WAYS)
        self.clock = 0

    def access(self, line: int) -> bool:
        """Touch ``line``; True if it was present."""
        self.clock += 1
        base = (line % self.sets) * L2_WAYS
        tag = line // self.sets
        victim = base
        for way in range(base, base + L2_WAYS):
            if self.tags[way] == tag:
                self.stamps[way] = self.clock
                return True
            if self.stamps[way] < self.stamps[victim]:
                victim = way
        self.tags[victim] = tag
        self.stamps[victim] = self.clock
        return False


def gm_lines(base: int, rows: int, cols: int, rs: int, cs: int, isz: int,
             line: int) -> list[int]:
    """The L2 lines a strided GM access touches, row by row (repeats included)."""
    out = []
    contiguous = (cols == 1 or cs == 1) and (rows == 1 or rs == cols)
    if contiguous:
        first = base // line
        last = (base + rows * cols * isz - 1) // line
        return list(range(first, last + 1))
    for r in range(rows):
        row = base + r * rs * isz
        if cs == 1:
            out.extend(range(row // line, (row + cols * isz - 1) // line + 1))
        elif cs == 0:
            out.append(row // line)
        else:
            out.extend((row + c * cs * isz) // line for c in range(cols))
    return out


def burst_bytes(rows: int, cols: int, rs: int, cs: int, isz: int,
                min_burst: int) -> tuple[int, int]:
    """(real bytes, bytes as charged) of a strided access with the short-run penalty."""
    if (cols == 1 or cs == 1) and (rows == 1 or rs == cols):
        run, runs = rows * cols * isz, 1
    elif cs == 1:
        run, runs = cols * isz, rows
    elif cs == 0:
        run, runs = isz, rows
    else:
        run, runs = isz, rows * cols
    return run * runs, max(run, min_burst) * runs


class _Core:
    def __init__(self, index: int, stream: np.ndarray) -> None:
        self.index = index
        self.rows = stream.tolist()
        self.pc = 0
        self.last_issue = -1
        self.free = [0] * NPIPES
        self.done = [0] * NPIPES
        self.starts: list[list[int]] = [[] for _ in range(NPIPES)]
        self.flags: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        self.waits_taken: dict[tuple[int, int, int], int] = defaultdict(int)
        self.end = 0

    def next_issue(self) -> int:
        return self.last_issue + 1


class ReferenceEngine:
    """Simulates a ``Program`` on a ``Target`` by the rules above."""

    def __init__(self, program: Program, target: Target, trace: bool = False) -> None:
        self.program, self.target, self.want_trace = program, target, trace
        self.memories = memory_map(target)
        n = len(program.cores)
        self.pipe_busy = np.zeros((n, NPIPES), dtype=np.int64)
        self.flag_wait = np.zeros((n, NPIPES, NPIPES), dtype=np.int64)
        self.starved = np.zeros((n, NPIPES), dtype=np.int64)
        self.queue_stall = np.zeros((n, NPIPES), dtype=np.int64)
        self.path_bytes = np.zeros((NMEMS, NMEMS), dtype=np.int64)
        self.l2_hit_bytes = self.gm_read_bytes = self.gm_write_bytes = 0
        self.dram_read_bytes = self.dram_write_bytes = 0
        self.dram_rate = target.dram_bytes_per_cycle
        self.l2 = L2(target)
        self.server_free = 0
        self.bases = symbol_bases(program)
        self.trace: list[tuple] = []

    def run(self, bound_cycles: int) -> SimResult:
        from pypto.sim.check import check_sync_all

        check_sync_all(self.program)
        cores = [_Core(i, s) for i, s in enumerate(self.program.cores)]
        heap = [(0, c.index) for c in cores if c.rows]
        heapq.heapify(heap)
        parked: list[tuple[_Core, int, int]] = []   # at a SYNC_ALL: (core, index, arrival)
        while heap:
            _, i = heapq.heappop(heap)
            core = cores[i]
            arrival = self.step(core)
            core.pc += 1
            if arrival is not None:
                parked.append((core, core.pc - 1, arrival))
                if len(parked) == len(cores):
                    for resumed in self.release(parked):
                        heapq.heappush(heap, (resumed.next_issue(), resumed.index))
                    parked = []
            elif core.pc < len(core.rows):
                heapq.heappush(heap, (core.next_issue(), i))
        core_cycles = np.array([max([c.end, *c.done]) for c in cores], dtype=np.int64)
        cycles = self.target.launch_overhead_cycles + (int(core_cycles.max()) if len(cores) else 0)
        trace = None
        if self.want_trace:
            trace = np.array(sorted(self.trace), dtype=TRACE)
        names, copy_pipes = target_facts(self.target)
        return SimResult(self.target.name, self.target.clock_ghz, cycles, core_cycles,
                         self.pipe_busy, self.flag_wait, self.starved, self.queue_stall,
                         self.path_bytes, self.l2_hit_bytes, self.gm_read_bytes,
                         self.gm_write_bytes, self.dram_read_bytes, self.dram_write_bytes,
                         bound_cycles, self.program.num_instructions,
                         trace=trace, memories=names, copy_pipes=copy_pipes)

    def fail(self, core: _Core, message: str) -> SimError:
        from pypto.codegen.asm import print_instruction

        text = print_instruction(core.rows[core.pc], self.program.symbols, self.target).strip()
        return SimError(f"{self.program.where(core.index, core.pc)} ({text}): {message}")

    def release(self, parked: list[tuple[_Core, int, int]]) -> list[_Core]:
        """Release the cores parked at a SYNC_ALL (all of them); those with instructions
        left, to be resumed."""
        release = max(arrival for _, _, arrival in parked) + self.target.sync_all_cycles
        resumed = []
        for core, index, arrival in parked:
            for q in range(NPIPES):
                core.free[q] = max(core.free[q], release)
                core.done[q] = max(core.done[q], release)
            core.last_issue = release - 1   # the next instruction issues at the release
            self.record(core, core.rows[index][F["pipe"]], Op.SYNC_ALL, arrival, release,
                        index)
            if core.pc < len(core.rows):
                resumed.append(core)
        return resumed

    # -- one instruction --------------------------------------------------------------
    def step(self, core: _Core) -> int | None:
        """Time the core's next instruction; for a SYNC_ALL, return the core's arrival
        there (it then waits for the others) instead."""
        row = core.rows[core.pc]
        op, p = Op(row[F["op"]]), row[F["pipe"]]
        issue = core.next_issue()
        if p != Pipe.SCALAR and len(core.starts[p]) >= self.target.queue_depth:
            slot_free = core.starts[p][len(core.starts[p]) - self.target.queue_depth]
            if slot_free > issue:
                self.queue_stall[core.index, p] += slot_free - issue
                issue = slot_free
        core.last_issue = issue

        if op == Op.SYNC_ALL:
            return max(issue, *core.done)
        if op == Op.BARRIER:
            t = max(issue, *core.done)
            end = t + 1
            for q in range(NPIPES):
                core.free[q] = max(core.free[q], end)
                core.done[q] = max(core.done[q], end)
            core.last_issue = end
            core.end = max(core.end, end)
            self.record(core, p, op, t, end)
            return None
        if op == Op.NOP:
            core.end = max(core.end, issue + 1)
            self.record(core, p, op, issue, issue + 1)
            return None
        if op in SCALAR_OPS:
            end = issue + self.target.scalar_op_cycles
            core.last_issue = end - 1     # the next instruction issues when this is done
            self.record(core, p, op, issue, end)
            return None

        start = max(issue, core.free[p])
        self.starved[core.index, p] += max(0, issue - core.free[p])
        core.starts[p].append(start)
        if op == Op.SET_FLAG:
            raised = max(start, core.done[p]) + 1
            core.flags[(p, row[F["pipe2"]], row[F["event"]])].append(raised)
            self.record(core, p, op, start, raised)
            return None
        if op == Op.WAIT_FLAG:
            src = row[F["pipe2"]]
            key = (src, p, row[F["event"]])
            taken = core.waits_taken[key]
            if taken >= len(core.flags[key]):
                raise self.fail(core, f"deadlock: this WAIT_FLAG waits for a SET_FLAG "
                                      f"{Pipe(src).name}->{Pipe(p).name} event {key[2]} that is "
                                      "not issued before it")
            core.waits_taken[key] = taken + 1
            t = max(start, core.flags[key][taken])
            self.flag_wait[core.index, p, src] += t - start
            core.free[p] = t + 1
            core.done[p] = max(core.done[p], t + 1)
            self.record(core, p, op, start, t + 1)
            return None
        if op in COPIES:
            free, complete = self.copy(row, start)
        elif op == Op.MMAD:
            free = start + self.mmad_cycles(row)
            complete = free
        elif op in VECTOR:
            free = start + self.vector_cycles(op, row)
            complete = free
        else:
            raise self.fail(core, f"the timing model has no rule for {op.name}")
        self.pipe_busy[core.index, p] += free - start
        core.free[p] = free
        core.done[p] = max(core.done[p], complete)
        self.record(core, p, op, start, complete)
        return None

    def record(self, core: _Core, pipe: int, op: Op, start: int, end: int,
               index: int | None = None) -> None:
        core.end = max(core.end, end)
        if self.want_trace:
            self.trace.append((core.index, core.pc if index is None else index, pipe,
                               int(op), start, end))

    # -- costs --------------------------------------------------------------------------
    def mmad_cycles(self, row: tuple) -> int:
        m, k, n = row[F["a_rows"]], row[F["a_cols"]], row[F["b_cols"]]
        dtype = BY_CODE[row[F["sdtype"]]].name
        fm, fk, fn = self.target.fractal(dtype)
        fractals = -(-m // fm) * -(-n // fn) * -(-k // fk)
        return self.target.cube_issue_overhead + fractals * self.target.fractal_passes(dtype)

    def vector_cycles(self, op: Op, row: tuple) -> int:
        rows = row[F["d_rows"]]
        cols = row[F["a_cols"]] if op in REDUCE else row[F["d_cols"]]
        isz = max(BY_CODE[row[F["dtype"]]].itemsize, BY_CODE[row[F["sdtype"]]].itemsize)
        cost = self.target.vector_op_cost(vector_cost_name(op))
        work = float(rows * cols * isz) * cost / self.target.vector_bytes_per_cycle
        return self.target.vector_issue_overhead + math.ceil(work)

    def copy(self, row: tuple, start: int) -> tuple[int, int]:
        """(pipe free, completion) of a DMA starting at ``start``.

        A COPY reads ``sdtype`` elements and writes ``dtype`` ones (they differ when the
        FIX pipe converts the fp32 accumulator to the output type on the way out). The
        pipe's time counts the bytes it reads; a GM access, its L2 lines and DRAM
        traffic count the GM tensor's bytes; ``path_bytes`` counts the bytes written."""
        src, dst = row[F["a_mem"]], row[F["d_mem"]]
        path = self.target.path(self.memories.name(src), self.memories.name(dst))
        read_isz = BY_CODE[row[F["sdtype"]]].itemsize
        write_isz = BY_CODE[row[F["dtype"]]].itemsize
        rows, cols = row[F["d_rows"]], row[F["d_cols"]]
        side = "a" if src == Mem.GM else "d"
        rs, cs = row[F[side + "_rs"]], row[F[side + "_cs"]]
        if dst != Mem.GM and src != Mem.GM:  # on-chip: strides of the source
            rs, cs = row[F["a_rs"]], row[F["a_cs"]]
            if row[F["flags"]] & 1:  # transposed: the source is cols x rows
                rows, cols = cols, rows
        _, eff = burst_bytes(rows, cols, rs, cs, read_isz, path.min_burst)
        written, written_eff = burst_bytes(rows, cols, rs, cs, write_isz, path.min_burst)
        self.path_bytes[src, dst] += written
        row_time = rows * path.row_cycles
        if src != Mem.GM and dst != Mem.GM:
            free = start + math.ceil(eff / path.bytes_per_cycle + row_time)
            return free, free + path.latency
        isz = read_isz if src == Mem.GM else write_isz   # the GM tensor's element size
        base = self.bases[row[F["gm"]]] + row[F[side + "_addr"]] * isz
        lines = gm_lines(base, rows, cols, rs, cs, isz, self.l2.line)
        if src == Mem.GM:
            real, _ = burst_bytes(rows, cols, rs, cs, read_isz, path.min_burst)
            hits = sum(1 for line in lines if self.l2.access(line))
            misses = len(lines) - hits
            hit_eff = eff * hits / len(lines)
            miss_eff = eff - hit_eff
            self.gm_read_bytes += real
            self.l2_hit_bytes += real * hits // len(lines)
            occupy = math.ceil(hit_eff / self.target.l2_read_bytes_per_cycle
                               + miss_eff / path.bytes_per_cycle + row_time)
            dram_bytes = misses * self.l2.line    # a miss fetches its whole line
            self.dram_read_bytes += dram_bytes
            l2_latency = self.target.l2_miss_latency if misses else self.target.l2_hit_latency
        else:
            for line in lines:
                self.l2.access(line)
            self.gm_write_bytes += written
            occupy = math.ceil(eff / path.bytes_per_cycle + row_time)
            dram_bytes = written_eff             # the L2 merges partial lines (see above)
            self.dram_write_bytes += dram_bytes
            l2_latency = 0
        dram = math.ceil(dram_bytes / self.dram_rate)
        free = start + occupy
        if dram > 0:  # only DRAM traffic queues on the DRAM server
            self.server_free = max(start, self.server_free) + dram
            free = max(free, self.server_free)
        return free, free + path.latency + l2_latency


def simulate(program: Program, target: Target, bound_cycles: int,
             trace: bool = False) -> SimResult:
    """Time ``program`` with the reference rules."""
    return ReferenceEngine(program, target, trace).run(bound_cycles)
