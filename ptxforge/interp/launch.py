"""`run()`: launch a kernel on the interpreter with the call shape of a GPU launch.

    report = ptxforge.interp.run(module, "kernel", grid=(gx, gy), block=128,
                                 args=[a, b, c, n], shared=dynamic_bytes)

Pointer parameters take numpy arrays; the kernel's stores land in those arrays (in place, like
a GPU launch followed by a copy back).  Scalar parameters take Python or numpy numbers, checked
against the parameter's type.  CTAs run in batches: all threads of a batch are one numpy
vector, so many small CTAs cost about as much as one large one.

Findings: with `check=True` (the default) the first finding raises `InterpError` carrying it;
with `check=False` execution goes on (a faulting access is skipped) and the returned `Report`
lists every finding once, with a count of repeats.  `checks=` chooses which kinds are looked
for (see `findings.KINDS`; "uninit" is off by default).

Traffic: with `count_accesses=True` the Report also says how many times each byte of each
pointer argument was read and written (`Report.accesses`, see traffic.py).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..kernel import Kernel
from ..errors import LaunchError, PtxforgeError, caller_loc
from ..isa.types import is_integer
from .findings import DEFAULT_CHECKS, KINDS, Finding, InterpError
from .machine import Machine
from .exec_call import function_address, function_shared, local_variables
from .memory import STACK_BYTES, GlobalHeap, LocalLayout, ParamLayout, SharedLayout
from ..declarations import initial_bytes
from .program import Program, own_name
from .scheduler import Stats, run_batch
from .tensormaps import HostTensorMap, handle_bytes
from .traffic import ByteCounter, access_counts

_PTXFORGE_INTERNAL = True

#: Memory a batch may spend on shared memory and its shadow (bounds how many CTAs run together).
BATCH_MEMORY = 128 << 20
SHADOW_BYTES_PER_BYTE = 64

_CACHE: dict = {}


def compile_kernel(kernel: Kernel, functions: dict | None = None) -> Program:
    """The interpreter's executors for a kernel (built once, cached); `functions` are the module's
    device functions by name, which its calls run."""
    functions = functions or {}
    hit = _CACHE.get(id(kernel))
    if hit is not None and hit[0] is kernel and len(hit[1].functions) == len(functions) and \
            all(hit[1].functions.get(n) is f for n, f in functions.items()):
        return hit[1]
    prog = Program(kernel, functions)
    if len(_CACHE) > 64:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[id(kernel)] = (kernel, prog)
    return prog


def module_parts(module):
    """(device functions by name, module-scope .global/.const Variables) of what `run` was given."""
    kernels = getattr(module, "kernels", ())
    functions = {k.name: k for k in kernels if getattr(k, "kind", "entry") == "func"}
    aliases = {d.name: d.target for d in getattr(module, "declarations", ()) if type(d).__name__ == "Alias"}
    for name in aliases:  # `.alias name, target;`: a call to name runs target (an alias of an alias too)
        target, hops = aliases[name], 0
        while target in aliases and hops < len(aliases):
            target, hops = aliases[target], hops + 1
        if target in functions:
            functions[name] = functions[target]
    variables = [d for d in getattr(module, "declarations", ())
                 if getattr(d, "space", None) in ("global", "const") and getattr(d, "linkage", "") != ".extern"
                 and hasattr(d, "nbytes")]
    return functions, variables


@dataclass
class Report:
    """What a run did: findings (empty when clean) and execution counts."""

    kernel: str
    findings: list = field(default_factory=list)
    steps: int = 0  # scheduler steps (one instruction for one group of threads at one pc)
    warp_instructions: int = 0  # instructions issued, counted once per warp
    thread_instructions: int = 0  # instructions issued, counted once per thread
    seconds: float = 0.0
    ctas: int = 0
    batches: int = 0
    accesses: dict | None = None  # {pointer parameter: traffic.AccessCounts}, with count_accesses=True
    variables: dict = field(default_factory=dict)  # {module .global/.const variable: its bytes after the run}
    printed: list = field(default_factory=list)  # what printf (vprintf) calls wrote, one string per call, in order

    @property
    def ok(self) -> bool:
        """Whether the run found nothing (no findings of the kinds checked)."""
        return not self.findings

    def by_kind(self, kind: str) -> list:
        """The findings of one kind (a key of `KINDS`: "race", "oob", "async" ...)."""
        return [f for f in self.findings if f.kind == kind]

    def raise_for_findings(self):
        """Raise an `InterpError` listing the findings, at the Python line of the first one, unless there are
        none.
        """
        if self.findings:
            raise InterpError(_summary(self.kernel, self.findings), self.findings, self.findings[0].loc)

    def __str__(self) -> str:
        head = (f"{self.kernel}: {self.ctas} CTAs, {self.warp_instructions} warp-instructions "
                f"({self.thread_instructions} thread-instructions) in {self.seconds:.3f} s")
        if not self.findings:
            return head + ", no findings"
        return head + "\n" + "\n".join(str(f) for f in self.findings)


def _summary(kernel, findings):
    lines = [f"the interpreter found {len(findings)} problem(s) in kernel {kernel}:"]
    lines += [str(f) for f in findings]
    return "\n".join(lines)


#: What a GPU launch accepts (every sm_80+ device): grid and block extents per axis.
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)


def _dims(v, what):
    """1 to 3 positive ints (no floats, no bools) within the GPU's per-axis limits, as (x, y, z)."""
    if is_integer(v):
        v = (int(v),)
    elif not isinstance(v, (tuple, list)) or not all(is_integer(x) for x in v):
        raise LaunchError(f"{what} takes an int or 1 to 3 ints, got {v!r}")
    v = tuple(int(x) for x in v)
    if not 1 <= len(v) <= 3 or any(x < 1 for x in v):
        raise LaunchError(f"{what} takes 1 to 3 positive sizes, got {v}")
    limit = {"grid": MAX_GRID, "block": MAX_BLOCK}.get(what, ())
    for axis, x, m in zip("xyz", v, limit):
        if x > m:
            raise LaunchError(f"{what} {v}: {axis} = {x} exceeds what a GPU launch allows ({m})")
    return v + (1,) * (3 - len(v))


