"""The interpreter's address spaces.

* Global: every pointer argument gets its own virtual range inside one heap (start 256-byte
  aligned, at least 256 unmapped bytes between buffers), so an access is mapped back to the
  argument it belongs to and any byte outside every buffer is out of bounds.
* Shared: per CTA, the first 1024 bytes are reserved (as on sm_90, where user shared memory
  starts at 0x400), then the static variables in declaration order, then the dynamic area.
  Between variables lie red zones of at least 16 bytes: an access that strays from one variable
  into the padding is reported, which hardware would not do.
* Param: the kernel parameters laid out with natural alignment; `mov %rd, param` gives an
  offset in this space, `cvta.param` a generic address.
* Local: per thread, the `.local` arrays of the kernel and of the device functions it calls, in
  declaration order with red zones between them (`LocalLayout`), then, when the kernel uses
  alloca / stacksave / stackrestore, a stack of `STACK_BYTES` that alloca takes from the top down
  (an access to stack bytes below the thread's stack pointer is out of bounds); `cvta.local` adds
  the local window's base.  Module `.global` and `.const` variables are buffers of the global heap (a
  `.const` address is its heap address, so `cvta.const` is the identity here).
* Generic addresses: global addresses are themselves (cvta.to.global is the identity); the
  shared window and the param window are fixed ranges, so `cvta.shared` adds a base and
  `cvta.to.shared` subtracts it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_PTXFORGE_INTERNAL = True

GLOBAL_BASE = 0x7F00_0000_0000
SHARED_WINDOW = 0x1000_0000_0000
PARAM_WINDOW = 0x2000_0000_0000
LOCAL_WINDOW = 0x3000_0000_0000
WINDOW_SIZE = 0x0001_0000_0000  # 4 GiB per window
SHARED_RESERVED = 1024
RED_ZONE = 16
BUFFER_ALIGN = 256
STACK_BYTES = 8192  # the per-thread alloca stack of a kernel that uses one
UNINITIALIZED_GLOBAL = 0xC7  # what an Out() array's device copy holds before the kernel writes it


def in_window(addr, base: int):
    """Whether generic address(es) `addr` fall in the window starting at `base` (SHARED_WINDOW, PARAM_WINDOW,
    LOCAL_WINDOW): element-wise for an array of .u64 addresses."""
    return (addr >= np.uint64(base)) & (addr < np.uint64(base + WINDOW_SIZE))


def _round_up(x: int, a: int) -> int:
    return -(-x // a) * a


def _inside_one_owner(owner: np.ndarray, off: np.ndarray, nbytes: int):
    """Mask of accesses [off, off+nbytes) that lie inside the space and inside one variable
    (`owner`: per byte, the index of the variable holding it, -1 for padding)."""
    size = len(owner)
    first = np.clip(off, 0, size - 1)
    last = np.clip(off + (nbytes - 1), 0, size - 1)
    inside = (off >= 0) & (off + nbytes <= size)
    o1 = owner[first]
    return inside & (o1 >= 0) & (o1 == owner[last])


@dataclass
class Buffer:
    """One pointer argument placed in the `GlobalHeap`: name, virtual start address, size, offset in the heap,
    the caller's array and whether results are copied back into it.
    """
    name: str
    start: int  # virtual address
    nbytes: int
    heap_offset: int
    array: object  # the caller's numpy array
    copy_out: bool  # results go back into the array (not for In() or read-only arrays)


class GlobalHeap:
    """All pointer arguments of a launch in one padded byte array."""

    def __init__(self, arrays):
        """`arrays`: list of (name, numpy array, copy in, copy out)."""
        self.buffers: list = []
        offset = BUFFER_ALIGN
        for name, arr, cin, cout in arrays:
            nbytes = arr.nbytes
            self.buffers.append((name, offset, nbytes, arr, cin, cout))
            offset = _round_up(offset + max(nbytes, 1) + BUFFER_ALIGN, BUFFER_ALIGN)
        self.size = _round_up(offset, 16)
        self.heap = np.zeros(self.size, dtype=np.uint8)
        starts, ends, bufs = [], [], []
        for name, off, nbytes, arr, cin, cout in self.buffers:
            if cin:
                self.heap[off:off + nbytes] = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
            else:  # Out(): device memory starts with whatever was there
                self.heap[off:off + nbytes] = UNINITIALIZED_GLOBAL
            b = Buffer(name, GLOBAL_BASE + off, nbytes, off, arr, cout)
            bufs.append(b)
            starts.append(b.start)
            ends.append(b.start + nbytes)
        self.bufs = bufs
        self.starts = np.array(starts, dtype=np.uint64)
        self.ends = np.array(ends, dtype=np.uint64)
        self.views = {1: self.heap, 2: self.heap.view(np.uint16), 4: self.heap.view(np.uint32),
                      8: self.heap.view(np.uint64)}
        self.counter = None  # a traffic.ByteCounter while the launch counts accesses
        #: per buffer, whether it holds a read-only array passed as it is (not In()): a store there is reported,
        #: its result would never reach the caller (None: no such buffer, the common case, checked at no cost)
        self.readonly = None

    def mark_readonly(self, indices) -> None:
        """Buffers `indices` hold read-only arrays the caller did not mark input-only (`readonly`)."""
        if indices:
            self.readonly = np.zeros(len(self.bufs), dtype=bool)
            self.readonly[list(indices)] = True

    def address_of(self, index: int) -> int:
        """The virtual address of buffer `index` (the pointer value the kernel receives)."""
        return self.bufs[index].start

    def write_back(self):
        """Copy the heap back into the callers' arrays (in place, keeping their dtype and shape)."""
        for b in self.bufs:
            if not b.copy_out:
                continue
            data = self.heap[b.heap_offset:b.heap_offset + b.nbytes]
            arr = b.array
            if arr.flags.c_contiguous and arr.flags.writeable:
                arr.reshape(-1).view(np.uint8)[...] = data
            elif arr.flags.writeable:
                arr[...] = data.view(arr.dtype).reshape(arr.shape)

    def locate(self, addr: np.ndarray, nbytes: int):
        """Per address: (buffer index or -1, offset in heap); -1 when [addr, addr+nbytes) is not
        inside one buffer."""
        k = np.searchsorted(self.starts, addr, side="right").astype(np.int64) - 1
        kk = np.maximum(k, 0)
        ok = (k >= 0) & (addr + np.uint64(nbytes) <= self.ends[kk]) if len(self.starts) else np.zeros(
            addr.shape, dtype=bool)
        off = (addr - np.uint64(GLOBAL_BASE)).astype(np.int64)
        return np.where(ok, k, -1), off

    def where(self, addr: int, nbytes: int) -> str:
        """Where an access inside a buffer lies: "bytes a..b of 'name' (dtype[shape])" (else as `describe`)."""
        for b in self.bufs:
            if b.start <= addr and addr + nbytes <= b.start + b.nbytes:
                return f"bytes {addr - b.start}..{addr - b.start + nbytes - 1} of '{b.name}' ({_array_desc(b)})"
        return self.describe(addr, nbytes)

    def describe(self, addr: int, nbytes: int) -> str:
        """Where an out-of-bounds access lies relative to the nearest buffer."""
        if addr < 65536:
            return f"address {addr:#x} is a null (or nearly null) pointer"
        best = None
        for b in self.bufs:
            if b.start <= addr < b.start + b.nbytes and addr + nbytes <= b.start + b.nbytes:
                continue
            dist = b.start - addr if addr < b.start else max(0, addr + nbytes - (b.start + b.nbytes))
            lo = addr - b.start
            what = _array_desc(b)
            if addr < b.start:
                text = f"{b.start - addr} bytes before the start of '{b.name}' ({what})"
            else:
                text = f"bytes {lo}..{lo + nbytes - 1} of '{b.name}', which has {b.nbytes} bytes ({what})"
            if best is None or dist < best[0]:
                best = (dist, text)
        return best[1] if best else "no buffer is mapped there"


