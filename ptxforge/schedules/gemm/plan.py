"""A GEMM launch resolved once: `GemmPlan`, and the fast path `GemmSchedule.run()` takes through it.

Everything that depends only on the *kind* of a problem — the variant of the schedule (copy width,
C pair stores, compute path), the loaded kernel, grid, block, dynamic shared memory, the operand
checks — is decided once per (schedule, M, N, K, operand dtypes, alignment class, device, stream)
and kept in a `GemmPlan`.  A repeated call with operands of the same kind then only reads three
addresses, compares a few cached facts and issues one ``cuLaunchKernel``.

How an operand is read on the fast path: see `ptxforge.schedules.operands`.

Stream ordering: the array interface names the stream that produced an operand.  A plan is made
for one launch stream; the fast path is only taken when, on the call that made the plan, every
operand's producer stream was that launch stream (or both were the legacy default stream), so no
cross-stream wait was needed.  Otherwise every call takes the careful path, which orders the launch
after the producers' streams with events.  If you switch the stream that produces the operands
between calls, pass that stream as ``stream=``.  A call given no stream whose operands are torch tensors
launches on torch's current stream (`runtime.streams.current_stream_of`), and its plan is kept for that stream.
"""

from __future__ import annotations

import threading

import numpy as np

from ...errors import LaunchError, ValidationError
from ..operands import _reader, align_class, check_device_out, check_gpu_operand, device_view_of, stream_key

_PTXFORGE_INTERNAL = True

_kernels: dict = {}
_lock = threading.Lock()

#: argument blocks a plan keeps, one per (A, B, C) address triple it launched on (a loop over a model's
#: layers cycles through hundreds; each block is under 100 bytes)
_BLOBS = 1024


def load_kernel(s):
    """The KernelFunction of schedule `s`, loaded once per schedule (emission is not free)."""
    hit = _kernels.get(s)
    if hit is not None:
        return hit
    from ...runtime import load
    fn = load(s.module)[s.kernel_name]
    with _lock:
        if len(_kernels) > 128:
            _kernels.clear()
        _kernels[s] = fn
    return fn