def cta_batches(grid, per_batch: int, cluster=(1, 1, 1)):
    """The CTA coordinates of `grid` in lists of at most `per_batch`, made as they are needed: whole
    clusters of shape `cluster` one after another, each one's CTAs consecutive in rank order (x fastest).
    `per_batch` should be a multiple of the cluster size, so that no cluster is split."""
    gx, gy, gz = grid
    cx, cy, cz = cluster
    batch = []
    for Z in range(0, gz, cz):
        for Y in range(0, gy, cy):
            for X in range(0, gx, cx):
                for z in range(cz):
                    for y in range(cy):
                        for x in range(cx):
                            batch.append((X + x, Y + y, Z + z))
                            if len(batch) == per_batch:
                                yield batch
                                batch = []
    if batch:
        yield batch


def resolve_kernel(module, kernel=None) -> Kernel:
    """The `Kernel` to run from a Module (by `kernel` name, or its only kernel), a Kernel or a KernelBuilder
    (finished here); a LaunchError names the kernels otherwise.
    """
    if hasattr(module, "finish"):  # a KernelBuilder
        module = module.finish()
    if isinstance(module, Kernel):
        if kernel is not None and kernel != module.name:
            raise LaunchError(f"kernel {kernel!r} asked for, but {module.name!r} was given")
        return module
    if not callable(getattr(module, "kernel", None)):
        hint = ": read PTX text with ptxforge.parse first" if isinstance(module, (str, bytes)) else ""
        raise LaunchError(f"interp.run takes a Module, Kernel or KernelBuilder, got {type(module).__name__}{hint}")
    kernels = tuple(getattr(module, "kernels", ()))
    entries = [k for k in kernels if getattr(k, "kind", "entry") == "entry"]
    names = ", ".join(k.name for k in entries) or "none"
    if isinstance(kernel, Kernel):
        if kernels and not any(k is kernel for k in kernels):  # its device functions and variables are elsewhere
            raise LaunchError(f"kernel {kernel.name!r} is not a kernel of the module given (its kernels: {names}); "
                              "pass its own module, or the kernel alone")
        return kernel
    if kernel is not None and any(k.name == kernel and getattr(k, "kind", "entry") == "func" for k in kernels):
        raise LaunchError(f"{kernel} is a device function (.func), no kernel (.entry) to launch; the module's "
                          f"kernels: {names}")
    if not entries:
        functions = ", ".join(k.name for k in kernels)
        raise LaunchError("the module has no kernel (.entry) to launch"
                          + (f", only device functions (.func): {functions}" if functions else ""))
    try:
        return module.kernel(kernel)
    except PtxforgeError as e:  # a ValidationError from Module.kernel names what exists
        raise LaunchError(e.message, e.loc) from None  # the message alone: its location, once, is the caller's


