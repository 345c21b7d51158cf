"""Launch checks and argument packing: pure Python, no GPU needed.

Everything a launch can get wrong on the host side is caught here, before the driver sees
it, with a message naming the kernel and the parameter: the argument count, what each
argument may be, scalar ranges, dtypes against the pointee type, contiguity, block and
grid shapes against the kernel's directives and the device, shared memory against the
device limit.  Arguments are packed into one byte blob in the layout the parameter types
give; `kernel.py` points cuLaunchKernel's kernelParams into it.
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import LaunchError
from ..isa import types as T
from ..isa.types import ScalarType
from ..kernel import param_align
from .driver import LaunchLimits
from .arrays import (DeviceView, Elem, HostArray, accepts, big_endian, c_contiguous, check_byte_order, device_view,
                     expected_dtype, host_policy, must_wait)
from .memory import DeviceBuffer

_PTXFORGE_INTERNAL = True


# ---------------------------------------------------------------- limits and shapes

def as_dims(v, what: str, kernel: str = "") -> tuple:
    """An int or 1..3 ints -> (x, y, z), each >= 1."""
    where = f" for kernel '{kernel}'" if kernel else ""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v),)
    elif isinstance(v, (tuple, list)):
        if not 1 <= len(v) <= 3 or not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in v):
            raise LaunchError(f"{what}{where} must be an int or a tuple of 1 to 3 ints, got {v!r}")
        v = tuple(int(x) for x in v)
    else:
        raise LaunchError(f"{what}{where} must be an int or a tuple of 1 to 3 ints, got {type(v).__name__}")
    if any(x < 1 for x in v):
        raise LaunchError(f"{what}{where} must be positive in every dimension, got {v}")
    return v + (1,) * (3 - len(v))


def check_block(block: tuple, limits: LaunchLimits, *, kernel: str, block_limit=None,
                max_threads: int | None = None) -> None:
    """The CTA shape against the device, the kernel's .maxntid/.reqntid and its compiled limit."""
    n = block[0] * block[1] * block[2]
    for axis, b, m in zip("xyz", block, limits.max_block):
        if b > m:
            raise LaunchError(f"block {block} for kernel '{kernel}': {axis} = {b} exceeds the device limit {m}")
    if n > limits.max_threads_per_block:
        raise LaunchError(f"block {block} for kernel '{kernel}' has {n} threads; the device allows at most "
                          f"{limits.max_threads_per_block}")
    if block_limit is not None:
        key, dims = block_limit
        dims = tuple(dims) + (1,) * (3 - len(dims))
        if key == "reqntid" and block != dims:
            raise LaunchError(f"kernel '{kernel}' declares .reqntid {', '.join(map(str, dims))}: it must be "
                              f"launched with exactly block {dims}, got {block}")
        if key == "maxntid" and n > math.prod(dims):
            raise LaunchError(f"block {block} for kernel '{kernel}' has {n} threads, but the kernel declares "
                              f".maxntid {', '.join(map(str, dims))} (at most {math.prod(dims)} threads)")
    if max_threads is not None and n > max_threads:
        raise LaunchError(f"block {block} for kernel '{kernel}' has {n} threads; the compiled kernel allows at most "
                          f"{max_threads} (its register use or directives limit it)")


def check_grid(grid: tuple, limits: LaunchLimits, *, kernel: str) -> None:
    """Raise a LaunchError naming `kernel` when a grid dimension exceeds the device's limit (`limits.max_grid`).
    """
    for axis, g, m in zip("xyz", grid, limits.max_grid):
        if g > m:
            raise LaunchError(f"grid {grid} for kernel '{kernel}': {axis} = {g} exceeds the device limit {m}")


