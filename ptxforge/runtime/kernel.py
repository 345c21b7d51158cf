"""KernelFunction: a loaded kernel you call like a function; BoundLaunch: one launch prepared once.

    fn = pf.load(module)["saxpy"]
    fn(grid, block, x, y, n, a, shared=0, stream=None)

A call with only GPU memory and scalars is asynchronous, like a CUDA launch.  A call
with host (numpy) arrays stages them through temporary device buffers and returns once
the results are copied back.

Lifetimes: a BoundLaunch holds the DeviceBuffers and foreign arrays it was bound to, so
they outlive it; launching it after close(), after one of its DeviceBuffers was freed, or
after its module was unloaded raises LaunchError instead of running on freed memory.
"""

from __future__ import annotations

import ctypes
import struct
import threading

from ..errors import LaunchError
from . import driver as _drv
from . import faults
from .driver import api, check, driver_error
from .launch_ex import block_launcher, launch_advice, stream_words
from .launch import (LaunchLimits, ParamLayout, Resolved, as_dims, check_block, check_grid, check_shared,
                     fast_values, layout, resolve)
from .arrays import In, InOut, Out
from .memory import DeviceBuffer
from .streams import Stream, current_stream_of, stream_handle

_PTXFORGE_INTERNAL = True

#: CU_FUNC_ATTRIBUTE_* read after loading, by the name ptxforge exposes.
FUNCTION_ATTRIBUTES = {
    "registers": "CU_FUNC_ATTRIBUTE_NUM_REGS",
    "static_shared": "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES",
    "local_bytes": "CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES",
    "const_bytes": "CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES",
    "max_threads_per_block": "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
    "max_dynamic_shared": "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
    "ptx_version": "CU_FUNC_ATTRIBUTE_PTX_VERSION",
    "binary_version": "CU_FUNC_ATTRIBUTE_BINARY_VERSION",
}


class _ArgBlob:
    """A fixed host buffer holding the packed arguments, plus the void* array cuLaunchKernel reads.

    kernelParams is handed to cuda.bindings as the integer address of a ctypes array of
    pointers, each pointing at one argument's bytes inside the blob.  cuda.bindings passes an
    int through as the `void**` unchanged, so no per-launch conversion of Python values
    happens there, and the driver copies the bytes before cuLaunchKernel returns, so the blob
    can be reused for the next launch.
    """

    __slots__ = ("buf", "argv", "addr", "packer")

    def __init__(self, lay: ParamLayout):
        self.packer = struct.Struct(lay.fmt)
        self.buf = ctypes.create_string_buffer(max(lay.size, 1))
        base = ctypes.addressof(self.buf)
        n = len(lay.specs)
        self.argv = (ctypes.c_void_p * max(n, 1))(*[base + s.offset for s in lay.specs])
        self.addr = ctypes.addressof(self.argv) if n else 0

    def fill(self, values) -> None:
        self.packer.pack_into(self.buf, 0, *values)


def kept_blob(blobs: dict, key, lay: ParamLayout, values, limit: int) -> _ArgBlob:
    """An `_ArgBlob` of `lay` filled with `values`, kept in `blobs` under `key` (the oldest dropped once `limit`
    are kept): a prepared launcher's argument block for one address triple, packed once and never refilled."""
    blob = _ArgBlob(lay)
    blob.fill(values)
    if len(blobs) >= limit:
        blobs.pop(next(iter(blobs)))
    blobs[key] = blob
    return blob


#: types of grid/block values that cannot change after they were checked (a list can)
_IMMUTABLE = frozenset((int, tuple))


