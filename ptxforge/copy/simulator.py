"""A CTA simulator for the instruction subset that copy kernels use, so CPU tests can run them.

It executes a finished Kernel thread by thread on Python integers: integer arithmetic, logic,
compares, branches, ld/st on param/global/shared memory, cp.async with its completion (groups
and mbarrier arrivals), mbarriers and bar.sync.  It is strict where the hardware is unforgiving:

* every global access must lie inside an allocation and every shared access inside the
  kernel's shared memory (an `OutOfBounds` error names the instruction and its Python line);
* a cp.async lands in shared memory only when the thread waits for it (wait_group / wait_all /
  mbarrier arrival), never earlier, so a missing wait shows up as stale bytes;
* alignment of cp.async and vector accesses is checked;
* threads run until they block (bar.sync, an mbarrier phase not yet complete), round robin;
  a round with no progress is a deadlock.

It models no timing and no floating point; it is a checker, not a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..builder import Kernel, LabelDef
from ..errors import PtxforgeError
from ..isa.instruction import Instruction
from ..isa.operands import Addr, Discard, Imm, NegPred, Reg, SpecialReg, Symbol, Vec

_PTXFORGE_INTERNAL = True

GLOBAL_BASE = 0x7F00_0000_0000
_GAP = 1 << 20  # unmapped bytes between allocations: overruns land in no allocation


class SimulationError(PtxforgeError):
    """The simulated kernel did something the hardware would not allow (or that cannot be modelled)."""


class OutOfBounds(SimulationError):
    """An access outside every global allocation, or outside the kernel's shared memory."""


class Deadlock(SimulationError):
    """No thread can make progress."""


def _where(ins: Instruction) -> str:
    loc = f" (emitted at {ins.loc}: {ins.loc.code})" if ins.loc is not None else ""
    return f"'{ins.render()}'{loc}"


