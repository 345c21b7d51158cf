"""Running a GEMM schedule on the GPU: operand checks, the variant for the problem, the launch."""

from __future__ import annotations

import numpy as np

from ...errors import LaunchError, ValidationError
from ..operands import (_reader, align_class, check_device_out, check_host_out, check_size, device_view_of,
                        interpreter_hint, producers_ok, require_numpy)
from .plan import fast_run, load_kernel, remember_plan

# errors about the caller's parameters and arrays name the caller's line, not this file's
_PTXFORGE_INTERNAL = True


def _describe(x, what: str, stream: int):
    """(shape, device address or None for host arrays, dtype kind/bits) of an operand."""
    from ...runtime import DeviceBuffer
    from ...runtime.arrays import HostArray
    if isinstance(x, HostArray):
        x = x.array
    if isinstance(x, np.ndarray):
        return x.shape, None, (x.dtype.kind, x.dtype.itemsize * 8)
    if isinstance(x, DeviceBuffer):
        return x.shape, x.ptr, (x.dtype.kind, x.dtype.itemsize * 8)
    v = device_view_of(x, what, stream)
    if v is None:
        raise LaunchError(f"{what} must be a numpy array, a DeviceBuffer or a GPU array (__cuda_array_interface__ "
                          f"or DLPack); got {type(x).__name__}")
    if isinstance(v, np.ndarray):
        return v.shape, None, (v.dtype.kind, v.dtype.itemsize * 8)
    if not v.contiguous:
        raise LaunchError(f"{what} is not C-contiguous: the kernel reads rows back to back; pass a contiguous copy")
    return v.shape, v.ptr, (v.elem.kind, v.elem.bits)


def _problem(s, a_shape, a_el, b_shape, b_el, k):
    """(M, N, K) of operands of these shapes and element kinds ((kind, bits)) for schedule `s`, after the
    checks every run makes: 2-D, 8-bit integers (uint8 bytes for packed 4-bit), rows of one length that K
    fills exactly, and the variant's problem checks."""
    for name, shape, el in (("A", a_shape, a_el), ("B", b_shape, b_el)):
        if len(shape) != 2:
            raise ValidationError(f"{name} must be 2-D [rows, K{'/2' if s.bits == 4 else ''}], got shape {shape}")
        if el[1] != 8 or el[0] not in "iu":
            what = f"packed .{s.operand} bytes" if s.bits == 4 else f".{s.operand} values"
            raise ValidationError(f"{name} must hold 8-bit integers ({what}), got {el[0]}{el[1]}")
        if s.bits == 4 and el[0] != "u":
            # int8 here is almost always one unpacked value per byte: every result would be wrong
            raise ValidationError(f"{name} holds int8, but packed .{s.operand} operands are uint8 bytes of two "
                                  "values each: pack them with ptxforge.int4.pack_int4 (or view packed bytes "
                                  "as uint8)")
    m, row_bytes = a_shape
    n, b_row_bytes = b_shape
    if row_bytes != b_row_bytes:
        raise ValidationError(f"A rows hold {row_bytes} bytes and B rows {b_row_bytes}: both are K-contiguous over "
                              "the same K")
    per_byte = 8 // s.bits
    if k is None:
        k = row_bytes * per_byte
    check_size("K", k, 0)
    if k * s.bits != 8 * row_bytes:
        raise ValidationError(f"K={k} .{s.operand} values take {k * s.bits / 8:g} bytes per row, but the rows hold "
                              f"{row_bytes}; rows must be exactly K{'/2' if s.bits == 4 else ''} bytes")
    s.for_problem(k).check_problem(m, n, k)  # the variant: a default path may change with K
    return m, n, k


def host_problem(s, a, b, k, why: str) -> tuple:
    """(M, N, K) of numpy operands A and B for schedule `s`, checked as every run checks them (`_problem`);
    `why` says what needs numpy arrays."""
    for name, x in (("A", a), ("B", b)):
        require_numpy(name, x, why)
    return _problem(s, a.shape, (a.dtype.kind, a.dtype.itemsize * 8), b.shape, (b.dtype.kind, b.dtype.itemsize * 8), k)


def run_gemm(s, a, b, c=None, *, k=None, stream=None):
    """See GemmSchedule.run."""
    done = fast_run(s, a, b, c, k, stream)
    if done is not None:
        return done
    with interpreter_hint(s):
        return _run_careful(s, a, b, c, k, stream)


def _nbytes(shape, el) -> int:
    """The bytes of an operand of `shape` and element (kind, bits)."""
    return int(np.prod(shape, dtype=np.int64)) * el[1] // 8


