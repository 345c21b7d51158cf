"""The driver's JIT linker (cuLinkCreate / cuLinkAddData / cuLinkComplete), called through ctypes.

Why not through cuda.bindings like every other driver call: the driver keeps a pointer to
the `optionValues` array given to cuLinkCreate and writes the log lengths back into it when
it compiles, after cuLinkCreate has returned.  cuda.bindings builds that array for the
duration of the call only, so the driver would write into freed memory.  Here the option
arrays and the log buffers are ctypes objects that stay alive until cuLinkDestroy.
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass

from ..errors import ToolchainMissing

_PTXFORGE_INTERNAL = True

_lib = None


def _libcuda():
    """The driver library cuda.bindings has loaded (the same handle: dlopen finds it by name)."""
    global _lib
    if _lib is not None:
        return _lib
    names = ["nvcuda.dll"] if sys.platform == "win32" else ["libcuda.so.1", "libcuda.so"]
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        try:
            from cuda.pathfinder import load_nvidia_dynamic_lib
            lib = ctypes.CDLL(load_nvidia_dynamic_lib("cuda").abs_path)
        except Exception as e:
            raise ToolchainMissing(f"cannot open the CUDA driver library for its JIT linker: {e}") from e
    vp, u32, i32, sz = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_size_t
    lib.cuLinkCreate_v2.argtypes = [u32, ctypes.POINTER(i32), ctypes.POINTER(vp), ctypes.POINTER(vp)]
    lib.cuLinkAddData_v2.argtypes = [vp, i32, vp, sz, ctypes.c_char_p, u32, ctypes.POINTER(i32), ctypes.POINTER(vp)]
    lib.cuLinkComplete.argtypes = [vp, ctypes.POINTER(vp), ctypes.POINTER(sz)]
    lib.cuLinkDestroy.argtypes = [vp]
    for f in (lib.cuLinkCreate_v2, lib.cuLinkAddData_v2, lib.cuLinkComplete, lib.cuLinkDestroy):
        f.restype = i32
    _lib = lib
    return lib


@dataclass
class LinkResult:
    """What one link produced: the CUresult of the failing step (0 on success), the cubin and both logs."""

    code: int
    step: str
    cubin: bytes
    info_log: str
    error_log: str


def _text(buf) -> str:
    return buf.value.decode(errors="replace")


def link_ptx(ptx: bytes, options, log_bytes: int = 1 << 16, name: bytes = b"ptxforge.ptx") -> LinkResult:
    """Compile NUL-terminated PTX to a cubin with the driver's linker.

    `options` are (CUjit_option value, int value) pairs; the log buffers and verbose logging
    are added here.
    """
    lib = _libcuda()
    info = ctypes.create_string_buffer(log_bytes)
    err = ctypes.create_string_buffer(log_bytes)
    # CU_JIT_INFO_LOG_BUFFER 3, ..._SIZE_BYTES 4, CU_JIT_ERROR_LOG_BUFFER 5, ..._SIZE_BYTES 6, CU_JIT_LOG_VERBOSE 12
    keys = [3, 4, 5, 6, 12] + [int(k) for k, _ in options]
    vals = [ctypes.addressof(info), log_bytes, ctypes.addressof(err), log_bytes, 1] + [int(v) for _, v in options]
    c_keys = (ctypes.c_int * len(keys))(*keys)
    c_vals = (ctypes.c_void_p * len(vals))(*vals)
    state = ctypes.c_void_p()
    data = ctypes.create_string_buffer(ptx, len(ptx))
    try:
        rc = lib.cuLinkCreate_v2(len(keys), c_keys, c_vals, ctypes.byref(state))
        if rc:
            return LinkResult(rc, "cuLinkCreate", b"", _text(info), _text(err))
        rc = lib.cuLinkAddData_v2(state, 1, data, len(ptx), name, 0, None, None)  # 1: CU_JIT_INPUT_PTX
        if rc:
            return LinkResult(rc, "cuLinkAddData", b"", _text(info), _text(err))
        out, size = ctypes.c_void_p(), ctypes.c_size_t()
        rc = lib.cuLinkComplete(state, ctypes.byref(out), ctypes.byref(size))
        if rc:
            return LinkResult(rc, "cuLinkComplete", b"", _text(info), _text(err))
        cubin = ctypes.string_at(out.value, size.value)  # owned by the link state: copy before destroying it
        return LinkResult(0, "", cubin, _text(info), _text(err))
    finally:
        # c_keys, c_vals, info, err, data and name are locals, so they outlive this destroy
        if state.value:
            lib.cuLinkDestroy(state)