def check_shared(dynamic: int, static: int, limits: LaunchLimits, *, kernel: str) -> None:
    """Raise a LaunchError naming `kernel` when `dynamic` (bytes of dynamic shared memory) is not a non-negative
    int or, with `static`, exceeds the device's opt-in limit per block.
    """
    if isinstance(dynamic, bool) or not isinstance(dynamic, (int, np.integer)) or dynamic < 0:
        raise LaunchError(f"shared= for kernel '{kernel}' must be a non-negative int of bytes, got {dynamic!r}")
    total = int(dynamic) + static
    if total > limits.max_shared_optin:
        raise LaunchError(f"kernel '{kernel}' asks for {dynamic} bytes of dynamic shared memory on top of {static} "
                          f"static ({total} in all); the device allows at most {limits.max_shared_optin} per block")


# ---------------------------------------------------------------- parameter layout

_CODES = {
    "s8": "b", "u8": "B", "b8": "B", "s16": "h", "u16": "H", "b16": "H", "s32": "i", "u32": "I", "b32": "I",
    "s64": "q", "u64": "Q", "b64": "Q", "f16": "e", "f32": "f", "f64": "d", "bf16": "H", "f16x2": "I",
    "bf16x2": "I", "b128": "16s",
}


@dataclass(frozen=True)
class ParamSpec:
    """How one kernel parameter is taken from Python and laid out in the argument blob."""

    index: int
    name: str
    type: ScalarType
    kind: str  # "pointer", "address", "int", "bits", "b128", "float", "bf16", "pair", "bytes"
    size: int
    offset: int
    code: str
    pointee: ScalarType | None = None
    hi: int = -1  # the largest int an "int"/"address" parameter takes (for the fast range check)
    #: the alignment a pointer's memory must have: its pointee's size, or the `.ptr .align` of PTX read from text
    align: int = 1

    def describe(self) -> str:
        """The parameter as signatures show it: ``name: .f32*`` for a pointer, ``name: .b8[N]`` for a by-value
        block, ``name: .u32`` for a scalar.
        """
        if self.kind == "pointer":
            return f"{self.name}: .{self.pointee.name if self.pointee else 'b8'}*"
        if self.kind == "bytes":
            return f"{self.name}: .b8[{self.size}]"
        return f"{self.name}: .{self.type.name}"


@dataclass(frozen=True)
class ParamLayout:
    """How a kernel's parameters are packed for cuLaunchKernel: their specs, the struct format and total size,
    and the precomputed fast paths for common argument types.
    """
    specs: tuple
    fmt: str
    size: int
    # per parameter: (fast kind, int upper bound, pointee, numpy dtypes seen to match it), see fast_values
    fast: tuple = field(default=(), compare=False)

    def signature(self) -> str:
        """The kernel's parameter list as text, e.g. ``(x: .f32*, n: .u32)``, for error messages."""
        return "(" + ", ".join(s.describe() for s in self.specs) + ")"


def _kind(p) -> str:
    t = p.type
    if p.nbytes is not None:
        return "bytes"
    if p.is_pointer:
        return "pointer"
    if t.name in ("u64", "b64"):
        return "address"  # a raw .u64 parameter: an int, or any array's address
    if t.is_int:
        return "int"
    if t.name == "b128":
        return "b128"  # 16 raw bytes: an int below 2**128 or a 16-byte buffer
    if t.kind == "b":
        return "bits"
    if t is T.bf16:
        return "bf16"
    if t.lanes == 2:
        return "pair"
    if t.is_float:
        return "float"
    raise LaunchError(f"parameter {p.name} has type .{t.name}, which a launch cannot pass")