class GlobalMemory:
    """Allocations with unmapped gaps between them; reads and writes must stay inside one."""

    def __init__(self):
        self._allocs: list = []  # (base, bytearray)
        self._next = GLOBAL_BASE
        self.reads: list = []  # (addr, nbytes), when tracking
        self.track = False

    def alloc(self, nbytes: int, data=None) -> int:
        base = self._next
        buf = bytearray(nbytes) if data is None else bytearray(bytes(data))
        if len(buf) != nbytes:
            raise ValueError("data length differs from nbytes")
        self._allocs.append((base, buf))
        self._next = base + ((nbytes + 255) // 256) * 256 + _GAP
        return base

    def upload(self, array) -> int:
        b = memoryview(array).cast("B").tobytes() if not hasattr(array, "tobytes") else array.tobytes()
        return self.alloc(len(b), b)

    def _find(self, addr, n):
        for base, buf in self._allocs:
            if base <= addr and addr + n <= base + len(buf):
                return buf, addr - base
        return None, None

    def read(self, addr: int, n: int, what: str = "") -> bytes:
        buf, off = self._find(addr, n)
        if buf is None:
            raise OutOfBounds(f"global read of {n} bytes at {addr:#x} is outside every allocation {what}")
        if self.track:
            self.reads.append((addr, n))
        return bytes(buf[off:off + n])

    def write(self, addr: int, data: bytes, what: str = ""):
        buf, off = self._find(addr, len(data))
        if buf is None:
            raise OutOfBounds(f"global write of {len(data)} bytes at {addr:#x} is outside every allocation {what}")
        buf[off:off + len(data)] = data

    def download(self, addr: int, nbytes: int) -> bytes:
        buf, off = self._find(addr, nbytes)
        if buf is None:
            raise OutOfBounds(f"no allocation holds {nbytes} bytes at {addr:#x}")
        return bytes(buf[off:off + nbytes])


@dataclass
class _Mbar:
    expected: int
    pending: int
    phase: int = 0


@dataclass
class _Thread:
    tid: int
    regs: dict = field(default_factory=dict)
    pc: int = 0
    done: bool = False
    at_barrier: bool = False
    open_copies: list = field(default_factory=list)  # cp.asyncs not yet committed
    groups: list = field(default_factory=list)  # committed groups, oldest first
    steps: int = 0
    spin_pc: int | None = None


def _mask(bits):
    return (1 << bits) - 1


def _signed(v, bits):
    v &= _mask(bits)
    return v - (1 << bits) if v >> (bits - 1) else v


class CtaSimulator:
    """Run one kernel over a grid of CTAs (one after another) on a GlobalMemory."""

    def __init__(self, kernel: Kernel, memory: GlobalMemory, *, dynamic_shared: int = 0, max_steps=5_000_000):
        if not isinstance(kernel, Kernel):
            raise SimulationError(f"expected a finished Kernel, got {kernel!r}")
        self.kernel = kernel
        self.mem = memory
        self.max_steps = max_steps
        self.body = [x for x in kernel.body if isinstance(x, (Instruction, LabelDef))]
        self.labels = {x.label.name: i for i, x in enumerate(self.body) if isinstance(x, LabelDef)}
        # shared layout: static symbols in declaration order, then the dynamic window
        self.symbols = {}
        off = 0
        for s in kernel.shared:
            off = -(-off // s.align) * s.align
            self.symbols[s.name] = off
            off += s.nbytes
        dyn_align = max((s.align for s in kernel.extern_shared), default=16)
        off = -(-off // dyn_align) * dyn_align
        for s in kernel.extern_shared:
            self.symbols[s.name] = off
        self.shared_size = off + dynamic_shared
        self.instructions_run = 0

    # ------------------------------------------------------------ entry
    def launch(self, grid, block, params: dict):
        grid = (grid,) if isinstance(grid, int) else tuple(grid)
        block = (block,) if isinstance(block, int) else tuple(block)
        if len(grid) > 1 and any(g != 1 for g in grid[1:]) or len(block) > 1 and any(b != 1 for b in block[1:]):
            raise SimulationError("the simulator runs 1-D grids and blocks")
        missing = [p.name for p in self.kernel.params if p.name not in params]
        if missing:
            raise SimulationError(f"missing kernel parameters: {missing}")
        self.params = {p.name: params[p.name] & _mask(p.type.bits) for p in self.kernel.params}
        for cta in range(grid[0]):
            self._run_cta(cta, grid[0], block[0])

    def _run_cta(self, cta, ncta, nthreads):
        self.smem = bytearray(self.shared_size)
        self.mbars: dict = {}
        self.special = {"ctaid.x": cta, "nctaid.x": ncta, "ntid.x": nthreads, "ctaid.y": 0, "ctaid.z": 0,
                        "nctaid.y": 1, "nctaid.z": 1, "ntid.y": 1, "ntid.z": 1, "tid.y": 0, "tid.z": 0}
        threads = [_Thread(t) for t in range(nthreads)]
        while True:
            progressed = False
            for th in threads:
                if th.done or th.at_barrier:
                    continue
                if self._run_thread(th):
                    progressed = True
            live = [t for t in threads if not t.done]
            if not live:
                return
            if all(t.at_barrier for t in live):
                for t in live:
                    t.at_barrier = False
                    t.pc += 1
                continue
            if not progressed:
                where = sorted({self.body[t.pc].render() for t in live if t.pc < len(self.body)})
                raise Deadlock(f"CTA {cta}: no thread can make progress; threads wait at: {where}")

    # ------------------------------------------------------------ one thread
    def _run_thread(self, th: _Thread) -> bool:
        """Run until the thread blocks or exits; False when it only spun on the same mbarrier wait."""
        body = self.body
        start = th.steps
        while True:
            if th.pc >= len(body):
                self._exit(th)
                return True
            item = body[th.pc]
            if isinstance(item, LabelDef):
                th.pc += 1
                continue
            ins = item
            th.steps += 1
            self.instructions_run += 1
            if self.instructions_run > self.max_steps:
                raise SimulationError(f"more than {self.max_steps} instructions: a runaway loop? at {_where(ins)}")
            if ins.guard is not None:
                p = th.regs.get(ins.guard.reg.name, False)
                if bool(p) == ins.guard.negate:
                    th.pc += 1
                    continue
            op = ins.opcode
            handler = _HANDLERS.get(op)
            if handler is None:
                raise SimulationError(f"the simulator does not model '{ins.mnemonic}' at {_where(ins)}")
            try:
                r = handler(self, th, ins)
            except SimulationError as e:
                if _where(ins) not in e.message:
                    e.message += f"\n  at {_where(ins)}, thread {th.tid}, CTA {self.special['ctaid.x']}"
                    e.args = (e.message,)
                raise
            if r == "spin":
                spun = th.spin_pc == th.pc and th.steps - start <= 3
                th.spin_pc = th.pc
                th.pc += 1  # the spin loop's branch runs when the thread is resumed
                return not spun
            if r == "block":
                return True
            if r == "exit":
                self._exit(th)
                return True
            if r == "jump":
                continue
            th.pc += 1

    def _exit(self, th):
        # outstanding copies still land: the hardware completes them
        self._complete(th, None)
        th.done = True

    # ------------------------------------------------------------ operands
    def val(self, th, op, t=None):
        if isinstance(op, Reg):
            try:
                return th.regs[op.name]
            except KeyError:
                raise SimulationError(f"register %{op.name} is read before it is written") from None
        if isinstance(op, Imm):
            v = op.value
            if isinstance(v, float):
                raise SimulationError("the simulator models integers only")
            bits = t.bits if t is not None else 64
            return int(v) & _mask(bits) if t is None or not t.is_pred else bool(v)
        if isinstance(op, SpecialReg):
            if op.name == "tid.x":
                return th.tid
            if op.name == "laneid":
                return th.tid % 32
            if op.name in self.special:
                return self.special[op.name]
            raise SimulationError(f"the simulator does not model %{op.name}")
        if isinstance(op, Symbol):
            return self._symbol_addr(op)
        if isinstance(op, NegPred):
            return not self.val(th, op.reg)
        raise SimulationError(f"cannot read operand {op!r}")

    def _symbol_addr(self, sym):
        if sym.space == "shared":
            return self.symbols[sym.name]
        raise SimulationError(f"address of a .{sym.space} variable ({sym.name}) is not modelled")

    def addr(self, th, a: Addr) -> int:
        base = a.base
        if isinstance(base, Reg):
            b = self.val(th, base)
        elif isinstance(base, Symbol):
            if base.space == "param":
                return ("param", base.name)
            b = self._symbol_addr(base)
        else:
            b = int(base)
        return b + a.offset

    def set(self, th, reg, value):
        if isinstance(reg, Discard):
            return
        if reg.type.is_pred:
            th.regs[reg.name] = bool(value)
        else:
            th.regs[reg.name] = int(value) & _mask(reg.type.bits)

    # ------------------------------------------------------------ memory
    def smem_read(self, addr, n):
        if addr < 0 or addr + n > self.shared_size:
            raise OutOfBounds(f"shared read of {n} bytes at {addr:#x} is outside the {self.shared_size}-byte "
                              "shared window")
        return bytes(self.smem[addr:addr + n])

    def smem_write(self, addr, data):
        if addr < 0 or addr + len(data) > self.shared_size:
            raise OutOfBounds(f"shared write of {len(data)} bytes at {addr:#x} is outside the {self.shared_size}-byte "
                              "shared window")
        self.smem[addr:addr + len(data)] = data

    def _complete(self, th, keep: int | None):
        """Land this thread's oldest committed cp.async groups until at most `keep` are in flight;
        keep=None lands everything, uncommitted copies too (thread exit, mbarrier arrival)."""
        if keep is None:
            groups = th.groups + [th.open_copies]
            th.groups, th.open_copies = [], []
        else:
            n = max(len(th.groups) - keep, 0)
            groups, th.groups = th.groups[:n], th.groups[n:]
        for g in groups:
            for dst, data in g:
                self.smem_write(dst, data)


# ------------------------------------------------------------------ handlers

def _arith(sim, th, ins):
    t = ins.type
    ops = ins.operands
    d = ops[0]
    signed = t.kind == "s"
    bits = t.bits

    def v(o):
        x = sim.val(th, o, t)
        return _signed(x, bits) if signed else x & _mask(bits)

    op = ins.opcode
    mode = ins.mods[0] if ins.mods else None
    if op == "add":
        r = v(ops[1]) + v(ops[2])
    elif op == "sub":
        r = v(ops[1]) - v(ops[2])
    elif op == "mul":
        r = v(ops[1]) * v(ops[2])
        if mode == "hi":
            r >>= bits
    elif op == "mad":
        p = v(ops[1]) * v(ops[2])
        if mode == "wide":
            c = sim.val(th, ops[3])
            c = _signed(c, 2 * bits) if signed else c
        else:
            c = v(ops[3])
        if mode == "hi":
            p >>= bits
        r = p + c
    elif op in ("div", "rem"):
        a, b = v(ops[1]), v(ops[2])
        if b == 0:
            raise SimulationError("integer division by zero")
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        r = q if op == "div" else a - q * b
    elif op == "min":
        r = min(v(ops[1]), v(ops[2]))
    elif op == "max":
        r = max(v(ops[1]), v(ops[2]))
    else:
        raise SimulationError(f"unmodelled arithmetic {ins.mnemonic}")
    sim.set(th, d, r)


def _logic(sim, th, ins):
    d, *srcs = ins.operands
    if ins.type.is_pred:
        vals = [bool(sim.val(th, s)) for s in srcs]
        r = {"and": lambda: vals[0] and vals[1], "or": lambda: vals[0] or vals[1],
             "xor": lambda: vals[0] != vals[1], "not": lambda: not vals[0]}[ins.opcode]()
    else:
        m = _mask(ins.type.bits)
        vals = [sim.val(th, s, ins.type) & m for s in srcs]
        r = {"and": lambda: vals[0] & vals[1], "or": lambda: vals[0] | vals[1],
             "xor": lambda: vals[0] ^ vals[1], "not": lambda: ~vals[0]}[ins.opcode]()
    sim.set(th, d, r)


def _shift(sim, th, ins):
    d, a, n = ins.operands
    t = ins.type
    x, s = sim.val(th, a, t), min(sim.val(th, n), t.bits)
    if ins.opcode == "shl":
        r = x << s
    elif t.kind == "s":
        r = _signed(x, t.bits) >> s
    else:
        r = (x & _mask(t.bits)) >> s
    sim.set(th, d, r)


_CMP = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "lt": lambda a, b: a < b, "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
    "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b, "hi": lambda a, b: a > b, "hs": lambda a, b: a >= b,
}


def _setp(sim, th, ins):
    t = ins.type
    p, a, b = ins.operands[:3]
    x, y = sim.val(th, a, t), sim.val(th, b, t)
    if t.kind == "s":
        x, y = _signed(x, t.bits), _signed(y, t.bits)
    else:
        x, y = x & _mask(t.bits), y & _mask(t.bits)
    r = _CMP[ins.mods[0]](x, y)
    if len(ins.mods) > 1:
        c = bool(sim.val(th, ins.operands[3]))
        r = {"and": r and c, "or": r or c, "xor": r != c}[ins.mods[1]]
    sim.set(th, p, r)


def _selp(sim, th, ins):
    d, a, b, p = ins.operands
    sim.set(th, d, sim.val(th, a, ins.type) if sim.val(th, p) else sim.val(th, b, ins.type))


def _mov(sim, th, ins):
    d, a = ins.operands
    if isinstance(d, Vec) or isinstance(a, Vec):
        raise SimulationError("pack/unpack mov is not modelled")
    sim.set(th, d, sim.val(th, a, ins.type))


def _cvt(sim, th, ins):
    d, a = ins.operands[:2]
    dt, st, _ = ins.info
    if dt.is_float or st.is_float:
        raise SimulationError("float conversions are not modelled")
    x = sim.val(th, a, st)
    x = _signed(x, st.bits) if st.kind == "s" else x & _mask(st.bits)
    sim.set(th, d, x)


def _cvta(sim, th, ins):
    d, a = ins.operands
    if "shared" in ins.mods and "to" not in ins.mods:
        raise SimulationError("generic addresses of shared memory are not modelled")
    sim.set(th, d, sim.val(th, a))


def _bra(sim, th, ins):
    label = ins.operands[0]
    th.pc = sim.labels[label.name]
    return "jump"


def _ld(sim, th, ins):
    d, a = ins.operands
    info = ins.info
    t = info.type
    n = t.bits // 8
    where = sim.addr(th, a)
    regs = list(d.regs) if isinstance(d, Vec) else [d]
    if isinstance(where, tuple):  # ld.param
        if len(regs) != 1:
            raise SimulationError("vector ld.param is not modelled")
        sim.set(th, regs[0], sim.params[where[1]])
        return
    total = n * len(regs)
    if where % total:
        raise SimulationError(f"misaligned {total}-byte load at {where:#x}")
    if info.space in ("global", "generic"):
        data = sim.mem.read(where, total)
    elif info.space.startswith("shared"):
        data = sim.smem_read(where, total)
    else:
        raise SimulationError(f"ld.{info.space} is not modelled")
    for i, r in enumerate(regs):
        x = int.from_bytes(data[i * n:(i + 1) * n], "little")
        if t.kind == "s":
            x = _signed(x, t.bits)
        sim.set(th, r, x)


def _st(sim, th, ins):
    a, v = ins.operands
    info = ins.info
    t = info.type
    n = t.bits // 8
    where = sim.addr(th, a)
    vals = list(v.regs) if isinstance(v, Vec) else [v]
    total = n * len(vals)
    if where % total:
        raise SimulationError(f"misaligned {total}-byte store at {where:#x}")
    data = b"".join((sim.val(th, x, t) & _mask(t.bits)).to_bytes(n, "little") for x in vals)
    if info.space in ("global", "generic"):
        sim.mem.write(where, data)
    elif info.space.startswith("shared"):
        sim.smem_write(where, data)
    else:
        raise SimulationError(f"st.{info.space} is not modelled")


def _cp_async(sim, th, ins):
    info = ins.info
    dst, src = sim.addr(th, ins.operands[0]), sim.addr(th, ins.operands[1])
    size = info.cp_size
    if dst % size or src % size:
        raise SimulationError(f"cp.async of {size} bytes needs {size}-byte aligned addresses: dst {dst:#x}, "
                              f"src {src:#x}")
    nread = size
    if info.src_size is not None:
        nread = sim.val(th, info.src_size, None) if not isinstance(info.src_size, Imm) else info.src_size.value
        if nread > size:
            raise SimulationError(f"cp.async src-size {nread} exceeds cp-size {size} (undefined behaviour)")
    if info.ignore_src is not None:
        ig = sim.val(th, info.ignore_src)
        nread = 0 if ig else nread
    data = sim.mem.read(src, nread) if nread else b""
    if dst < 0 or dst + size > sim.shared_size:
        raise OutOfBounds(f"cp.async writes {size} bytes at shared {dst:#x}, outside the {sim.shared_size}-byte "
                          "shared window")
    th.open_copies.append((dst, data + bytes(size - nread)))


def _commit(sim, th, ins):
    th.groups.append(th.open_copies)
    th.open_copies = []


def _wait_group(sim, th, ins):
    sim._complete(th, ins.info)


def _wait_all(sim, th, ins):
    _commit(sim, th, ins)
    sim._complete(th, 0)


def _mbar(sim, th, ins, addr):
    m = sim.mbars.get(addr)
    if m is None:
        raise SimulationError(f"mbarrier at shared {addr:#x} is used before mbarrier.init")
    return m


def _arrive_on(sim, m):
    m.pending -= 1
    if m.pending < 0:
        raise SimulationError("more arrivals than the mbarrier expects in one phase")
    if m.pending == 0:
        m.phase += 1
        m.pending = m.expected


def _mbarrier(sim, th, ins):
    op = ins.info.op
    if op == "init":
        a = sim.addr(th, ins.operands[0])
        n = sim.val(th, ins.operands[1])
        if a % 8:
            raise SimulationError(f"mbarrier at {a:#x} is not 8-byte aligned")
        sim.smem_read(a, 8)
        sim.mbars[a] = _Mbar(n, n)
    elif op == "arrive":
        a = sim.addr(th, ins.operands[1])
        m = _mbar(sim, th, ins, a)
        if len(ins.operands) > 2:
            raise SimulationError("mbarrier.arrive with a count is not modelled")
        state = ins.operands[0]
        _arrive_on(sim, m)
        sim.set(th, state, m.phase)
    elif op in ("test_wait", "try_wait"):
        p, a, phase = ins.operands
        m = _mbar(sim, th, ins, sim.addr(th, a))
        if not ins.info.parity:
            raise SimulationError("mbarrier waits on a state token are not modelled; use parity")
        want = sim.val(th, phase) & 1
        done = (m.phase & 1) != want
        sim.set(th, p, done)
        if not done:
            return "spin"
    elif op == "inval":
        sim.mbars.pop(sim.addr(th, ins.operands[0]), None)
    else:
        raise SimulationError(f"mbarrier.{op} is not modelled")


def _cp_async_arrive(sim, th, ins):
    a = sim.addr(th, ins.operands[0])
    m = _mbar(sim, th, ins, a)
    if not ins.info:
        raise SimulationError("cp.async.mbarrier.arrive without .noinc is not modelled")
    sim._complete(th, None)
    _arrive_on(sim, m)


def _bar(sim, th, ins):
    info = ins.info
    if info.kind != "sync" or info.count is not None:
        raise SimulationError("only bar.sync over the whole CTA is modelled")
    th.at_barrier = True
    return "block"


def _nop(sim, th, ins):
    return None


def _exit_h(sim, th, ins):
    return "exit"


_HANDLERS = {
    **{op: _arith for op in ("add", "sub", "mul", "mad", "div", "rem", "min", "max")},
    **{op: _logic for op in ("and", "or", "xor", "not")},
    "shl": _shift, "shr": _shift, "setp": _setp, "selp": _selp, "mov": _mov, "cvt": _cvt, "cvta": _cvta,
    "bra": _bra, "ret": _exit_h, "exit": _exit_h, "ld": _ld, "st": _st, "cp.async": _cp_async,
    "cp.async.commit_group": _commit, "cp.async.wait_group": _wait_group, "cp.async.wait_all": _wait_all,
    "mbarrier.init": _mbarrier, "mbarrier.arrive": _mbarrier, "mbarrier.test_wait": _mbarrier,
    "mbarrier.try_wait": _mbarrier, "mbarrier.inval": _mbarrier, "cp.async.mbarrier.arrive": _cp_async_arrive,
    "bar": _bar, "membar": _nop, "fence": _nop,
}
