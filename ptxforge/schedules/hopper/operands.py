"""What a HopperGemm's kernels take as operands: the element types of A, B and C per operand, GPU arrays read
through their array interfaces (and placed by the driver), host operands and a host C checked, and the numpy
reference and random operands the tests and benchmarks use."""

from __future__ import annotations

import numpy as np

from ...errors import ValidationError
from ..operands import check_gpu_operand, check_host_out, check_size, device_view_of, require_numpy


_PTXFORGE_INTERNAL = True


def gpu_view(x, what, stream: int = 0, waits: list | None = None):
    """(address, shape, Elem) of a GPU operand; a foreign array's memory must be in ptxforge's context and
    device (asked of the driver: its tensor maps would otherwise point the TMA at another device's memory).
    `waits`: where to add the operand's producer stream when a launch on `stream` must wait for it."""
    from ...runtime import DeviceBuffer
    from ...runtime.arrays import must_wait
    if isinstance(x, DeviceBuffer):
        return x.ptr, tuple(x.shape), x.elem
    v = device_view_of(x, what, stream)
    if v is None or isinstance(v, np.ndarray):
        raise ValidationError(f"{what} must be a GPU array (DeviceBuffer, __cuda_array_interface__ or DLPack) here, "
                              f"got {type(x).__name__}; HopperGemm.run takes A and B both as numpy arrays (copied in "
                              "and C copied back), plans and prepared launches GPU arrays only")
    check_gpu_operand(v, x, what, ValidationError)
    if waits is not None and must_wait(v.stream, stream):
        waits.append(v.stream)
    return v.ptr, tuple(v.shape), v.elem


#: operand -> (what A and B may hold as (kind, bits) pairs, what C holds), as the kernels read them
_ELEMS = {"s8": ({("i", 8), ("u", 8)}, ("i", 32)), "s4": ({("u", 8)}, ("i", 32)),
          "bf16": ({("bf", 16), ("u", 16), ("i", 16), ("V", 16)}, ("f", 32)),
          "f16": ({("f", 16), ("u", 16), ("i", 16)}, ("f", 32))}
# ("V", 16): torch describes bfloat16 through __cuda_array_interface__ as raw 2-byte items ("<V2")
# s4 takes uint8 only: int8 operands are almost always one unpacked value per byte, which the kernel would read
# as two values each (K doubled, every result wrong), as the mma.sync schedules refuse them too


def _elems(cfg) -> tuple:
    """(the (kind, bits) A and B may hold, the set C may hold) of a configuration."""
    ab, c = _ELEMS[cfg.operand]
    return ab, (ab if cfg.c16 else {c})


def c_numpy_type(cfg):
    """The numpy dtype of C for `cfg`: int32, float32, or with c16 uint16 (bf16 bits) / float16."""
    if cfg.c16:
        return np.uint16 if cfg.operand == "bf16" else np.float16
    return np.int32 if cfg.c_type == "s32" else np.float32


def check_elems(cfg, views) -> None:
    """Raise a ValidationError naming the first of A, B, C (`views`: (address, shape, Elem) each) whose
    element type the configuration's kernel does not read."""
    for what, (_, _, el) in zip("ABC", views):
        _check_elem(cfg, what, (el.kind, el.bits), el)


def _check_elem(cfg, what: str, kind_bits: tuple, shown) -> None:
    ab, cs = _elems(cfg)
    if kind_bits not in (cs if what == "C" else ab):
        want = {"s8": "8-bit integers", "s4": "packed 4-bit values in bytes (uint8; ptxforge.int4.pack_int4 packs "
                "them)", "bf16": "bfloat16 (or its uint16 bits: ptxforge.bfloat16.to_bf16 rounds floats to them)",
                "f16": "float16 (or its uint16 bits)"}[cfg.operand]
        cwant = want if cfg.c16 else "int32" if cfg.c_type == "s32" else "float32"
        if cfg.operand == "s4" and what != "C" and kind_bits == ("i", 8):
            raise ValidationError(f"{what} holds int8, but packed .s4 operands are uint8 bytes of two values each: "
                                  "pack them with ptxforge.int4.pack_int4 (or view packed bytes as uint8)")
        raise ValidationError(f"{what} holds {shown}; a .{cfg.operand} HopperGemm takes "
                              + (f"{cwant} C" if what == "C" else want))