def layout(params, pointer_aligns=()) -> ParamLayout:
    """Offsets and a struct format for a kernel's parameters, each where ptxas places it (`kernel.param_align`:
    a pointer's `.ptr .align` is its pointee's, not its own).  `pointer_aligns` (one per parameter, as
    `loader.EntryDesc` reads them from PTX text) raise the alignment launches check a pointer's memory against."""
    specs, fmt, off = [], "<", 0
    for i, p in enumerate(params):
        kind = _kind(p)
        align = int(param_align(p))
        if kind == "bytes":
            size, code = int(p.nbytes), f"{int(p.nbytes)}s"
        else:
            size, code = p.type.bits // 8, _CODES[p.type.name]
        pad = -off % align
        if pad:
            fmt += f"{pad}x"
            off += pad
        hi = (1 << (size * 8 - (1 if p.type.is_signed else 0))) - 1 if kind in ("int", "address") else -1
        pointee = p.pointee if p.is_pointer else None
        specs.append(ParamSpec(i, p.name, p.type, kind, size, off, code, pointee, hi,
                               max((pointee.bits // 8 if pointee is not None and not pointee.packed else 1) or 1,
                                   pointer_aligns[i] if kind == "pointer" and i < len(pointer_aligns) else 1)))
        fmt += code
        off += size
    fast = tuple((_FAST.get(s.kind, _SLOW) if not (s.kind == "float" and s.type is T.f16) else _SLOW, s.hi, s.pointee,
                  set()) for s in specs)
    return ParamLayout(tuple(specs), fmt, off, fast)


_SLOW, _FAST_PTR, _FAST_INT, _FAST_FLOAT = 0, 1, 2, 3
_F32_MAX = float(np.finfo(np.float32).max)
_FAST = {"pointer": _FAST_PTR, "int": _FAST_INT, "address": _FAST_INT, "float": _FAST_FLOAT}


def fast_values(lay: ParamLayout, args):
    """The packed values when every argument is a DeviceBuffer, int or float that needs no further
    thought (the common case of a launch in a loop); None sends the launch through resolve()."""
    if len(args) != len(lay.fast):
        return None
    out = []
    for (kind, hi, pointee, matching), v in zip(lay.fast, args):
        tv = type(v)
        if kind == _FAST_PTR:
            if tv is not DeviceBuffer or not v._ptr:
                return None
            if v.dtype not in matching:
                if not accepts(pointee, v.elem) or big_endian(v.dtype):
                    return None
                matching.add(v.dtype)
            out.append(v._ptr)
        elif kind == _FAST_INT:
            if tv is not int or not 0 <= v <= hi:
                return None
            out.append(v)
        elif kind == _FAST_FLOAT:
            if (tv is not float and tv is not int) or not -_F32_MAX <= v <= _F32_MAX:
                return None  # NaN, infinities and f32 overflow take the careful path
            out.append(v)
        else:
            return None
    return out


# ---------------------------------------------------------------- scalar conversion

def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer))


def _scalar(v):
    if isinstance(v, np.ndarray) and v.ndim == 0:
        return v[()]
    return v


def _where(spec: ParamSpec, kernel: str) -> str:
    """How an error names a scalar argument: its position, name, type and kernel."""
    return f"argument {spec.index} ({spec.name}: .{spec.type.name}) of kernel '{kernel}'"


def _int_arg(spec: ParamSpec, v, kernel: str, signed_ok: bool) -> int:
    v = _scalar(v)
    if isinstance(v, (bool, np.bool_)):  # True == 1, but a flag where a number belongs is a slip
        raise LaunchError(f"{_where(spec, kernel)} takes an int, got bool {v!r}; pass int({v!r}) for its value")
    if not _is_int(v):
        if isinstance(v, (float, np.floating)) and float(v).is_integer():
            v = int(v)
        else:
            raise LaunchError(f"{_where(spec, kernel)} "
                              f"takes an int, got {type(v).__name__} {v!r}")
    v = int(v)
    bits = spec.size * 8
    if spec.type.is_signed:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    elif signed_ok:  # .bN: any bit pattern, written signed or unsigned
        lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
    else:
        lo, hi = 0, (1 << bits) - 1
    if not lo <= v <= hi:
        raise LaunchError(f"{_where(spec, kernel)} is "
                          f"{v}, outside [{lo}, {hi}]")
    if not spec.type.is_signed and v < 0:
        v += 1 << bits
    return v


def _float_arg(spec: ParamSpec, v, kernel: str) -> float:
    v = _scalar(v)
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise LaunchError(f"{_where(spec, kernel)} "
                          f"takes a number, got {type(v).__name__} {v!r}")
    try:
        f = float(v)
    except OverflowError:  # an int beyond any float
        raise LaunchError(f"{_where(spec, kernel)} is {v}, beyond the range of .{spec.type.name}") from None
    if spec.kind == "float" and spec.size < 8 and math.isfinite(f):
        try:
            struct.pack("<" + spec.code, f)
        except OverflowError:
            raise LaunchError(f"{_where(spec, kernel)} is "
                              f"{f}, beyond the range of .{spec.type.name}") from None
    return f