class GemmPlan:
    """One GEMM problem resolved once: call it with operands of that problem's kind to launch.

    Made by `GemmSchedule.plan(m, n, k)`.  The plan owns the variant (`plan.schedule`), its
    loaded kernel, the grid, block and shared memory, and the argument blocks it packed (one per
    address triple, packed once).  Calling
    ``plan(a, b, c)`` checks that the operands are GPU arrays of the planned shapes, dtypes,
    device and alignment class and issues one ``cuLaunchKernel`` on the plan's stream; it does
    no allocation and no synchronization, so it can be captured into a CUDA graph.

    a: [M, K/2] packed bytes (4-bit) or [M, K] (8-bit); b: [N, same]; c: int32 [M, N].
    """

    def __init__(self, schedule, m: int, n: int, k: int, *, align: int = 16, c_align: int = 16, stream=None,
                 device: int | None = None):
        from ...runtime.streams import stream_handle
        v = schedule.for_problem(k, n, align=align, c_align=c_align)  # the variant may change path with K
        v.check_problem(m, n, k)
        self.schedule = v
        self.m, self.n, self.k = m, n, k
        self.align, self.c_align = align, c_align
        self.stream = stream_handle(stream) if stream is not None else 0
        self.device = device
        self.row_bytes = k * v.bits // 8
        self.function = fn = load_kernel(v)
        self._cfg = fn._config(v.grid(m, n), v.block, v.shared_bytes)
        if v.pdl:  # launched so that it may start while the kernel ahead of it finishes
            from ...runtime.dependent import DependentLaunch
            self._go = DependentLaunch(fn, self._cfg, self.stream).go
        else:
            from ...runtime.launch_ex import block_launcher
            self._go = block_launcher(fn, self._cfg, self.stream)
        self._workspace = v.splitk_workspace(m, n, self.stream)  # split-K: kept alive with the plan
        self._extra = tuple(x.ptr for x in self._workspace)
        self._blobs: dict = {}  # (A, B, C addresses) -> their argument block, packed once (`launch_pointers`)
        self._dtypes: dict = {}  # dtype key -> True once checked (per operand slot)

    def __repr__(self) -> str:
        return (f"<GemmPlan {type(self.schedule).__name__} M={self.m} N={self.n} K={self.k} "
                f"grid={self._cfg[0:3]} block={self._cfg[3:6]} shared={self._cfg[6]} B>")

    # ------------------------------------------------------------ checks
    def _expect(self, slot: str, got, shape: tuple, dtype_ok) -> int:
        """The address of operand `slot` after checking its shape, dtype, device and alignment class."""
        ptr, shp, dt, dev = got
        if shp != shape:
            raise ValidationError(f"{slot} has shape {tuple(shp)}; this plan is for {shape}")
        key = (slot, dt)
        if key not in self._dtypes:
            if not dtype_ok(dt):
                raise ValidationError(f"{slot} has dtype {dt}; this plan takes "
                                      f"{'int32' if slot == 'C' else '8-bit integers'}")
            self._dtypes[key] = True
        if self.device is not None and dev is not None and dev != self.device:
            raise LaunchError(f"{slot} lives on device {dev}; this plan launches on device {self.device}")
        if align_class(ptr) < (self.c_align if slot == "C" else self.align):
            raise ValidationError(f"{slot} at 0x{ptr:x} is aligned to {align_class(ptr)} bytes; this plan's "
                                  f"variant needs {self.c_align if slot == 'C' else self.align}: make a new plan")
        return ptr

    def __call__(self, a, b, c, stream=None):
        """Launch C = A . B^T on GPU operands of the planned kind; returns `c`.  `stream` must be the plan's."""
        if stream is not None:
            from ...runtime.streams import stream_handle
            if stream_handle(stream) != self.stream:
                raise LaunchError("this plan launches on the stream it was made for; make a plan per stream")
        ga, gb, gc = _read(a, "A", self.stream), _read(b, "B", self.stream), _read(c, "C", self.stream)
        byte_ok = _is_packed_byte if self.schedule.bits == 4 else _is_byte
        self.launch_pointers(self._expect("A", ga, (self.m, self.row_bytes), byte_ok),
                             self._expect("B", gb, (self.n, self.row_bytes), byte_ok),
                             self._expect("C", gc, (self.m, self.n), _is_int32))
        return c

    def launch_pointers(self, a_ptr: int, b_ptr: int, c_ptr: int) -> None:
        """Launch on raw device addresses (no checks beyond the plan's own): the innermost loop's call.  The
        argument block of an address triple is packed once and kept (up to _BLOBS of them), never refilled;
        packing it refuses a C whose bytes meet A's or B's."""
        blob = self._blobs.get((a_ptr, b_ptr, c_ptr))
        if blob is None:  # a first launch on these addresses: C's bytes must not be A's or B's
            check_device_out(c_ptr, self.m * self.n * 4, (("A", a_ptr, self.m * self.row_bytes),
                                                          ("B", b_ptr, self.n * self.row_bytes)))
            from ...runtime.kernel import kept_blob
            blob = kept_blob(self._blobs, (a_ptr, b_ptr, c_ptr), self.function.layout,
                             (a_ptr, b_ptr, c_ptr, self.m, self.n, self.k) + self._extra, _BLOBS)
        self._go(blob)


def _read(x, slot: str, stream: int = 0):
    """(address, shape, dtype, device) of GPU operand `slot`: through the fast reader, else its array
    interface (a DLPack producer told that the launch goes to `stream`) after the driver placed it."""
    got = _reader.read(x)
    if got is None:
        from ...runtime.memory import DeviceBuffer
        if isinstance(x, DeviceBuffer):  # read fast unless freed: .ptr raises, naming it
            return x.ptr, tuple(x.shape), x.dtype, None
        v = device_view_of(x, slot, stream) if not isinstance(x, np.ndarray) else None
        if v is None or isinstance(v, np.ndarray):
            raise LaunchError(f"{slot} must be a GPU array (DeviceBuffer, __cuda_array_interface__ or DLPack) for a "
                              f"plan; got {type(x).__name__} (use GemmSchedule.run for numpy arrays)")
        check_gpu_operand(v, x, slot, LaunchError)
        _reader.learn(x, v.ptr)
        dt = np.dtype(f"{v.elem.kind}{v.elem.bits // 8}") if v.elem.kind in ("i", "u") else v.elem
        return v.ptr, tuple(v.shape), dt, v.device_id
    return got