def _array_desc(b) -> str:
    a = b.array
    return f"{a.dtype}{list(a.shape)}"


@dataclass(frozen=True)
class SharedVar:
    """One shared variable of a CTA's layout: its name, shared-window address and size."""
    name: str
    offset: int  # shared-window address of its first byte
    nbytes: int


class SharedLayout:
    """Per-CTA shared memory: reserved bytes, static variables, red zones, the dynamic area."""

    def __init__(self, kernel, dynamic_bytes: int, function_shared=()):
        """`function_shared`: the static arrays the kernel's device functions declare (`exec_call.function_shared`),
        placed after its own."""
        self.vars: list = []
        self.offsets: dict = {}
        off = SHARED_RESERVED
        for s in (*kernel.shared, *function_shared):
            off = _round_up(off, max(s.align, 16))
            self.vars.append(SharedVar(s.name, off, s.nbytes))
            self.offsets[s.name] = off
            off += s.nbytes + RED_ZONE
        dyn_align = max([16] + [s.align for s in kernel.extern_shared])
        off = _round_up(off, dyn_align)
        self.dynamic_offset = off
        self.dynamic_bytes = int(dynamic_bytes)
        if self.dynamic_bytes or kernel.extern_shared:
            names = ", ".join(s.name for s in kernel.extern_shared) or "dynamic shared memory"
            self.vars.append(SharedVar(names, off, self.dynamic_bytes))
        for s in kernel.extern_shared:
            self.offsets[s.name] = off
        off += self.dynamic_bytes + RED_ZONE
        self.size = _round_up(off, 16)
        owner = np.full(self.size, -1, dtype=np.int32)
        for i, v in enumerate(self.vars):
            owner[v.offset:v.offset + v.nbytes] = i
        self.owner = owner
        self.static_bytes = kernel.static_shared_bytes

    def check(self, off: np.ndarray, nbytes: int):
        """Mask of accesses [off, off+nbytes) that lie inside one variable."""
        return _inside_one_owner(self.owner, off, nbytes)

    def describe(self, addr: int, nbytes: int) -> str:
        """Where an out-of-range shared access lies: past the CTA's shared memory, below the first variable, or
        in the red zone next to a variable (named).
        """
        if addr >= self.size:
            return (f"shared address {addr:#x} is beyond this CTA's {self.size} bytes of shared memory (a generic "
                    "address used with .shared? cvta.to.shared converts one)")
        if addr < SHARED_RESERVED:
            return (f"shared address {addr:#x} is below the first shared variable (at {SHARED_RESERVED:#x}); "
                    "was the variable's base address (mov %r, var) forgotten?")
        best = None
        for v in self.vars:
            if addr >= v.offset and addr + nbytes <= v.offset + v.nbytes:
                continue
            if addr < v.offset:
                d = (v.offset - addr, f"{v.offset - addr} bytes before '{v.name}' ({v.nbytes} bytes)")
            else:
                d = (addr + nbytes - v.offset - v.nbytes,
                     f"{addr + nbytes - v.offset - v.nbytes} bytes past the end of '{v.name}' "
                     f"({v.nbytes} bytes, access at offset {addr - v.offset})")
            if best is None or d[0] < best[0]:
                best = d
        return best[1] if best else f"shared address {addr:#x} is outside every shared variable"


