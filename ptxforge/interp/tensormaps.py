"""Tensor maps on the CPU: a `TensorMap` description bound to a numpy array.

    tm = interp.host_tensor_map(a, box=(64, 32), swizzle=128)     # a: a 2-D row-major numpy array
    interp.run(module, "k", block=128, args=[tm, ...])             # for a param_tensormap() parameter
    im = interp.host_im2col_map(x, lower_corner=(-1, -1), upper_corner=(-1, -1),
                                channels_per_pixel=64, pixels_per_column=128)   # x: (N, H, W, C)

A GPU kernel receives the 128 opaque bytes `cuTensorMapEncodeTiled` makes; the interpreter passes
a handle in those bytes instead (`TENSORMAP_MAGIC` and an index) and its TMA executors read the
`TensorMap` fields (dtype, dims, strides, box, swizzle, OOB fill) the handle names, with the base
address moved to where the array lives in the interpreter's global heap.  The array may also be
passed as a pointer argument of the same launch (one buffer, as on a GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import LaunchError
from ..runtime.tensormap import Im2colTensorMap, TensorMap, _NUMPY_TO_PTX

_PTXFORGE_INTERNAL = True

#: First 4 bytes of the parameter block of a tensor map in the interpreter ("PFTM").
TENSORMAP_MAGIC = 0x4D544650


@dataclass(frozen=True)
class HostTensorMap:
    """A TensorMap (base 0) over a numpy array: the interpreter's argument for a tensor-map parameter."""

    array: np.ndarray
    tmap: TensorMap


def _host_geometry(array, dtype, what):
    if not isinstance(array, np.ndarray) or not array.flags.c_contiguous:
        raise LaunchError(f"{what} takes a C-contiguous numpy array")
    dt = dtype or _NUMPY_TO_PTX.get(("u" if array.dtype.kind == "b" else array.dtype.kind, array.dtype.itemsize * 8))
    if dt is None:
        raise LaunchError(f"cannot tell the TMA element type of {array.dtype}: pass dtype=")
    from ..isa import types as T
    eb = T.lookup(dt).bits // 8
    dims = [int(n) for n in reversed(array.shape)]
    dims[0] = dims[0] * array.dtype.itemsize // eb
    strides = [int(s) for s in reversed(array.strides[:-1])]
    return dt, tuple(dims), tuple(strides)


def host_tensor_map(array: np.ndarray, box, *, dtype=None, swizzle=0, **kw) -> HostTensorMap:
    """A tensor map over a C-contiguous numpy array (shape read outermost first, like
    `TensorMap.from_array`), checked by `TensorMap` exactly as for a GPU array."""
    dt, dims, strides = _host_geometry(array, dtype, "host_tensor_map")
    return HostTensorMap(array, TensorMap(dt, 0, dims, tuple(box), strides, swizzle=swizzle, **kw))


def host_im2col_map(array: np.ndarray, *, lower_corner, upper_corner, channels_per_pixel, pixels_per_column,
                    dtype=None, **kw) -> HostTensorMap:
    """An im2col tensor map (`TensorMap.im2col`) over a C-contiguous numpy array of shape
    (N, (D, (H,)) W, C), checked as for a GPU array; the argument of an im2col load's parameter."""
    dt, dims, strides = _host_geometry(array, dtype, "host_im2col_map")
    return HostTensorMap(array, Im2colTensorMap(dt, 0, dims, (1,) * len(dims), strides, lower_corner=lower_corner,
                                                upper_corner=upper_corner,
                                                channels_per_pixel=channels_per_pixel,
                                                pixels_per_column=pixels_per_column, **kw))


def handle_bytes(index: int) -> bytes:
    """The 128 parameter bytes that name tensor map `index` of a launch."""
    return (TENSORMAP_MAGIC | (index << 32)).to_bytes(8, "little") + bytes(120)