class KernelFunction:
    """One kernel of a loaded module: its attributes, checks and launches."""

    def __init__(self, module, name: str, handle, params, block_limit=None, *, pointer_aligns=()):
        """`pointer_aligns`: per parameter, the alignment a pointer's memory must have (`.ptr .align` of PTX text)."""
        self.module = module
        self.name = name
        self._func = handle
        self.params = tuple(params)
        self.block_limit = block_limit
        self.layout = layout(self.params, pointer_aligns)
        d = api()
        self.attributes = {}
        for key, attr in FUNCTION_ATTRIBUTES.items():
            enum = getattr(d.CUfunction_attribute, attr, None)
            if enum is not None:
                self.attributes[key] = int(check(d.cuFuncGetAttribute(enum, handle),
                                                 f"cuFuncGetAttribute({attr}) of kernel '{name}'"))
        self._limits: LaunchLimits = _drv.device_info().limits
        self._ordinal = _drv.device_info().ordinal
        # parameters ptxforge wrote itself are exact; PTX text read from elsewhere also gets its count checked
        check_param_layout(name, handle, self.layout,
                           count=getattr(module, "source_module", None) is None)
        self._blob = _ArgBlob(self.layout)
        self._lock = threading.Lock()
        self._configs: dict = {}
        self._last_config = (None, None, None, None)  # (grid, block, shared as given, the checked config)
        self._launchers: dict = {}  # (cfg, stream) -> the plain launch of a packed block (`_launch`)

    # ------------------------------------------------------------ attributes
    registers = property(lambda self: self.attributes["registers"], doc=(
        "The registers each thread of this kernel uses, a count per thread: what the assembler allocated for the "
        "device's architecture, as the driver reports it once the module is loaded "
        "(cuFuncGetAttribute CU_FUNC_ATTRIBUTE_NUM_REGS).  With the block size it bounds how many CTAs fit on an "
        "SM."))
    static_shared = property(lambda self: self.attributes["static_shared"], doc=(
        "The shared memory the kernel declares statically (its `.shared` variables), in bytes per CTA, as the "
        "driver reports it once the module is loaded (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES).  The dynamic shared "
        "memory a launch asks for (`shared=`) comes on top of it."))
    local_bytes = property(lambda self: self.attributes["local_bytes"], doc=(
        "The local memory each thread uses, in bytes per thread (register spills, arrays kept in local memory, "
        "the call stack), as the driver reports it once the module is loaded "
        "(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES); 0 for a kernel that neither spills nor keeps anything there."))
    max_threads_per_block = property(lambda self: self.attributes["max_threads_per_block"], doc=(
        "The largest block, in threads per CTA, this compiled kernel can be launched with, as the driver reports "
        "it once the module is loaded (CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK): the device's limit, or less "
        "when the registers each thread uses would not fit a larger block or the kernel's `.maxntid` caps it "
        "(`.reqntid` does not lower it).  A launch with a larger block is refused before it reaches the driver."))

    def __repr__(self) -> str:
        a = self.attributes
        return (f"<KernelFunction {self.name}{self.layout.signature()}: {a.get('registers')} registers, "
                f"{a.get('static_shared')} B static smem, {a.get('local_bytes')} B local, "
                f"max {a.get('max_threads_per_block')} threads>")

    def __copy__(self) -> "KernelFunction":
        return self  # its argument block and lock are shared by every launch of the kernel

    def __deepcopy__(self, memo) -> "KernelFunction":
        return self

    def __reduce__(self):
        raise TypeError(f"kernel '{self.name}' is loaded in this process's CUDA context and cannot be pickled; pickle "
                        "its module's ptx (or the ptxforge Module) and load() it there")

    # ------------------------------------------------------------ configuration
    def _config(self, grid, block, shared) -> tuple:
        """(gx, gy, gz, bx, by, bz, shared bytes) of a launch, checked against the kernel and the device once per
        configuration and remembered.  Only ints are valid, yet 1.0 == 1 and True == 1 (and hash alike), so the
        memory must not hand a float or a bool the answer of an int: the very objects of the last configuration
        (ints and tuples cannot change) are recognized by identity; plain ints are their own key; anything else
        is keyed with its types too (a longer key, so the two kinds never meet)."""
        last = self._last_config
        if grid is last[0] and block is last[1] and shared is last[2]:
            return last[3]
        tg, tb = type(grid), type(block)
        try:
            if tg is int and tb is int and type(shared) is int:
                key = (grid, block, shared)
            else:
                key = (grid, block, shared, tg if tg is not tuple else tuple(map(type, grid)),
                       tb if tb is not tuple else tuple(map(type, block)), type(shared))
            hit = self._configs.get(key)
        except TypeError:  # lists are not hashable; validate every time
            key, hit = None, None
        if hit is not None:
            if tg in _IMMUTABLE and tb in _IMMUTABLE:
                self._last_config = (grid, block, shared, hit)
            return hit
        g = as_dims(grid, "grid", self.name)
        b = as_dims(block, "block", self.name)
        lim = self._limits
        check_grid(g, lim, kernel=self.name)
        check_block(b, lim, kernel=self.name, block_limit=self.block_limit,
                    max_threads=self.attributes.get("max_threads_per_block"))
        static = self.attributes.get("static_shared", 0)
        check_shared(shared, static, lim, kernel=self.name)
        nbytes = int(shared)
        self._allow_dynamic_shared(nbytes)
        cfg = (*g, *b, nbytes)
        if key is not None:
            if len(self._configs) > 256:
                self._configs.clear()
            self._configs[key] = cfg
            if tg in _IMMUTABLE and tb in _IMMUTABLE:
                self._last_config = (grid, block, shared, cfg)
        return cfg

    def _allow_dynamic_shared(self, nbytes: int) -> None:
        """Raise the kernel's dynamic shared memory limit when a launch asks for more (above 48 KB)."""
        if nbytes <= self.attributes.get("max_dynamic_shared", 0):
            return
        d = api()
        prev = _drv.enter()  # (once per kernel and size: plans reach here outside any other entry point)
        try:
            check(d.cuFuncSetAttribute(self._func,
                                       d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes),
                  f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes}) of kernel '{self.name}'")
        finally:
            _drv.leave(prev)
        self.attributes["max_dynamic_shared"] = nbytes

    # ------------------------------------------------------------ launching
    def _check_loaded(self) -> None:
        if self.module._handle is None:
            raise LaunchError(f"kernel '{self.name}' belongs to a module that was unloaded; load() it again")

    def _launch(self, cfg, stream: int, blob: _ArgBlob, values) -> None:
        """cuLaunchKernel with `blob` filled with `values` under the kernel's lock, through the launcher of this
        configuration and stream (`launch_ex.block_launcher`, made once per pair)."""
        go = self._launchers.get((cfg, stream))
        if go is None:
            if len(self._launchers) > 256:
                self._launchers.clear()
            go = self._launchers[(cfg, stream)] = block_launcher(self, cfg, stream)
        with self._lock:
            blob.fill(values)
            go(blob)

    def _resolve(self, args, stream: int):
        """The arguments checked and packed for a launch on `stream` (foreign arrays asked of the driver), with
        `stream` ordered after the producer streams their array interfaces name."""
        r = resolve(self.layout, args, self.name, stream, device=self._ordinal, check_pointer=_drv.check_pointer)
        if r.streams:
            wait_for_streams(r.streams, stream)
        return r

    def __call__(self, grid, block, *args, shared: int = 0, stream=None) -> None:
        """Launch on `grid` x `block` with `shared` bytes of dynamic shared memory on `stream` (None: torch's
        current stream when an argument is a torch CUDA tensor, else the legacy default stream)."""
        prev = _drv.enter()
        try:
            cfg = self._config(grid, block, shared)
            s = stream_handle(stream) if stream is not None else (current_stream_of(args) or 0)
            values = fast_values(self.layout, args)
            if values is not None:
                self._launch(cfg, s, self._blob, values)
                return
            r = self._resolve(args, s)
            if not r.transfers:
                self._launch(cfg, s, self._blob, r.values)
                return
            staged = _stage_in(r, s)
            try:
                self._launch(cfg, s, self._blob, r.values)
                _stage_out(staged, s)
            finally:
                if faults.dead_reason() is None:
                    for buf, _ in staged:
                        buf.free()
        finally:
            if prev is not None:
                _drv.leave(prev)

    launch = __call__

    def bind(self, grid, block, *args, shared: int = 0, stream=None) -> "BoundLaunch":
        """Check and pack everything once; the returned BoundLaunch re-launches with one driver call.

        Host arrays are copied to the device now (In/InOut); ``copy_back()`` fetches Out/InOut results.  The
        stream is resolved now too (None: torch's current stream when an argument is a torch CUDA tensor).
        """
        self._check_loaded()
        prev = _drv.enter()
        try:
            cfg = self._config(grid, block, shared)
            s = stream_handle(stream) if stream is not None else (current_stream_of(args) or 0)
            r = self._resolve(args, s)
            staged = _stage_in(r, s) if r.transfers else []
        finally:
            _drv.leave(prev)
        return BoundLaunch(self, cfg, s, r, staged, stream_source=stream if isinstance(stream, Stream) else None)