def _dtype_elem(dt):
    """(kind, bits) of a numpy dtype, an Elem, or a framework dtype whose name says it (torch.int8)."""
    if isinstance(dt, np.dtype):
        return dt.kind, dt.itemsize * 8
    kind = getattr(dt, "kind", None)
    bits = getattr(dt, "bits", None)
    if isinstance(kind, str) and isinstance(bits, int):
        return kind, bits
    name = str(dt).rsplit(".", 1)[-1]
    try:
        nd = np.dtype(name)
    except TypeError:
        return None, None
    return nd.kind, nd.itemsize * 8


def _is_byte(dt) -> bool:
    kind, bits = _dtype_elem(dt)
    return kind in ("i", "u") and bits == 8


def _is_packed_byte(dt) -> bool:
    """uint8: packed 4-bit operands (int8 would be unpacked values, one per byte)."""
    kind, bits = _dtype_elem(dt)
    return kind == "u" and bits == 8


def _is_int32(dt) -> bool:
    kind, bits = _dtype_elem(dt)
    return kind == "i" and bits == 32


# ---------------------------------------------------------------- the documented call's fast path

_plans: dict = {}
_plans_lock = threading.Lock()
_PLAN_CACHE_SIZE = 256


def fast_run(s, a, b, c, k, stream):
    """The launch through a cached plan when all three operands read quickly and a plan of their kind
    exists; returns `c`, or None to send the call through the careful path (which makes the plan)."""
    if c is None:
        return None
    ga = _reader.read(a)
    if ga is None:
        return None
    gb, gc = _reader.read(b), _reader.read(c)
    if gb is None or gc is None:
        return None
    entry = _plans.get(id(s))
    if entry is None or entry[0] is not s:
        return None
    plan = entry[1].get((ga[1], ga[2], gb[1], gb[2], gc[1], gc[2], k, min(align_class(ga[0]), align_class(gb[0])),
                         align_class(gc[0]), ga[3], stream_key(stream, (a, b, c))))
    if plan is None:
        return None
    plan.launch_pointers(ga[0], gb[0], gc[0])
    return c


def remember_plan(s, a, b, c, k_arg, stream, m: int, n: int, k: int, align: int, c_align: int,
                  ordered: bool) -> None:
    """After the careful path launched GPU operands: keep a plan so the next such call is fast
    (`ordered`: no operand's producer stream differs from the launch stream; else keep none)."""
    if not ordered:
        return
    ga, gb, gc = _reader.read(a), _reader.read(b), _reader.read(c)
    if ga is None or gb is None or gc is None:
        return
    sh = 0
    if stream is not None:
        from ...runtime.streams import stream_handle
        sh = stream_handle(stream)
    key = (ga[1], ga[2], gb[1], gb[2], gc[1], gc[2], k_arg, min(align_class(ga[0]), align_class(gb[0])),
           align_class(gc[0]), ga[3], sh)
    plan = GemmPlan(s, m, n, k, align=align, c_align=c_align,
                    stream=stream, device=ga[3])
    with _plans_lock:
        entry = _plans.get(id(s))
        if entry is None or entry[0] is not s:  # keyed by identity (hashing a schedule costs microseconds);
            if len(_plans) >= _PLAN_CACHE_SIZE:  # the entry holds the schedule, so its id cannot be reused
                _plans.pop(next(iter(_plans)))
            entry = _plans[id(s)] = (s, {})
        if len(entry[1]) >= _PLAN_CACHE_SIZE:
            entry[1].pop(next(iter(entry[1])))
        entry[1][key] = plan