def bf16_bits(x: float) -> int:
    """Round a float to bfloat16 (nearest even) and return its 16 bits."""
    u = int(np.array(x, dtype=np.float32).view(np.uint32))
    if (u & 0x7F800000) == 0x7F800000 and u & 0x007FFFFF:
        return 0x7FC0 | ((u >> 16) & 0x8000)  # NaN stays NaN
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF


def _bf16_checked(spec: ParamSpec, x: float, kernel: str, what: str = "") -> int:
    """bf16_bits(x), with a finite `x` that rounds to infinity refused as .f16 and .f32 overflow is."""
    with np.errstate(over="ignore"):
        bits = bf16_bits(x)
    if (bits & 0x7FFF) == 0x7F80 and math.isfinite(x):
        raise LaunchError(f"{_where(spec, kernel)}{what} is {x}, beyond the range of .bf16")
    return bits


def _half_bits(spec: ParamSpec, x: float, kernel: str, what: str) -> int:
    if spec.type is T.bf16x2:
        return _bf16_checked(spec, x, kernel, what)
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        raise LaunchError(f"{_where(spec, kernel)}{what} is {x}, beyond the range of .f16") from None


def _pair_arg(spec: ParamSpec, v, kernel: str) -> int:
    v = _scalar(v)
    if _is_int(v) or isinstance(v, (bool, np.bool_)):
        return _int_arg(spec, v, kernel, signed_ok=True)
    if isinstance(v, (tuple, list, np.ndarray)) and len(v) == 2:
        lo, hi = (_float_arg(spec, x, kernel) for x in v)
        return _half_bits(spec, lo, kernel, " (low half)") | (_half_bits(spec, hi, kernel, " (high half)") << 16)
    raise LaunchError(f"{_where(spec, kernel)} takes a pair "
                      f"(low, high) of numbers or the raw 32 bits as an int, got {type(v).__name__}")


def _b128_arg(spec: ParamSpec, v, kernel: str) -> bytes:
    """A .b128 parameter's 16 bytes: an int (any 128-bit pattern, written signed or unsigned, stored
    little-endian) or exactly 16 bytes of a buffer (bytes, bytearray, a numpy array ...)."""
    v = _scalar(v)
    if _is_int(v) or isinstance(v, (bool, np.bool_)):
        return _int_arg(spec, v, kernel, signed_ok=True).to_bytes(16, "little")
    if not isinstance(v, (str, float, np.floating, complex)):
        try:
            raw = bytes(memoryview(v).cast("B"))
        except TypeError:
            raw = None
        if raw is not None and len(raw) == 16:
            return raw
    raise LaunchError(f"{_where(spec, kernel)} takes its 128 bits as an int in [-2**127, 2**128) or as exactly 16 "
                      f"bytes (little-endian: bytes, a buffer, a numpy array), got {type(v).__name__} {v!r:.60}")


def _bytes_arg(spec: ParamSpec, v, kernel: str) -> bytes:
    from .tensormap import TensorMap
    if isinstance(v, TensorMap):  # a by-value tensor-map parameter: its encoded 128 bytes
        v = v.encode()
    getptr = getattr(v, "getPtr", None)
    if callable(getptr) and not isinstance(v, (bytes, bytearray, memoryview, np.ndarray)):
        import ctypes
        return ctypes.string_at(int(getptr()), spec.size)  # cuda.bindings structs, e.g. CUtensorMap
    try:
        raw = bytes(memoryview(v).cast("B"))
    except TypeError:
        raise LaunchError(f"argument {spec.index} ({spec.name}: .b8[{spec.size}]) of kernel '{kernel}' takes "
                          f"{spec.size} bytes (bytes, a buffer, or a cuda.bindings struct), got {type(v).__name__}")
    if len(raw) != spec.size:
        raise LaunchError(f"argument {spec.index} ({spec.name}) of kernel '{kernel}' takes exactly {spec.size} "
                          f"bytes, got {len(raw)}")
    return raw


