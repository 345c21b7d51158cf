"""Arrays a kernel argument may be: numpy on the host, or GPU memory from anyone.

Host arrays are copied to the device and back as their wrapper says:

* ``In(a)``: copied to the device before the launch, not back;
* ``Out(a)``: not copied in (the device buffer starts uninitialized), copied back after;
* ``InOut(a)``: both.  A bare numpy array means ``InOut`` (``In`` when it is read-only).

GPU arrays pass their address with no copy: ptxforge ``DeviceBuffer``s, anything with
``__cuda_array_interface__`` (CuPy, torch, Numba) and anything with DLPack
(``__dlpack__`` + ``__dlpack_device__``) on a CUDA device.

What is checked of a foreign array: its element type against the parameter's pointee, byte
order (kernels read little-endian memory; a big-endian array is refused), C-contiguity (an
empty array is contiguous whatever its strides), its address's alignment to the pointee's
size, its device (DLPack device id; the driver's pointer attributes name its context and
device), and the read-only flag of ``__cuda_array_interface__``: a read-only array is refused
for every pointer parameter, since a launch cannot tell which parameters a kernel writes
through (pass the integer address to take that responsibility).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import LaunchError
from ..isa import types as T
from ..isa.types import ScalarType
from . import dlpack

_PTXFORGE_INTERNAL = True


# ---------------------------------------------------------------- element types

@dataclass(frozen=True)
class Elem:
    """An array's element type: numpy's kind letter ('i', 'u', 'f', 'b', 'c'; 'bf' for bfloat) and width."""

    kind: str
    bits: int

    @staticmethod
    def of_dtype(dtype) -> "Elem":
        """The `Elem` (kind and bit width) of a numpy dtype."""
        dt = np.dtype(dtype)
        return Elem(dt.kind, dt.itemsize * 8)

    def __str__(self) -> str:
        names = {"i": "int", "u": "uint", "f": "float", "bf": "bfloat", "c": "complex", "b": "bool"}
        if self.kind == "b":
            return "bool"
        return f"{names.get(self.kind, self.kind)}{self.bits}"


def accepts(pointee: ScalarType | None, elem: Elem) -> bool:
    """Whether an array of `elem` may be passed for a pointer to `pointee`.

    .b8 (the default pointee) means untyped memory and takes anything; wider .bN take any
    element of that width.  Integers follow PTX's own rule that signed and unsigned of one
    width are interchangeable.  Floats must match exactly.  Packed sub-byte types live in
    bytes; bf16 may also arrive as its 16-bit container.
    """
    if pointee is None or pointee is T.b8:
        return True
    k, bits = elem.kind, elem.bits
    if pointee.packed:
        return k in "iub" and bits == 8
    if pointee.kind == "b":
        return bits == pointee.bits
    if pointee.is_int:
        return k in ("i", "u") and bits == pointee.bits
    if pointee is T.bf16:  # "V": torch's __cuda_array_interface__ spells bfloat16 as raw 2-byte items
        return (k in ("bf", "V") and bits == 16) or (k in ("i", "u") and bits == 16)
    if pointee is T.f16x2:
        return (k == "f" and bits == 16) or (k in ("i", "u") and bits == 32)
    if pointee is T.bf16x2:
        return (k == "bf" and bits == 16) or (k in ("i", "u") and bits in (16, 32))
    if pointee.is_float:
        return k == "f" and bits == pointee.bits
    return False


def expected_dtype(pointee: ScalarType | None) -> str:
    """What to tell a user whose array did not match."""
    if pointee is None or pointee is T.b8:
        return "any"
    if pointee.packed:
        return f"8-bit integer bytes holding packed .{pointee.name}"
    if pointee.kind == "b":
        return f"any {pointee.bits}-bit type"
    if pointee.is_int:
        return f"int{pointee.bits} or uint{pointee.bits}"
    if pointee is T.bf16:
        return "bfloat16 (or its uint16 container)"
    try:
        return str(T.numpy_dtype(pointee))
    except ValueError:
        return f".{pointee.name}"


# ---------------------------------------------------------------- host copy policy

class HostArray:
    """A numpy array with a copy policy (use the In / Out / InOut subclasses)."""

    copy_in = True
    copy_out = True
    __slots__ = ("array",)

    def __init__(self, array):
        if not isinstance(array, np.ndarray):
            raise LaunchError(f"{type(self).__name__}() wraps a numpy array, got {type(array).__name__}; "
                              "GPU arrays are passed as they are")
        if self.copy_out and not array.flags.writeable:
            raise LaunchError(f"{type(self).__name__}() needs a writeable array: the result is copied back into it")
        self.array = array

    def __repr__(self) -> str:
        return f"{type(self).__name__}(array of {self.array.shape} {self.array.dtype})"


class In(HostArray):
    """Copy this numpy array to the device before the launch; do not copy it back."""

    copy_in, copy_out = True, False
    __slots__ = ()


class Out(HostArray):
    """Copy this array back from the device after the launch (its device copy starts uninitialized)."""

    copy_in, copy_out = False, True
    __slots__ = ()


class InOut(HostArray):
    """Copy this numpy array to the device before the launch and back after it."""

    copy_in, copy_out = True, True
    __slots__ = ()


def host_policy(obj) -> HostArray | None:
    """The HostArray for a host-side argument (wrapped or bare numpy), else None."""
    if isinstance(obj, HostArray):
        return obj
    if isinstance(obj, np.ndarray):
        return InOut(obj) if obj.flags.writeable else In(obj)
    return None


# ---------------------------------------------------------------- device views

def must_wait(producer: int | None, stream: int) -> bool:
    """Whether a launch on `stream` (a driver handle, 0 the legacy default stream) must be ordered after an
    array's producer stream (CUDA array interface v3 'stream': None unknown, 1 the legacy and 2 the
    per-thread default stream) with an event: yes unless it is the launch stream itself, or a default
    stream while the launch goes to the legacy default stream (which waits for both without one)."""
    return producer is not None and producer != stream and not (stream == 0 and producer in (0, 1, 2))


@dataclass(frozen=True)
class DeviceView:
    """GPU memory handed to us by another library: address, element type, layout."""

    ptr: int
    shape: tuple
    strides: tuple | None  # in bytes; None = C-contiguous
    elem: Elem
    stream: int | None = None  # the producer's stream to order against (CAI v3)
    device_id: int | None = None
    source: str = ""
    readonly: bool = False
    #: what must stay alive while the memory is used: the DLPack capsule, whose deleter lets the producer free
    #: what it exported (None for __cuda_array_interface__, whose memory the array object owns)
    owner: object = field(default=None, compare=False, repr=False)

    @property
    def contiguous(self) -> bool:
        """Whether the view is row-major and dense (the layout a kernel's flat pointer assumes)."""
        return c_contiguous(self.shape, self.strides, self.elem.bits // 8 or 1)

    @property
    def span(self) -> tuple:
        """(lowest, highest + 1) byte offset from `ptr` that the view's elements cover (`byte_span`)."""
        return byte_span(self.shape, self.strides, self.elem.bits // 8 or 1)


def c_contiguous(shape, strides_bytes, itemsize: int) -> bool:
    """Row-major and dense (dimensions of size 1 may carry any stride; an empty array is always dense)."""
    if strides_bytes is None or 0 in tuple(shape):
        return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides_bytes)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def big_endian(dtype) -> bool:
    """Whether `dtype` (or a field or sub-array element of it) stores multi-byte values big-endian."""
    dt = np.dtype(dtype)
    if dt.fields:
        return any(big_endian(f[0]) for f in dt.fields.values())
    if dt.subdtype is not None:
        return big_endian(dt.subdtype[0])
    return dt.byteorder == ">" or (dt.byteorder == "=" and np.little_endian is False and dt.itemsize > 1)


def check_byte_order(dtype, what: str) -> None:
    """Refuse elements that are not little-endian: the GPU (and the interpreter) read memory little-endian."""
    dt = np.dtype(dtype)
    if big_endian(dt):
        raise LaunchError(f"{what} holds big-endian {dt.str} elements; the GPU reads little-endian memory, so "
                          f"convert it first (e.g. a.astype('{dt.newbyteorder('<').str}'))")


#: Addresses are below this: device pointers are 64-bit.
ADDRESS_LIMIT = 1 << 64


def byte_span(shape, strides_bytes, itemsize: int) -> tuple:
    """(lowest, highest + 1) byte offset from an array's address that its elements cover; (0, 0) when it has no
    elements.  `strides_bytes` None means C-contiguous."""
    shape = tuple(shape)
    if 0 in shape:
        return 0, 0
    if strides_bytes is None:
        return 0, math.prod(shape) * itemsize
    lo = hi = 0
    for d, s in zip(shape, strides_bytes):
        if s < 0:
            lo += (d - 1) * s
        else:
            hi += (d - 1) * s
    return lo, hi + itemsize


def check_extent(view: "DeviceView", where: str, name: str) -> None:
    """Refuse a view whose elements would lie outside the 64-bit address space, at address 0 included: the
    interfaces allow a null address only for an array without elements.  `where` prefixes the message (the
    argument), `name` says who described the memory."""
    size = math.prod(view.shape)
    if not size or (view.strides is None and 0 < view.ptr and view.ptr + size * (view.elem.bits // 8 or 1)
                    <= ADDRESS_LIMIT):
        return  # (the common case, in one expression: launches read foreign arrays per call)
    if not view.ptr:
        raise LaunchError(f"{where}{name} gives address 0 (a null pointer), but it has {size} element"
                          f"{'s' if size != 1 else ''} of shape {view.shape}; only an array without elements may "
                          "have no address")
    lo, hi = view.span
    if view.ptr + lo < 0 or view.ptr + hi > ADDRESS_LIMIT:
        raise LaunchError(f"{where}{name} says its {size} elements of shape {view.shape} lie at 0x{view.ptr:x} "
                          f"(bytes {lo} to {hi} from there), past the end of the 64-bit address space: it does not "
                          "describe real memory")


def from_cuda_array_interface(obj, cai: dict, what: str | None = None) -> DeviceView:
    """A DeviceView of a `__cuda_array_interface__` dictionary, every field checked: `data` an (address, read-only)
    pair with the address an int in [0, 2**64), `shape` ints >= 0, `typestr` a little-endian numpy type, `strides`
    None or one int per dimension, `stream` None or a handle (an int > 0), no `mask`.  A field out of line is a
    LaunchError naming `what` (the argument, e.g. "argument 0 (x) of kernel 'k'") and the field."""
    name = f"{type(obj).__name__}.__cuda_array_interface__"
    where = f"{what}: " if what else ""

    def bad(field_: str, value, legal: str) -> LaunchError:
        return LaunchError(f"{where}{name} has {field_} {value!r}; {legal}")
    if not isinstance(cai, dict):
        raise LaunchError(f"{where}{name} is a {type(cai).__name__}, not a dict")
    try:
        data, shape, typestr = cai["data"], cai["shape"], cai["typestr"]
    except KeyError as e:
        raise LaunchError(f"{where}{name} is malformed: it has no {e.args[0]!r}") from e
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise bad("data", data, "it must be a pair (address, read-only flag)")
    ptr, readonly = data
    if ptr is None:
        ptr = 0
    if not T.is_integer(ptr) or not 0 <= int(ptr) < ADDRESS_LIMIT:
        raise bad("data address", ptr, "it must be an int in [0, 2**64)")
    if not isinstance(shape, (tuple, list)) or not all(T.is_integer(n) and n >= 0 for n in shape):
        raise bad("shape", shape, "it must be a tuple of ints >= 0")
    shape = tuple(int(n) for n in shape)
    try:
        dt = np.dtype(typestr)
    except (TypeError, ValueError) as e:
        raise bad("typestr", typestr, f"numpy cannot read it ({e})") from e
    if dt.hasobject or dt.itemsize == 0:
        raise bad("typestr", typestr, "GPU memory holds numbers of a fixed size, not Python objects nor elements of "
                                      "no size")
    check_byte_order(dt, f"{where}{type(obj).__name__} (__cuda_array_interface__ typestr {typestr!r})")
    strides = cai.get("strides")
    if strides is not None:
        if (not isinstance(strides, (tuple, list)) or len(strides) != len(shape)
                or not all(T.is_integer(x) for x in strides)):
            raise bad("strides", strides, f"they must be None or {len(shape)} ints (bytes), one per dimension of "
                                          f"shape {shape}")
        strides = tuple(int(x) for x in strides)
    stream = cai.get("stream")
    if stream is not None and (not T.is_integer(stream) or stream < 0):
        raise bad("stream", stream, "it must be None or a stream handle (an int > 0)")
    if stream is not None and stream == 0:
        raise bad("stream", 0, "version 3 of the interface disallows 0, which could mean either default stream: "
                               "1 names the legacy default stream, 2 the per-thread default stream, None no stream")
    if cai.get("mask") is not None:
        raise LaunchError(f"{where}{type(obj).__name__} has a masked __cuda_array_interface__; masks are not "
                          "supported")
    view = DeviceView(int(ptr), shape, strides, Elem.of_dtype(dt), None if stream is None else int(stream), None,
                      "__cuda_array_interface__", bool(readonly))
    check_extent(view, where, name)
    return view


def from_dlpack_info(obj, info: dlpack.DLPackInfo, what: str | None = None, owner=None) -> DeviceView:
    """A DeviceView of a parsed DLPack tensor; `owner` (the capsule) is kept with it.  Vector elements or an
    address outside [0, 2**64) are a LaunchError naming `what` (the argument)."""
    where = f"{what}: " if what else ""
    if info.lanes != 1:
        raise LaunchError(f"{where}{type(obj).__name__} has vector elements ({info.lanes} lanes, DLPack); pass a "
                          "scalar-typed view")
    if not 0 <= info.ptr < ADDRESS_LIMIT:
        raise LaunchError(f"{where}{type(obj).__name__}'s DLPack tensor starts at {info.ptr} (data + byte_offset), "
                          "not a 64-bit address")
    if any(n < 0 for n in info.shape):
        raise LaunchError(f"{where}{type(obj).__name__}'s DLPack tensor has shape {info.shape}; a dimension cannot be "
                          "negative")
    bits = info.bits
    if bits <= 0:
        raise LaunchError(f"{where}{type(obj).__name__}'s DLPack tensor has elements of {bits} bits; GPU memory holds "
                          "numbers of a size")
    strides = None if info.strides is None else tuple(s * max(bits // 8, 1) for s in info.strides)
    view = DeviceView(info.ptr, info.shape, strides, Elem(info.kind, bits), None, info.device_id, "DLPack",
                      owner=owner)
    check_extent(view, where, f"{type(obj).__name__}'s DLPack tensor")
    return view


def device_view(obj, stream_handle: int = 0, what: str | None = None):
    """A DeviceView of a GPU array, a numpy array for a host DLPack producer, or None if `obj` is neither.

    `what` names the argument in errors.  When reading ``__cuda_array_interface__`` raises (torch does for a
    tensor that requires grad, and for bfloat16) DLPack is tried; if there is none, or it fails too, a
    LaunchError naming `what` is chained to the producer's own exception, which says why.  A DLPack view keeps the capsule
    (`DeviceView.owner`): its deleter may free what the producer exported, so it must live as long as the
    launch that uses the memory."""
    cai = cai_error = None
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError as e:
        if hasattr(type(obj), "__cuda_array_interface__"):
            cai_error = e  # a property that failed, not a missing one
    except Exception as e:
        cai_error = e  # e.g. torch raises for bfloat16: DLPack below still describes it
    if cai is not None:
        return from_cuda_array_interface(obj, cai, what)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        try:
            return _dlpack_view(obj, stream_handle, what)
        except LaunchError as e:
            if cai_error is not None and e.__cause__ is None:
                e.__cause__ = cai_error
            raise
        except Exception as e:  # the producer's own refusal (torch: BufferError for a tensor that requires grad)
            where = f"{what}: " if what else ""
            raise LaunchError(f"{where}{type(obj).__name__} cannot be read as a GPU array: its DLPack export raised "
                              f"{type(e).__name__} ({e})") from e
    if cai_error is not None:
        where = f"{what}: " if what else ""
        raise LaunchError(f"{where}{type(obj).__name__}.__cuda_array_interface__ raised {type(cai_error).__name__} "
                          f"({cai_error}), and it has no DLPack to fall back on; pass an array its producer can "
                          "describe") from cai_error
    return None


def _dlpack_view(obj, stream_handle: int, what: str | None):
    dev_type, _dev_id = obj.__dlpack_device__()
    dev_type = int(dev_type)
    if dev_type in dlpack.HOST_TYPES:
        return np.from_dlpack(obj)
    if dev_type not in (dlpack.KDL_CUDA, dlpack.KDL_CUDA_MANAGED):
        where = f"{what}: " if what else ""
        raise LaunchError(f"{where}{type(obj).__name__} lives on a {dlpack.DEVICE_NAMES.get(dev_type, dev_type)} "
                          "device; ptxforge launches read CUDA memory")
    # Tell the producer which stream will use the data so it can order its pending work
    # before it (DLPack: 1 means the legacy default stream).
    capsule = obj.__dlpack__(stream=stream_handle if stream_handle else 1)
    return from_dlpack_info(obj, dlpack.read_capsule(capsule), what, owner=capsule)