class Launch:
    """Everything one launch shares across its batches: memory, parameters, findings."""

    def __init__(self, kernel, prog, grid, block, args, dynamic_shared, *, check, checks, races, cluster=None,
                 variables=(), order="lowest-pc"):
        if order not in ORDERS:
            raise LaunchError(f"order is one of {', '.join(map(repr, ORDERS))}, got {order!r}")
        self.order = order
        self.kernel = kernel
        self.prog = prog
        self.variables = tuple(variables)  # module .global/.const Variables, placed in the heap
        self.printed: list = []  # printf output, one string per call
        self.local = LocalLayout(local_variables(kernel, prog.functions) + list(prog.param_arrays),
                                 STACK_BYTES if prog.uses_stack else 0)
        self.grid = _dims(grid, "grid")
        self.block = _dims(block, "block")
        self.nthreads = self.block[0] * self.block[1] * self.block[2]
        required = kernel.cluster_dims
        if cluster is not None:
            cluster = _dims(cluster, "cluster")
            if required is not None and cluster != tuple(required):
                raise LaunchError(f"kernel {kernel.name} requires clusters of {tuple(required)} (.reqnctapercluster), "
                                  f"launched with {cluster}")
        self.cluster = cluster or (tuple(required) if required is not None else (1, 1, 1))
        self.explicit_cluster = cluster is not None or required is not None
        if any(g % c for g, c in zip(self.grid, self.cluster)):
            raise LaunchError(f"the cluster {self.cluster} does not divide the grid {self.grid}")
        if self.cluster[0] * self.cluster[1] * self.cluster[2] > 16:
            raise LaunchError(f"a cluster of {self.cluster} has more than 16 CTAs")
        if any(key == "explicitcluster" for key, _ in kernel.directives) and not self.explicit_cluster:
            raise LaunchError(f"kernel {kernel.name} is .explicitcluster: launch it with cluster=")
        if self.nthreads > 1024:
            raise LaunchError(f"block {self.block} has {self.nthreads} threads; a CTA has at most 1024")
        lim = kernel.block_limit
        if lim is not None:
            key, val = lim
            if key == "reqntid" and tuple(val) != self.block:
                raise LaunchError(f"kernel {kernel.name} requires block {val} (.reqntid), launched with {self.block}")
            if key == "maxntid" and self.nthreads > val[0] * val[1] * val[2]:
                raise LaunchError(f"kernel {kernel.name} allows at most {val} threads (.maxntid), "
                                  f"launched with {self.block}")
        self.check = check
        self.checks = frozenset(checks)
        unknown = self.checks - set(KINDS)
        if unknown:
            raise LaunchError(f"unknown check kinds {sorted(unknown)}; known: {sorted(KINDS)}")
        self.track_shared = races and bool(self.checks & {"race", "async", "uninit"})
        self.findings: list = []
        self._seen: dict = {}
        if not is_integer(dynamic_shared) or dynamic_shared < 0:
            raise LaunchError(f"shared= takes a non-negative int of bytes, got {dynamic_shared!r}")
        self.dynamic_shared = int(dynamic_shared)
        fshared = function_shared(kernel, prog.functions)
        static = kernel.static_shared_bytes + sum(s.nbytes or 0 for s in fshared)
        self.total_shared = static + self.dynamic_shared
        limit = kernel.target.limits.shared_per_cta
        if self.total_shared > limit:  # before SharedLayout allocates it (and its owner map, 4 bytes per byte)
            raise LaunchError(f"kernel {kernel.name} needs {self.total_shared} bytes of shared memory per CTA "
                              f"({static} static + {self.dynamic_shared} dynamic, shared=); "
                              f"{kernel.target.name} allows {limit}")
        self.smem = SharedLayout(kernel, self.dynamic_shared, fshared)
        self._bind(args)

    # ------------------------------------------------------------ arguments
    def _bind(self, args):
        params = self.kernel.params
        args = list(args)
        if len(args) != len(params):
            raise LaunchError(f"kernel {self.kernel.name} takes {len(params)} arguments "
                              f"({', '.join(p.name for p in params)}), got {len(args)}")
        arrays, values = [], []
        index_of = {}
        self.pointer_bindings = []  # (parameter name, buffer index)
        tmaps = []  # (TensorMap, buffer index): tensor-map parameters (see tensormaps.py)
        readonly = []  # buffers of read-only arrays passed as they are: a store into one is reported
        for p, a in zip(params, args):
            copy_in = copy_out = True
            wrapped = False
            if isinstance(a, HostTensorMap):
                if p.nbytes != 128:
                    raise LaunchError(f"parameter {p.name} is not a tensor-map parameter (.b8 [128]); "
                                      "declare it with param_tensormap()")
                tmaps.append((a.tmap, a.array))
                a = a.array
                key = id(a)
                if key not in index_of:
                    index_of[key] = len(arrays)
                    arrays.append((p.name, a, True, a.flags.writeable))
                values.append(("tmap", len(tmaps) - 1))
                continue
            if hasattr(a, "copy_in") and isinstance(getattr(a, "array", None), np.ndarray):  # In/Out/InOut
                copy_in, copy_out, a = a.copy_in, a.copy_out, a.array
                wrapped = True
            if isinstance(a, np.ndarray) and p.nbytes is None:
                if p.type.bits != 64:
                    raise LaunchError(f"parameter {p.name} is .{p.type.name}; a pointer (numpy array) needs .u64")
                _check_pointee(self.kernel.name, p, a)
                copy_out = copy_out and a.flags.writeable  # a read-only array is input only, as on a GPU
                key = id(a)
                if key not in index_of:
                    for other in arrays:
                        if np.shares_memory(other[1], a):
                            raise LaunchError(f"arrays for {other[0]} and {p.name} overlap; pass the same array "
                                              "object for both, or separate arrays")
                    index_of[key] = len(arrays)
                    arrays.append((p.name, a, copy_in, copy_out))
                    if not wrapped and not a.flags.writeable:
                        readonly.append(index_of[key])
                values.append(("ptr", index_of[key]))
                self.pointer_bindings.append((p.name, index_of[key]))
            else:
                values.append(("val", _encode(p, a)))
        self.variable_index = {}
        for var in self.variables:  # module variables: buffers of their own, initialized, never copied out
            if var.nbytes is None:
                raise LaunchError(f"module variable {var.name} is an unsized array; the interpreter needs its size")
            self.variable_index[(var.name, var.space)] = len(arrays)
            arrays.append((f".{var.space} {var.name}", np.zeros(var.nbytes, np.uint8), True, False))
        self.heap = GlobalHeap(arrays)
        for var in self.variables:  # after placing them all: an initializer may hold another's address
            b = self.heap.bufs[self.variable_index[(var.name, var.space)]]
            data = initial_bytes(var, self.initializer_address)
            self.heap.heap[b.heap_offset:b.heap_offset + b.nbytes] = np.frombuffer(data, dtype=np.uint8)
        self.heap.mark_readonly(readonly)
        self.tensormaps = [tm.with_base(int(self.heap.address_of(index_of[id(arr)]))) for tm, arr in tmaps]
        raw = []
        for p, (kind, v) in zip(params, values):
            if kind == "ptr":
                raw.append(int(self.heap.address_of(v)).to_bytes(8, "little"))
            elif kind == "tmap":
                raw.append(handle_bytes(v))
            else:
                raw.append(v)
        self.params = ParamLayout(params, raw)

    def variable_bytes(self) -> dict:
        """{name: numpy uint8 array}: each module .global/.const variable's bytes as the launch left them."""
        out = {}
        for (name, _), i in self.variable_index.items():
            b = self.heap.bufs[i]
            out[name] = self.heap.heap[b.heap_offset:b.heap_offset + b.nbytes].copy()
        return out

    def initializer_address(self, name):
        """The address a variable initializer's `name` / `generic(name)` stands for: a module .global/.const
        variable's (generic and global addresses are one here), or a device function's (what `mov.u64 %rd, f`
        gives); None for any other name."""
        for space in ("global", "const"):
            if (name, space) in self.variable_index:
                return int(self.heap.address_of(self.variable_index[(name, space)]))
        if name in self.prog.functions:
            return function_address(self.prog.functions, own_name(self.prog.functions, name))
        return None

    def symbol_address(self, name, space):
        """The address of a shared variable (its shared-window offset) or a parameter (its offset in the
        parameter block); `space` is "shared" or "param".
        """
        if space == "shared":
            return self.smem.offsets[name]
        if space == "param":
            return self.params.offsets[name]
        if space in ("global", "const") and (name, space) in self.variable_index:
            return int(self.heap.address_of(self.variable_index[(name, space)]))
        if space == "local" and name in self.local.offsets:
            return self.local.offsets[name]
        raise LaunchError(f"the address of {name} (.{space}) is not modelled")

    # ------------------------------------------------------------ findings
    def add_finding(self, f: Finding):
        """Record `f`, or count it again when the same finding (kind, kernel, instruction, other instruction) is
        already recorded.
        """
        seen = self._seen.get(f.key)
        if seen is not None:
            seen.count += 1
            return
        self._seen[f.key] = f
        self.findings.append(f)
        if self.check:
            raise InterpError(_summary(self.kernel.name, [f]), [f], f.loc)


