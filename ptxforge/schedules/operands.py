"""Reading GPU operands quickly: the address, shape, dtype and device of an array, per call, for the
schedules' prepared launches (`gemm.plan.GemmPlan`, `hopper.plan.HopperPlan`) and their `run()` fast paths.

* a ptxforge `DeviceBuffer`: its address, shape and dtype;
* an object with ``data_ptr()`` and ``__cuda_array_interface__`` (torch tensors): the first call
  reads the array interface in full and checks that ``data_ptr()`` gives the same address; later
  calls read ``data_ptr()``, ``shape``, ``dtype``, ``requires_grad``, ``is_contiguous()`` and ``get_device()``,
  which cost far less than building the interface dictionary again.

And the checks of host (numpy) operands that `run` and `interpret` share: `require_numpy`, `check_host_out`,
`host_array` (a CPU torch tensor read as numpy), and `interpreter_hint` for a run() on a machine without a GPU;
the checks of sizes (`check_size`, `check_sizes`) and of the parameter names `for_shape` is given
(`check_parameters`) that both kinds of schedule make.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..errors import ToolchainMissing, ValidationError
from ..isa.types import is_integer

_PTXFORGE_INTERNAL = True

#: alignment classes the variants distinguish (see GemmSchedule.for_problem)
_ALIGN_CAP = 256


def check_size(name: str, v, least: int = 1, who: str = "") -> None:
    """Raise a ValidationError unless size `name` is an int (a numpy integer too, a bool not) of at least `least`;
    `who` prefixes the message (the call that was given it)."""
    if not is_integer(v) or v < least:
        raise ValidationError(f"{who}{name} must be an int >= {least}, got {v!r}")


def check_sizes(m, n, k, *, least_k: int = 1, who: str = "") -> None:
    """Raise a ValidationError unless M, N and K are ints (numpy integers too, bools not) of at least 1 (K of at
    least `least_k`); `who` prefixes the message (the call that was given them)."""
    for name, v, least in (("M", m, 1), ("N", n, 1), ("K", k, least_k)):
        check_size(name, v, least, who)


def check_parameters(cls, options: dict, hint: str = "") -> None:
    """Raise a ValidationError naming the keys of `options` that are no parameter (dataclass field) of schedule class
    `cls`, followed by `hint` (where such an option belongs); `for_shape` checks its overrides with it before it
    builds anything, where an unknown keyword would end in a TypeError."""
    import dataclasses
    foreign = sorted(set(options) - {f.name for f in dataclasses.fields(cls)})
    if foreign:
        raise ValidationError(f"{cls.__name__} has no parameter {', '.join(map(repr, foreign))}"
                              + (f"; {hint}" if hint else ""))


def require_numpy(what: str, x, why: str) -> None:
    """Raise a ValidationError unless operand `what` is a numpy array of native byte order (`why`: what needs one;
    the kernels read little-endian elements, and a big-endian array's bytes would be read as other values)."""
    if not isinstance(x, np.ndarray):
        raise ValidationError(f"{what} must be a numpy array {why}, got {type(x).__name__}")
    if not x.dtype.isnative:
        raise ValidationError(f"{what} holds big-endian {x.dtype.str} elements; the GEMMs read little-endian "
                              f"ones: pass {what}.astype({x.dtype.newbyteorder('=').name!r})")


@contextlib.contextmanager
def interpreter_hint(schedule):
    """Around a careful run(): where no CUDA driver is found, the error also says that `schedule`'s
    interpret() runs the same kernel on the CPU interpreter."""
    try:
        yield
    except ToolchainMissing as e:
        raise ToolchainMissing(f"{e.message}; without a GPU, {type(schedule).__name__}.interpret(a, b) runs this "
                               "kernel on the CPU interpreter", e.loc) from e


def host_array(x):
    """`x` as a numpy array (a view of its memory) when it is a host-side DLPack producer such as a CPU torch
    tensor, which the GEMMs' numpy path then takes; anything else unchanged."""
    if isinstance(x, np.ndarray) or not hasattr(x, "__dlpack_device__"):
        return x
    from ..runtime import dlpack
    try:
        host = int(x.__dlpack_device__()[0]) in dlpack.HOST_TYPES
    except Exception:
        return x
    return np.from_dlpack(x) if host else x


def check_host_out(what: str, x, shape: tuple, dtype, inputs=()) -> None:
    """Raise a ValidationError unless output `what` is a writeable, C-contiguous numpy array of `shape` and
    `dtype` whose memory no host input of `inputs` ((name, array) pairs) shares: the kernel would overwrite
    operands it has still to read."""
    dt = np.dtype(dtype)
    if not isinstance(x, np.ndarray) or x.shape != shape or x.dtype != dt or not x.flags.c_contiguous:
        raise ValidationError(f"{what} must be a C-contiguous numpy {dt.name} array of shape {shape}, got "
                              + (f"{x.dtype} {x.shape}" if isinstance(x, np.ndarray) else type(x).__name__))
    if not x.flags.writeable:  # (a launch would take it as input only: the result would never reach it)
        raise ValidationError(f"{what} is a read-only numpy array and the GEMM writes its result there: pass a "
                              "writeable array, or none for a new one")
    for name, y in inputs:
        if isinstance(y, np.ndarray) and np.may_share_memory(x, y):
            raise ValidationError(_overlap(what, name))


def _overlap(what: str, name: str) -> str:
    return (f"{what} overlaps {name} in memory: the GEMM would overwrite {name} while it still reads it; pass a "
            f"{what} of its own, or none for a new one")


def check_device_out(c_ptr: int, c_bytes: int, inputs) -> None:
    """Raise a ValidationError when output C's device bytes [c_ptr, c_ptr + c_bytes) meet those of an input
    ((name, address, bytes) triples): the kernel would overwrite operands other CTAs have still to read.  Made
    once per address triple (a plan's first launch on it), never per call."""
    for name, ptr, nbytes in inputs:
        if ptr is not None and ptr < c_ptr + c_bytes and c_ptr < ptr + nbytes:
            raise ValidationError(_overlap("C", name))


def align_class(ptr: int | None) -> int:
    """The largest power of two dividing `ptr`, capped at 256 (host arrays are staged: 256)."""
    if not ptr:
        return _ALIGN_CAP
    a = ptr & -ptr
    return a if a < _ALIGN_CAP else _ALIGN_CAP


_DEVICE_BUFFER = None  # runtime.memory.DeviceBuffer, imported on the first read (schedules import no runtime)


def _device_buffer_type():
    global _DEVICE_BUFFER
    from ..runtime.memory import DeviceBuffer
    _DEVICE_BUFFER = DeviceBuffer
    return DeviceBuffer


class _FastReader:
    """Per type: how to read (address, shape, dtype key, device) of a GPU array without its interface dict.

    Only arrays on the device of the arrays it learned from are read fast: a careful path teaches it
    (`learn`) only after the driver placed the array's memory in ptxforge's context and device, so an
    array on another device (or on the host) always goes the careful way, where it is refused by name.
    """

    __slots__ = ("verified", "device")

    def __init__(self):
        self.verified: set = set()  # (type, dtype) pairs whose data_ptr() was checked against the interface
        self.device = None  # the device index (get_device()) of the arrays learned from: ptxforge's device

    def read(self, x):
        """(ptr, shape, dtype key, device) or None when `x` must take the careful path.

        The per-call path of every fast launch: no imports, no interface dictionary, six cheap
        reads of a tensor (its dtype, whether it requires grad, contiguity, device, address and shape)."""
        t = type(x)
        if t is (_DEVICE_BUFFER or _device_buffer_type()):
            p = x._ptr  # 0 once freed: the careful path says so
            return (p, x.shape, x.dtype, None) if p else None
        try:
            dt = x.dtype
            if (t, dt) not in self.verified or x.requires_grad or not x.is_contiguous():
                return None  # (requires grad: its producer refuses to describe it, the careful path says so)
            dev = x.get_device()
            if dev != self.device:  # a host tensor, or one on another device: the careful path says why
                return None
            return x.data_ptr(), x.shape, dt, dev  # (a tuple, as `learn` checked: torch.Size is one)
        except Exception:
            return None

    def learn(self, x, ptr: int) -> None:
        """After the careful path read `x`'s interface and the driver placed `ptr` on ptxforge's device:
        trust its type's data_ptr() from now on if it agrees, for arrays on that device (and a type whose
        shape is a tuple, which a plan's key hashes and compares as it is: torch.Size is one, and which says
        whether an array requires grad: such a tensor's producer refuses to describe it, so it is never read
        fast)."""
        try:  # (an interface that raises, as torch's does for a tensor that requires grad: nothing to learn)
            dp = getattr(x, "data_ptr", None)
            if dp is None or not hasattr(x, "__cuda_array_interface__"):
                return
            if callable(dp) and dp() == ptr and callable(getattr(x, "is_contiguous", None)) \
                    and callable(getattr(x, "get_device", None)) and isinstance(x.shape, tuple) \
                    and x.requires_grad is False:
                dev = x.get_device()
                if self.device is None and isinstance(dev, int) and dev >= 0:
                    self.device = dev
                if dev == self.device:
                    self.verified.add((type(x), x.dtype))
        except Exception:
            pass


_reader = _FastReader()


def device_view_of(x, what: str, stream: int = 0):
    """`runtime.arrays.device_view` of GEMM operand `what` (a producer's own refusal to describe it, such as
    torch's for a tensor that requires grad, is a LaunchError naming the operand, chained to the producer's)."""
    from ..runtime.arrays import device_view
    return device_view(x, stream, what)


def check_gpu_operand(v, x, slot: str, error) -> None:
    """The checks every GEMM makes of a GPU operand `x` read through its array interface (view `v`): rows back to
    back (C-contiguous), a C its interface does not mark read-only, and its memory in ptxforge's context and
    device (asked of the driver, which raises a LaunchError naming the operand); `error` is the exception the
    caller raises for the first two."""
    if not v.contiguous:
        raise error(f"{slot} is not C-contiguous: the kernel reads rows back to back")
    if slot == "C" and v.readonly:
        raise error(f"C ({type(x).__name__}) is marked read-only by its array interface; the GEMM writes it")
    from ..runtime import driver as drv
    drv.check_pointer(v.ptr, f"{slot} ({type(x).__name__})", v.span)  # ptxforge's context and device, its allocation


_current_stream_of = None  # runtime.streams.current_stream_of, bound at the first call (schedules import no runtime)


def stream_key(stream, arrays) -> int:
    """The handle of the stream a GEMM launch on `arrays` goes to, as kept plans are keyed: `stream`'s, or for
    None the current stream of the arrays' library (torch: `runtime.streams.current_stream_of`), else 0 (the
    legacy default stream).  The per-call path of both GEMMs' run(): a plain handle costs one type test."""
    global _current_stream_of
    if stream is None:
        if _current_stream_of is None:
            from ..runtime.streams import current_stream_of
            _current_stream_of = current_stream_of
        s = _current_stream_of(arrays)
        return 0 if s is None else s
    if type(stream) is int and stream >= 0:
        return stream
    from ..runtime.streams import stream_handle
    return stream_handle(stream)


def producers_ok(stream_handle: int, *arrays) -> bool:
    """Whether no operand's array interface names a producer stream that a launch on `stream_handle`
    must wait for (`runtime.arrays.must_wait`)."""
    from ..runtime.arrays import must_wait
    for x in arrays:
        try:
            cai = x.__cuda_array_interface__
        except Exception:
            continue
        if must_wait(cai.get("stream") if isinstance(cai, dict) else None, stream_handle):
            return False
    return True