class BoundLaunch:
    """A launch prepared once (checked, staged, packed): ``launch()`` is a single cuLaunchKernel."""

    def __init__(self, fn: KernelFunction, cfg: tuple, stream: int, resolved: Resolved, staged, *,
                 stream_source: Stream | None = None):
        """`stream_source`: the ptxforge Stream whose handle `stream` is, kept (a collected Stream would be
        destroyed under the launch) and asked at each launch whether it was closed."""
        self.function = fn
        self._stream_src = stream_source
        self.config = cfg
        self.stream = stream
        self._resolved = resolved  # keeps the DeviceBuffers and producer arrays alive while this launch can run
        self._buffers = tuple(b for b in resolved.keep if isinstance(b, DeviceBuffer) and b.nbytes)
        self._staged = staged
        self._closed = False
        self._blob = _ArgBlob(fn.layout)
        self._blob.fill(resolved.values)
        self._stream_obj = _stream_obj(stream)

    @property
    def grid(self) -> tuple:
        """The grid of the bound launch, in CTAs (x, y, z)."""
        return self.config[0:3]

    @property
    def block(self) -> tuple:
        """The CTA shape of the bound launch, in threads (x, y, z)."""
        return self.config[3:6]

    def _refuse(self) -> None:
        fn = self.function
        if self._closed:
            raise LaunchError(f"this bound launch of '{fn.name}' was closed; its device copies are freed")
        if self._stream_src is not None and self._stream_src.closed:
            raise LaunchError(f"the Stream this launch of '{fn.name}' was bound to was closed; bind it again on "
                              "another stream")
        fn._check_loaded()
        for b in self._buffers:
            if not b._ptr:
                raise LaunchError(f"a DeviceBuffer this launch of '{fn.name}' was bound to has been freed")

    def launch(self) -> None:
        """Launch again with the arguments bound (one cuLaunchKernel)."""
        if (self._closed or self.function.module._handle is None or not all(b._ptr for b in self._buffers)
                or (self._stream_src is not None and self._stream_src.closed)):
            self._refuse()
        if faults._dead is not None:
            faults.raise_if_dead()
        c = self.config
        prev = _drv.enter()
        try:
            err, = api().cuLaunchKernel(self.function._func, c[0], c[1], c[2], c[3], c[4], c[5], c[6],
                                        self._stream_obj, self._blob.addr, 0)
        finally:
            if prev is not None:
                _drv.leave(prev)
        if err:
            raise driver_error(err, f"cuLaunchKernel of '{self.function.name}' (bound launch) with grid {c[0:3]}, "
                                    f"block {c[3:6]}, {c[6]} B dynamic shared memory on {stream_words(self.stream)}",
                               launch_advice(self.stream))
        faults.record_launch(self.stream, self.function.name, c)

    __call__ = launch

    def copy_back(self) -> None:
        """Copy Out/InOut host arrays back from their device copies (waits for the stream)."""
        if self._closed or (self._stream_src is not None and self._stream_src.closed):
            self._refuse()
        _stage_out(self._staged, self.stream)

    def close(self) -> None:
        """Free the device copies of host arrays and let go of the bound arrays; later launches raise."""
        self._closed = True
        if faults.dead_reason() is None:
            for buf, _ in self._staged:
                buf.free()
        self._staged = []
        self._buffers = ()
        self._resolved = None

    def __copy__(self) -> "BoundLaunch":
        return self  # its device copies are freed once, by close(): a second object would launch on freed memory

    def __deepcopy__(self, memo) -> "BoundLaunch":
        return self

    def __reduce__(self):
        raise TypeError("a BoundLaunch holds GPU memory and a loaded kernel of this process and cannot be pickled; "
                        "bind the launch again there")

    def __enter__(self) -> "BoundLaunch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------- helpers