# ---------------------------------------------------------------- arguments

@dataclass
class HostTransfer:
    """A host array to stage through a temporary device buffer around the launch."""

    index: int
    policy: HostArray

    @property
    def array(self) -> np.ndarray:
        """The host array this transfer copies in and/or back."""
        return self.policy.array


@dataclass
class Resolved:
    """Arguments made ready: values to pack, host transfers to stage, producer streams to wait for."""

    values: list
    transfers: list
    streams: list
    keep: list
    #: host-side DLPack producers read as numpy, by id: a producer passed twice is one array
    host_views: dict = field(default_factory=dict, repr=False)


@functools.lru_cache(maxsize=256)
def _accepts(pointee, elem: Elem) -> bool:
    return accepts(pointee, elem)


def _check_array(spec: ParamSpec, elem: Elem, contiguous: bool, kernel: str, what: str) -> None:
    if spec.kind == "pointer" and not _accepts(spec.pointee, elem):
        raise LaunchError(f"argument {spec.index} ({spec.name}) of kernel '{kernel}' points to "
                          f".{spec.pointee.name}, but the {what} holds {elem}; expected "
                          f"{expected_dtype(spec.pointee)}")
    if not contiguous:
        raise LaunchError(f"argument {spec.index} ({spec.name}) of kernel '{kernel}': the {what} is not "
                          "C-contiguous; kernels see flat memory, so pass a contiguous copy")