class LocalLayout:
    """Per-thread `.local` memory: each variable at its alignment, a red zone after each one, then the alloca
    stack (`stack_bytes`, none by default) from `stack_base` up to `stack_top`, where the stack pointer starts."""

    def __init__(self, variables, stack_bytes: int = 0):
        """`variables`: the `.local` Variables (sized) a run uses; `stack_bytes`: the size of the alloca stack."""
        self.offsets: dict = {}
        self.vars: list = []
        off = RED_ZONE
        for v in variables:
            n = v.nbytes
            if not n:
                continue
            off = _round_up(off, max(v.align or 1, 16))
            self.offsets[v.name] = off
            self.vars.append((v.name, off, n))
            off += n + RED_ZONE
        self.stack_bytes = stack_bytes
        self.stack_base = self.stack_top = 0
        if stack_bytes:
            self.stack_base = _round_up(off, 16)
            self.stack_top = self.stack_base + stack_bytes
            self.vars.append(("the alloca stack", self.stack_base, stack_bytes))
            off = self.stack_top + RED_ZONE
        self.size = _round_up(off, 16) if self.vars else 0
        owner = np.full(self.size, -1, dtype=np.int32)
        for i, (_, o, n) in enumerate(self.vars):
            owner[o:o + n] = i
        self.owner = owner

    def check(self, off: np.ndarray, nbytes: int):
        """Mask of accesses [off, off+nbytes) that lie inside one variable."""
        if not self.size:
            return np.zeros(off.shape, dtype=bool)
        return _inside_one_owner(self.owner, off, nbytes)

    def describe(self, addr: int, nbytes: int) -> str:
        """Where an out-of-range local access lies (the nearest variable), for messages."""
        if self.stack_bytes and self.stack_base <= addr < self.stack_top:
            return (f"local offset {addr} is in the alloca stack ({self.stack_bytes} bytes at offset {self.stack_base}) "
                    "but not in what alloca holds for the thread: below its stack pointer (never allocated, or "
                    "released by stackrestore or a return), or running past the stack's top")
        for name, o, n in self.vars:
            if o - RED_ZONE <= addr < o + n + RED_ZONE:
                return f"local offset {addr} is outside {name} ({n} bytes at offset {o})"
        return f"local offset {addr} is in no .local variable"


class ParamLayout:
    """Kernel parameters as bytes: `.param` space (ld.param, cvta.param)."""

    def __init__(self, params, values):
        """`values`: one bytes object per parameter, already encoded."""
        off = 0
        self.offsets, self.sizes = {}, {}
        chunks = []
        for p, raw in zip(params, values):
            align = p.align or min(max(p.size, 1), 8) if p.nbytes is None else (p.align or 1)
            off = _round_up(off, align)
            self.offsets[p.name] = off
            self.sizes[p.name] = p.size
            chunks.append((off, raw))
            off += p.size
        self.size = _round_up(max(off, 16), 16)
        self.data = np.zeros(self.size, dtype=np.uint8)
        for o, raw in chunks:
            self.data[o:o + len(raw)] = np.frombuffer(raw, dtype=np.uint8)
        self.owner = np.full(self.size, -1, dtype=np.int32)
        for i, p in enumerate(params):
            self.owner[self.offsets[p.name]:self.offsets[p.name] + p.size] = i
        self.views = {1: self.data, 2: self.data.view(np.uint16), 4: self.data.view(np.uint32),
                      8: self.data.view(np.uint64)}

    def check(self, off: np.ndarray, nbytes: int):
        """Mask of accesses [off, off+nbytes) that lie inside one parameter."""
        return _inside_one_owner(self.owner, off, nbytes)