def _check_pointee(kernel, p, a):
    """The element type rule of a GPU launch (ptxforge.runtime): an array must suit the pointee."""
    from ..runtime.arrays import Elem, accepts, check_byte_order, expected_dtype
    check_byte_order(a.dtype, f"kernel {kernel}: the array for parameter {p.name}")
    if p.pointee is not None and not accepts(p.pointee, Elem.of_dtype(a.dtype)):
        raise LaunchError(f"kernel {kernel}: parameter {p.name} points to .{p.pointee.name} "
                          f"({expected_dtype(p.pointee)}), but the array is {a.dtype}")


def _encode(p, a) -> bytes:
    """A scalar argument as the bytes of its parameter type."""
    if p.nbytes is not None:
        if isinstance(a, np.ndarray):
            a = a.tobytes()
        if not isinstance(a, (bytes, bytearray)) or len(a) != p.nbytes:
            raise LaunchError(f"parameter {p.name} is a {p.nbytes}-byte block; pass {p.nbytes} bytes")
        return bytes(a)
    t = p.type
    if isinstance(a, np.generic):
        a = a.item()
    if t.is_float:
        if not isinstance(a, (int, float)):
            raise LaunchError(f"parameter {p.name} is .{t.name}; got {a!r}")
        dt = {16: np.float16, 32: np.float32, 64: np.float64}[t.bits]
        return np.array(a, dtype=dt).tobytes()
    if isinstance(a, bool) or not isinstance(a, int):
        raise LaunchError(f"parameter {p.name} is .{t.name}; pass an int (got {type(a).__name__})")
    lo = -(1 << (t.bits - 1)) if t.kind == "s" else 0
    hi = (1 << t.bits) - 1 if t.kind != "s" else (1 << (t.bits - 1)) - 1
    if t.kind == "b":
        lo = -(1 << (t.bits - 1))
    if not lo <= a <= hi:
        raise LaunchError(f"argument {a} does not fit parameter {p.name} (.{t.name})")
    return (a & ((1 << t.bits) - 1)).to_bytes(t.bits // 8, "little")


#: the orders in which `run` may step the threads (see `run`)
ORDERS = ("lowest-pc", "last-warpgroup-first")


def run(module, kernel=None, *, grid=1, block, args=(), shared=0, check=True, checks=None, races=True,
        max_steps=1_000_000, batch_threads=8192, count_accesses=False, cluster=None, order="lowest-pc") -> Report:
    """Run `kernel` of `module` (a Module, Kernel or KernelBuilder) on the CPU.

    grid, block: like a CUDA launch (int or up to three sizes).  args: one per parameter (numpy
    arrays for pointers).  shared: dynamic shared memory in bytes.  check: raise InterpError on
    the first finding (True) or collect them in the report (False).  checks: the finding kinds
    to look for (default: all but "uninit").  races: track shared memory per byte (turn off for
    speed).  max_steps: stop (a "limit" finding) after this many steps per batch.
    batch_threads: about how many threads (whole CTAs) run together as one vector.

    cluster: launch in thread-block clusters of this shape (default: the kernel's .reqnctapercluster,
    else none); the CTAs of a cluster run in one batch and see each other's shared memory.

    order: which threads each step runs.  "lowest-pc" (default): every runnable thread at the lowest
    pc, so warpgroups running the same code move in lockstep.  "last-warpgroup-first": the runnable
    threads of the highest-numbered warpgroup (128 threads of a CTA) at their lowest pc, so each
    warpgroup runs as far ahead of the lower ones as its barriers and waits let it: an order a GPU
    may take, in which a missing barrier between warpgroups shows (shared bytes rewritten while
    another warpgroup's wgmma still holds them, data read before another warpgroup wrote it).

    Module `.global`/`.const` variables start from their initializers at every launch; the
    report's `variables` holds each one's bytes as the kernel left them.

    count_accesses: also count, per byte of every pointer argument, how many times the kernel
    read and wrote it.  The report's `accesses` then maps each pointer parameter's name to a
    `traffic.AccessCounts` whose `reads` and `writes` are uint32 arrays shaped like the
    argument's bytes (last axis times the item size): loads, cp.async / bulk-copy sources and
    atomics read, stores and atomics write; a cp.async with src-size n reads its first n bytes
    only.  Accesses reported as findings (out of bounds, misaligned) are not counted.
    `read_ranges()` / `written_ranges()` give the same as runs of flat byte offsets.
    """
    try:
        k = resolve_kernel(module, kernel)
        functions, variables = module_parts(module)
        prog = compile_kernel(k, functions)
        L = Launch(k, prog, grid, block, args, shared, check=check,
                   checks=DEFAULT_CHECKS if checks is None else checks, races=races, cluster=cluster,
                   variables=variables, order=order)
    except LaunchError as e:  # a launch the caller got wrong: name the caller's line, as builder errors do
        if e.loc is None:
            e.loc = caller_loc()
        raise
    if count_accesses:
        L.heap.counter = ByteCounter(L.heap.size)
    csize = L.cluster[0] * L.cluster[1] * L.cluster[2]
    tp = -(-L.nthreads // 32) * 32
    per_cta_bytes = L.smem.size * (SHADOW_BYTES_PER_BYTE + 1 if L.track_shared else 1)
    per_batch = max(1, min(int(batch_threads) // tp, BATCH_MEMORY // per_cta_bytes))
    per_batch = max(csize, per_batch // csize * csize)
    stats = Stats()
    report = Report(k.name)
    t0 = time.perf_counter()
    try:
        with np.errstate(all="ignore"):
            for batch in cta_batches(L.grid, per_batch, L.cluster):
                S = Machine(L, prog, batch)
                run_batch(S, stats, max_steps)
                report.batches += 1
                report.ctas += len(batch)
    finally:
        L.heap.write_back()
        report.seconds = time.perf_counter() - t0
        report.findings = L.findings
        report.steps = stats.steps
        report.warp_instructions = stats.warp_instructions
        report.thread_instructions = stats.thread_instructions
        if count_accesses:
            report.accesses = access_counts(L.heap.counter, L.heap.bufs, L.pointer_bindings)
        report.variables = L.variable_bytes()
        report.printed = L.printed
        if L.printed:  # as a GPU's printf buffer appears on the host when the launch is synchronized
            sys.stdout.write("".join(L.printed))
    return report