def _check_view(spec: ParamSpec, got: DeviceView, kernel: str, what: str, device, check_pointer) -> None:
    """A foreign GPU array: element type, layout, read-only flag, device, alignment, context."""
    _check_array(spec, got.elem, got.contiguous, kernel, what)
    arg = f"argument {spec.index} ({spec.name}) of kernel '{kernel}'"
    if got.readonly:
        raise LaunchError(f"{arg}: the {what} is marked read-only, and a launch cannot tell whether the kernel writes "
                          "through this parameter; pass a writable array, or its integer address to vouch for it")
    if device is not None and got.device_id is not None and got.device_id != device:
        raise LaunchError(f"{arg}: the {what} is on CUDA device {got.device_id}; the kernel runs on device {device}")
    if got.ptr % spec.align:
        size = (spec.pointee.bits // 8 if spec.pointee is not None and not spec.pointee.packed else 1) or 1
        why = (f"the {size} bytes of .{spec.pointee.name}" if spec.align == size else
               f"the {spec.align} bytes its PTX declares (.ptr .align {spec.align})")
        raise LaunchError(f"{arg}: the {what} starts at 0x{got.ptr:x}, not aligned to {why}; pass an aligned view "
                          "(a misaligned access would fault the kernel and the CUDA context with it)")
    if check_pointer is not None and got.ptr:
        check_pointer(got.ptr, f"{arg} ({what})", got.span)


def _pointer_arg(spec: ParamSpec, v, kernel: str, stream: int, r: Resolved, i: int, device=None,
                 check_pointer=None):
    if isinstance(v, DeviceBuffer):
        if not v._ptr and v.nbytes:
            raise LaunchError(f"argument {spec.index} ({spec.name}) of kernel '{kernel}': this DeviceBuffer was freed "
                              "(free() or the end of its with block); pass one that is still allocated")
        _check_array(spec, v.elem, True, kernel, "DeviceBuffer")
        check_byte_order(v.dtype, f"argument {spec.index} ({spec.name}) of kernel '{kernel}': the DeviceBuffer")
        ptr = v.ptr
        r.keep.append(v)
        return ptr
    pol = host_policy(v)
    if pol is None and v is not None and not _is_int(v):
        host = r.host_views.get(id(v))  # the same host-side producer twice is one array, staged once
        got = host if host is not None else device_view(v, stream, f"argument {spec.index} ({spec.name}) of kernel "
                                                                   f"'{kernel}'")
        if isinstance(got, np.ndarray):  # a host-side DLPack producer (e.g. a CPU torch tensor)
            r.host_views[id(v)] = got
            pol = host_policy(got)
            r.keep.append(v)
        elif isinstance(got, DeviceView):
            _check_view(spec, got, kernel, f"{type(v).__name__} ({got.source})", device, check_pointer)
            if must_wait(got.stream, stream):
                r.streams.append(got.stream)
            r.keep.append(v)
            if got.owner is not None:
                r.keep.append(got.owner)  # the DLPack capsule: its deleter may free the memory
            return got.ptr
    if pol is not None:
        a = pol.array
        if a.dtype.hasobject:
            raise LaunchError(f"argument {spec.index} ({spec.name}) of kernel '{kernel}' is an object array")
        check_byte_order(a.dtype, f"argument {spec.index} ({spec.name}) of kernel '{kernel}': the numpy array")
        _check_array(spec, Elem.of_dtype(a.dtype), c_contiguous(a.shape, a.strides, a.itemsize), kernel,
                     "numpy array")
        r.transfers.append(HostTransfer(i, pol))
        return 0  # filled in with the staging buffer's address
    if v is None:
        return 0
    if _is_int(v) and not isinstance(v, bool):
        v = int(v)
        if not 0 <= v < 1 << 64:
            raise LaunchError(f"argument {spec.index} ({spec.name}) of kernel '{kernel}': address {v} is not a "
                              "64-bit pointer")
        return v
    if type(v).__name__ == "PyCapsule":  # e.g. torch.utils.dlpack.to_dlpack(t): a capsule is consumed once
        raise LaunchError(f"argument {spec.index} ({spec.name}) of kernel '{kernel}' is a DLPack capsule; pass the "
                          "array itself (anything with __dlpack__ and __dlpack_device__), whose export a launch asks "
                          "for on its own stream and keeps as long as it needs the memory")
    raise LaunchError(f"argument {spec.index} ({spec.name}) of kernel '{kernel}' is a pointer: pass a numpy array "
                      "(In/Out/InOut to choose the copies), a DeviceBuffer, a GPU array (__cuda_array_interface__ "
                      f"or DLPack) or an int address; got {type(v).__name__}")


def resolve(lay: ParamLayout, args, kernel: str, stream: int = 0, *, device: int | None = None,
            check_pointer=None) -> Resolved:
    """Check every argument against its parameter and produce the values to pack.

    device: the ordinal the kernel runs on (foreign arrays that name another are refused);
    check_pointer(ptr, what): asks the driver about a foreign array's address (None: not asked).
    """
    if len(args) != len(lay.specs):
        raise LaunchError(f"kernel '{kernel}' takes {len(lay.specs)} argument(s) {lay.signature()}, "
                          f"got {len(args)}")
    r = Resolved([], [], [], [])
    vals = r.values
    for i, (spec, v) in enumerate(zip(lay.specs, args)):
        k = spec.kind
        if k == "pointer":
            vals.append(_pointer_arg(spec, v, kernel, stream, r, i, device, check_pointer))
        elif k == "address":  # .u64/.b64: a number (a 0-d array is its value, as for every integer), else an address
            s = _scalar(v)
            if isinstance(s, (int, np.integer, np.bool_)):
                vals.append(_int_arg(spec, s, kernel, signed_ok=False))
            elif isinstance(s, (float, np.floating)):
                vals.append(_bits_arg(spec, s, kernel) if spec.type is T.b64 else _int_arg(spec, s, kernel, False))
            else:
                vals.append(_pointer_arg(spec, v, kernel, stream, r, i, device, check_pointer))
        elif k == "int":
            vals.append(_int_arg(spec, v, kernel, signed_ok=False))
        elif k == "float":
            vals.append(_float_arg(spec, v, kernel))
        elif k == "bits":
            vals.append(_bits_arg(spec, v, kernel))
        elif k == "bf16":
            vals.append(_bf16_arg(spec, v, kernel))
        elif k == "pair":
            vals.append(_pair_arg(spec, v, kernel))
        elif k == "b128":
            vals.append(_b128_arg(spec, v, kernel))
        else:
            vals.append(_bytes_arg(spec, v, kernel))
    if len(r.transfers) > 1:
        check_host_overlaps(lay, r.transfers, kernel)
    return r


def check_host_overlaps(lay: ParamLayout, transfers, kernel: str) -> None:
    """Refuse two different numpy arrays over overlapping host memory in one launch (views of one array), unless
    both are inputs only: each would get its own device copy, so the kernel could not see one's writes through
    the other, and copying both back would overwrite one result with the other.  The same array object passed
    several times is fine: it is staged once (`kernel._stage_in`)."""
    spans = {}
    for t in transfers:
        a = t.array
        span = spans.get(id(a))
        if span is None:
            if a.nbytes:
                lo = a.__array_interface__["data"][0]  # staged arrays are C-contiguous: [lo, lo + nbytes)
                spans[id(a)] = [lo, lo + a.nbytes, t.policy.copy_out, t.index]
        else:
            span[2] = span[2] or t.policy.copy_out
    items = sorted(spans.values())
    for n, (lo, hi, out, i) in enumerate(items):
        for lo2, _hi2, out2, j in items[n + 1:]:
            if lo2 >= hi:
                break
            if out or out2:
                i, j = sorted((i, j))
                a, b = lay.specs[i], lay.specs[j]
                raise LaunchError(
                    f"arguments {i} ({a.name}) and {j} ({b.name}) of kernel '{kernel}' are different numpy arrays "
                    "over overlapping host memory (views of one array), and one is copied back: each would get its "
                    "own device copy, so the kernel would not see one's writes through the other and the copies "
                    "back would overwrite each other.  Pass the same array object for both (it is then staged "
                    "once), or separate copies (a.copy()); views that are only read (In, or read-only arrays) may "
                    "overlap")


#: the float format of each .bN width a float argument is written in: (struct code of the float, of its bits)
_FLOAT_BITS = {2: ("e", "H"), 4: ("f", "I"), 8: ("d", "Q")}


def _bits_arg(spec: ParamSpec, v, kernel: str) -> int:
    """A .b16/.b32/.b64 (or .b8) parameter: an int is the bit pattern (signed or unsigned); a float is the bit
    pattern of that width's IEEE float (.b16 half, .b32 single, .b64 double), rounded to nearest, a finite value
    beyond its range refused; a numpy scalar of the parameter's width gives its own bits."""
    v = _scalar(v)
    if (isinstance(v, np.generic) and not isinstance(v, (np.integer, np.bool_))
            and v.dtype.itemsize == spec.size):
        return int(np.array(v).view(f"u{spec.size}"))  # the raw bits of a same-width numpy scalar
    if isinstance(v, (float, np.floating)):
        codes = _FLOAT_BITS.get(spec.size)
        if codes is None:
            raise LaunchError(f"{_where(spec, kernel)} takes an int (its bit pattern); there is no {spec.size * 8}-bit "
                              f"float to write {type(v).__name__} {v!r} as")
        f = float(v)
        try:
            return struct.unpack("<" + codes[1], struct.pack("<" + codes[0], f))[0]
        except OverflowError:
            raise LaunchError(f"{_where(spec, kernel)} is {f}, beyond the range of the {spec.size * 8}-bit float "
                              f"whose bit pattern a .{spec.type.name} parameter takes for a float") from None
    return _int_arg(spec, v, kernel, signed_ok=True)


def _bf16_arg(spec: ParamSpec, v, kernel: str) -> int:
    return _bf16_checked(spec, _float_arg(spec, v, kernel), kernel)


def pack(lay: ParamLayout, values) -> bytes:
    """The argument blob: every parameter's bytes at its offset, little-endian."""
    try:
        return struct.pack(lay.fmt, *values)
    except struct.error as e:  # resolve() has range-checked everything, so this is a bug
        raise LaunchError(f"cannot pack arguments {values!r} as {lay.fmt}: {e}") from e