_stream_objs: dict = {}


def _stream_obj(handle: int):
    """cuda.bindings' CUstream for a raw handle (kept, so hot loops do not rebuild it)."""
    s = _stream_objs.get(handle)
    if s is None:
        s = api().CUstream(handle)
        if len(_stream_objs) < 64:
            _stream_objs[handle] = s
    return s


#: the policy of a host array used several times in one launch, by (copy in, copy out) of all its uses together
_MERGED = {(True, True): InOut, (True, False): In, (False, True): Out}


def _stage_in(r: Resolved, stream: int) -> list:
    """Device copies of the host arrays.  The same numpy array passed several times shares one copy, with its
    uses' policies merged: copied in if any use copies in, back if any copies back (so ``Out(a), a`` reads
    `a`'s values, whichever comes first)."""
    uses = {}
    for t in r.transfers:
        a, pol = t.array, t.policy
        u = uses.get(id(a))
        if u is None:
            uses[id(a)] = [a, pol.copy_in, pol.copy_out, [t.index]]
        else:
            u[1] = u[1] or pol.copy_in
            u[2] = u[2] or pol.copy_out
            u[3].append(t.index)
    staged = []
    for a, copy_in, copy_out, indices in uses.values():
        buf = DeviceBuffer(shape=a.shape, dtype=a.dtype)
        staged.append((buf, _MERGED[copy_in, copy_out](a)))
        if copy_in:
            buf.copy_from_host(a, stream=stream)
        for i in indices:
            r.values[i] = buf.ptr
    return staged