def k_of_rows(cfg, row_bytes: int, k: int | None) -> int:
    """K of operand rows of `row_bytes` bytes: `k` when it fills them exactly, the row length when None.  A K
    that does not would build tensor maps over the wrong row length (reading past a row, or not all of it)."""
    whole = row_bytes * 8 // cfg.bits
    if k is None:
        return whole
    check_size("K", k)
    if k != whole:
        raise ValidationError(f"K={k} does not fill the operands' {row_bytes}-byte rows ({whole} .{cfg.operand} "
                              "values); the tensor maps read whole rows: pass K = the row length or leave it out")
    return k


def check_host_c(cfg, c, m: int, n: int, a=None, b=None) -> None:
    """Raise a ValidationError unless `c` is a writeable, C-contiguous numpy [M, N] array of `cfg`'s C type (what
    a host run writes its result into) sharing no memory with the host operands `a` and `b`."""
    check_host_out("C", c, (m, n), c_numpy_type(cfg), (("A", a), ("B", b)))


def host_problem(cfg, a, b, k: int | None = None) -> tuple:
    """(M, N, K) of host operands A [M, K(/2)] and B [N, K(/2)] (numpy arrays) for `cfg`, after checking
    what its kernel needs of them: two dimensions, an element type it reads, rows of the same length, a K
    that fills them exactly (two 4-bit values a byte), and the problem checks (`check_problem`).  Nothing
    here needs a GPU, so bad operands are refused the same way with and without one."""
    for what, x in (("A", a), ("B", b)):
        require_numpy(what, x, "(a host operand)")
        if x.ndim != 2:
            raise ValidationError(f"{what} must be 2-D [rows, K{'/2' if cfg.bits == 4 else ''}], got shape "
                                  f"{x.shape}")
        _check_elem(cfg, what, (x.dtype.kind, x.dtype.itemsize * 8), x.dtype)
    row_bytes = a.shape[1] * a.itemsize
    if b.shape[1] * b.itemsize != row_bytes:
        raise ValidationError(f"A rows hold {row_bytes} bytes and B rows {b.shape[1] * b.itemsize}: both run "
                              "along the same K")
    k = k_of_rows(cfg, row_bytes, k)
    m, n = a.shape[0], b.shape[0]
    cfg.check_problem(m, n, k)
    return m, n, k


def accepted_elem(cfg, what):
    """An element type operand `what` of `cfg` accepts (to check one operand with `check_elems`)."""
    from ...runtime.arrays import Elem
    ab, cs = _elems(cfg)
    return Elem(*sorted(cs)[0]) if what == "C" else Elem(*sorted(ab)[0])


def random_operands(cfg, m: int, n: int, k: int, rng) -> tuple:
    """Random host operands A [M, K(/2)], B [N, K(/2)] in `cfg`'s format, never all zeros: s8 values, s4
    nibbles packed two per byte (uint8), or bf16/f16 bit patterns (uint16) of normal samples."""
    if cfg.operand == "s8":
        return rng.integers(-128, 128, (m, k), dtype=np.int8), rng.integers(-128, 128, (n, k), dtype=np.int8)
    if cfg.operand == "s4":
        return rng.integers(0, 256, (m, k // 2), dtype=np.uint8), rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    if cfg.operand == "f16":
        return (rng.standard_normal((m, k)).astype(np.float16).view(np.uint16),
                rng.standard_normal((n, k)).astype(np.float16).view(np.uint16))
    return ((rng.standard_normal((m, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16),
            (rng.standard_normal((n, k)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16))


def reference(cfg, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy C for host operands (s4: packed bytes, widened first; bf16: uint16 bit patterns; f16: float16
    values or their 16-bit integer bit patterns), float64 for the 16-bit float operands."""
    if cfg.operand == "s8":  # (uint8 bytes are read as the s8 values they hold, as the kernel reads them)
        a, b = (x.view(np.int8) if x.dtype == np.uint8 else x for x in (np.asarray(a), np.asarray(b)))
        return a.astype(np.int64) @ b.astype(np.int64).T
    if cfg.operand == "s4":
        from .convert import widen_numpy
        return widen_numpy(a).astype(np.int64) @ widen_numpy(b).astype(np.int64).T
    if cfg.operand == "f16":  # (16-bit integers are the bit patterns, as the kernel reads them)
        af, bf = (np.asarray(x).view(np.float16) if np.asarray(x).dtype.kind in "iu" else np.asarray(x)
                  for x in (a, b))
        return af.astype(np.float64) @ bf.astype(np.float64).T
    from ...bfloat16 import from_bf16
    return from_bf16(a).astype(np.float64) @ from_bf16(b).astype(np.float64).T