def _run_careful(s, a, b, c, k, stream):
    """run() on operands the fast path did not take: checks, variant, kernel, launch; keeps a plan for GPU
    operands of one stream."""
    from ...runtime import DeviceBuffer, In, Out
    from ...runtime.streams import current_stream_of, stream_handle
    k_arg = k
    if stream is None:  # torch operands: torch's current stream, as the fast path keys its plans (stream_key)
        stream = current_stream_of((a, b, c))
    sh = stream_handle(stream) if stream is not None else 0
    a_shape, a_ptr, a_el = _describe(a, "A", sh)
    b_shape, b_ptr, b_el = _describe(b, "B", sh)
    m, n, k = _problem(s, a_shape, a_el, b_shape, b_el, k)
    host_out = c is None and a_ptr is None and b_ptr is None
    if isinstance(c, np.ndarray):  # a host C is written back: writeable, whole rows, none of A's or B's memory
        check_host_out("C", c, (m, n), np.int32, (("A", a), ("B", b)))
    if c is None:
        c = np.empty((m, n), np.int32) if host_out else DeviceBuffer.empty((m, n), np.int32)
    c_shape, c_ptr, c_el = _describe(c, "C", sh)
    if tuple(c_shape) != (m, n) or c_el != ("i", 32):
        raise ValidationError(f"C must be an int32 array of shape ({m}, {n}), got {c_el[0]}{c_el[1]} {tuple(c_shape)}")
    if c_ptr is not None:  # a device C: none of a device A's or B's bytes
        check_device_out(c_ptr, m * n * 4, (("A", a_ptr, _nbytes(a_shape, a_el)),
                                            ("B", b_ptr, _nbytes(b_shape, b_el))))
    align, c_align = min(align_class(a_ptr), align_class(b_ptr)), align_class(c_ptr)
    v = s.for_problem(k, n, align=align, c_align=c_align)
    fn = load_kernel(v)
    args = [In(a) if isinstance(a, np.ndarray) else a, In(b) if isinstance(b, np.ndarray) else b,
            Out(c) if isinstance(c, np.ndarray) else c, m, n, k, *v.splitk_workspace(m, n, sh)]
    fn(v.grid(m, n), v.block, *args, shared=v.shared_bytes, stream=stream)
    if a_ptr is not None and b_ptr is not None and c_ptr is not None:
        for x, ptr in ((a, a_ptr), (b, b_ptr), (c, c_ptr)):  # addresses the careful path read: teach the fast reader
            _reader.learn(x, ptr)
        remember_plan(s, a, b, c, k_arg, stream, m, n, k, align, c_align, producers_ok(sh, a, b, c))
    return c


def interpret_gemm(s, a, b, c=None, *, k=None, order: str = "lowest-pc", check: bool = True) -> tuple:
    """See GemmSchedule.interpret: (C, report) of the variant `run` would launch, on the CPU interpreter."""
    from ... import interp
    m, n, k = host_problem(s, a, b, k, "to run on the interpreter")
    if c is None:
        c = np.full((m, n), -0x5A5A5A5B, np.int32)  # poisoned: an element the kernel leaves shows
    else:
        check_host_out("C", c, (m, n), np.int32, (("A", a), ("B", b)))
    v = s.for_problem(k, n)
    workspace = ()
    if v.splits > 1:  # what SplitKWorkspace allocates on a GPU: the partial tiles, and the tile counters at 0
        tiles = -(-m // v.block_m) * -(-n // v.block_n)
        workspace = (np.zeros(v.splits * m * n, np.int32), np.zeros(tiles, np.uint32))
    report = interp.run(v.module, grid=v.grid(m, n), block=v.block, shared=v.shared_bytes,
                        args=[np.ascontiguousarray(a), np.ascontiguousarray(b), c, m, n, k, *workspace],
                        check=check, order=order)
    return c, report


def bind_gemm(s, a, b, c, *, k=None, stream=None):
    """A BoundLaunch of the variant of `s` for GPU operands (for timing loops: one driver call per launch)."""
    from ...runtime.streams import current_stream_of, stream_handle
    if stream is None:
        stream = current_stream_of((a, b, c))
    sh = stream_handle(stream) if stream is not None else 0
    (m, row_bytes), a_ptr, _ = _describe(a, "A", sh)
    (n, _), b_ptr, _ = _describe(b, "B", sh)
    _, c_ptr, _ = _describe(c, "C", sh)
    if k is None:
        k = row_bytes * 8 // s.bits
    v = s.for_problem(k, n, align=min(align_class(a_ptr), align_class(b_ptr)), c_align=align_class(c_ptr))
    v.check_problem(m, n, k)
    return load_kernel(v).bind(v.grid(m, n), v.block, a, b, c, m, n, k, *v.splitk_workspace(m, n, sh),
                               shared=v.shared_bytes, stream=stream)