def _stage_out(staged, stream: int) -> None:
    for buf, policy in staged:
        if policy.copy_out:
            buf.copy_to_host(policy.array, stream=stream)
    if staged:  # In-only copies too: their buffers are freed next, so the kernel must be done with them
        check(api().cuStreamSynchronize(_stream_obj(stream)), "cuStreamSynchronize")
        faults.synchronized(stream)


def launch_gpu_args(fn, make_launch, args, what: str) -> None:
    """One launch of KernelFunction `fn` through a prepared launch (`launch_dependent`, `launch_cluster`): in
    ptxforge's context, `make_launch()` builds it (config and stream), `args` are checked as a plain launch
    checks them (element types, device and context of foreign arrays, producer streams waited for) and must
    be GPU memory and scalars; then its one cuLaunchKernelEx.  `what` names the call in errors."""
    prev = _drv.enter()
    try:
        launch = make_launch()
        r = fn._resolve(args, launch.stream)
        if r.transfers:
            raise LaunchError(f"{what} of '{fn.name}' takes GPU memory only; copy host arrays to DeviceBuffers")
        launch.launch(fn._blob, r.values)
    finally:
        _drv.leave(prev)


def wait_for_streams(producers, stream: int) -> None:
    """Order work on `stream` after the producers' pending work (CUDA array interface v3 'stream' handles),
    with one event each, recorded in ptxforge's context."""
    d = api()
    prev = _drv.enter()
    try:
        for p in set(producers):
            ev = check(d.cuEventCreate(int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)), "cuEventCreate")
            try:
                check(d.cuEventRecord(ev, _stream_obj(int(p))), "cuEventRecord")
                check(d.cuStreamWaitEvent(_stream_obj(stream), ev, 0), "cuStreamWaitEvent")
            finally:
                check(d.cuEventDestroy(ev), "cuEventDestroy")
    finally:
        _drv.leave(prev)



#: CUDA_ERROR_INVALID_VALUE: cuFuncGetParamInfo's answer for an index past the last parameter.
_INVALID_VALUE = 1


def check_param_layout(kernel: str, func, lay: ParamLayout, *, count: bool = True) -> None:
    """Compare ptxforge's reading of a kernel's parameters with the driver's own (cuFuncGetParamInfo,
    driver CUDA >= 12.4): every parameter's size, and their count.

    A launch hands cuLaunchKernel one pointer per parameter and the driver copies each parameter's
    size from it to the parameter's place in its own layout, so the sizes (and the count) are what
    must agree: a parameter read with the wrong size would take the wrong bytes.  The driver's
    offsets may differ from ptxforge's packing and need not agree: ptxas aligns parameters within
    the constant bank, whose parameter area starts on a 16-byte boundary, so on the H200 a
    `.param .align 64 .b8 t[128]` after 24 bytes of parameters sits at offset 48, not 64.
    A mismatch is a LaunchError naming the parameter; drivers or bindings without the call are
    not checked.  `count=False` skips asking for the parameter past the last one (which the driver
    answers with CUDA_ERROR_INVALID_VALUE, an API error compute-sanitizer reports): for kernels whose
    parameters ptxforge declared itself.
    """
    d = api()
    info = getattr(d, "cuFuncGetParamInfo", None)
    if info is None:
        return
    for spec in lay.specs:
        try:
            err, off, size = info(func, spec.index)
        except Exception:  # bindings newer than the driver: the symbol is missing
            return
        if err:
            if spec.index == 0 and int(err) != _INVALID_VALUE:
                return  # not supported by this driver
            raise LaunchError(f"kernel '{kernel}': the driver knows no parameter {spec.index} ({spec.name}); "
                              f"ptxforge read {len(lay.specs)} parameters {lay.signature()} from its PTX")
        if int(size) != spec.size:
            raise LaunchError(f"kernel '{kernel}': parameter {spec.index} ({spec.describe()}) is {spec.size} bytes as "
                              f"ptxforge read it, but {int(size)} bytes to the driver (at its offset {int(off)})")
    if not count:
        return
    try:
        err, off, size = info(func, len(lay.specs))
    except Exception:
        return
    if not err:
        raise LaunchError(f"kernel '{kernel}' has more parameters than the {len(lay.specs)} ptxforge read from its PTX "
                          f"{lay.signature()}: the driver has one at offset {int(off)} ({int(size)} bytes)")
