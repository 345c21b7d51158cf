"""Tiled tensor maps (`CUtensorMap`) for the tensor-memory-access engine, described and checked in Python.

    tm = TensorMap.from_array(a_dev, box=(64, 128), swizzle=128)   # a 2-D row-major GPU array
    tm = TensorMap("u8", base=ptr, global_dims=(k, m), global_strides=(k,), box=(128, 128), swizzle=128)
    fn(grid, block, tm, ...)        # a `.param .align 64 .b8 name[128]` parameter takes the object

A `TensorMap` is a pure, frozen description: constructing one checks every constraint the driver
has (base and stride alignment, box limits, swizzle span against the inner box bytes, rank) with a
message that says what is legal, and touches no driver, so the CPU interpreter can read it too.
`encode()` calls `cuTensorMapEncodeTiled` (cuda.bindings.driver) once and returns the 128-byte blob
a kernel takes by value.  Dimensions are listed innermost first, as the driver and the PTX
`cp.async.bulk.tensor` coordinates are.  4-bit data is addressed as bytes (dtype "u8", the
innermost extent halved): the engine has no sub-byte element type.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

import numpy as np

from ..errors import LaunchError, ValidationError
from ..isa import types as T
from ..isa.descriptors import Swizzle, swizzle_mode

_PTXFORGE_INTERNAL = True

#: PTX element type name -> CUtensorMapDataType enumerator (TMA moves bits: signedness is irrelevant
#: to it, so s8 goes as UINT8 and s16 as UINT16).
TENSORMAP_DTYPES = {
    "u8": "CU_TENSOR_MAP_DATA_TYPE_UINT8", "s8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "b8": "CU_TENSOR_MAP_DATA_TYPE_UINT8",
    "u16": "CU_TENSOR_MAP_DATA_TYPE_UINT16", "s16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "b16": "CU_TENSOR_MAP_DATA_TYPE_UINT16",
    "f16": "CU_TENSOR_MAP_DATA_TYPE_FLOAT16", "bf16": "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
    "u32": "CU_TENSOR_MAP_DATA_TYPE_UINT32", "b32": "CU_TENSOR_MAP_DATA_TYPE_UINT32",
    "s32": "CU_TENSOR_MAP_DATA_TYPE_INT32", "f32": "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    "u64": "CU_TENSOR_MAP_DATA_TYPE_UINT64", "b64": "CU_TENSOR_MAP_DATA_TYPE_UINT64",
    "s64": "CU_TENSOR_MAP_DATA_TYPE_INT64", "f64": "CU_TENSOR_MAP_DATA_TYPE_FLOAT64",
}
INTERLEAVES = {0: "CU_TENSOR_MAP_INTERLEAVE_NONE", 16: "CU_TENSOR_MAP_INTERLEAVE_16B",
               32: "CU_TENSOR_MAP_INTERLEAVE_32B"}
L2_PROMOTIONS = {0: "CU_TENSOR_MAP_L2_PROMOTION_NONE", 64: "CU_TENSOR_MAP_L2_PROMOTION_L2_64B",
                 128: "CU_TENSOR_MAP_L2_PROMOTION_L2_128B", 256: "CU_TENSOR_MAP_L2_PROMOTION_L2_256B"}
OOB_FILLS = {"zero": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE",
             "nan": "CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"}

#: Bytes of the opaque CUtensorMap object, and the alignment a by-value parameter needs.
TENSORMAP_BYTES = 128
TENSORMAP_PARAM_ALIGN = 64

_NUMPY_TO_PTX = {("i", 8): "s8", ("u", 8): "u8", ("i", 16): "s16", ("u", 16): "u16", ("f", 16): "f16",
                 ("bf", 16): "bf16", ("i", 32): "s32", ("u", 32): "u32", ("f", 32): "f32", ("i", 64): "s64",
                 ("u", 64): "u64", ("f", 64): "f64", ("b", 8): "u8"}


def _ints(v, what):
    """`v` (an int or a sequence of ints, numpy integers too) as a tuple of ints; a float or a bool is
    refused, not rounded (an extent of 128.9 is a caller's slip, and the map would describe less)."""
    if isinstance(v, (int, np.integer)):
        v = (v,)
    try:
        items = tuple(v)
    except TypeError:
        raise ValidationError(f"tensor map {what} must be a sequence of ints, got {v!r}") from None
    if any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) for x in items):
        raise ValidationError(f"tensor map {what} must be a sequence of ints, got {v!r}")
    return tuple(int(x) for x in items)


def _option(name: str, v, legal, what: str):
    """`v` as the int of an enumerated option (numpy integers too) when it is one of `legal`; a float or a bool
    is refused, not matched (128.0 or False in place of a byte count is a caller's slip)."""
    if T.is_integer(v) and int(v) in legal:
        return int(v)
    raise ValidationError(f"{name} must be {what}, got {v!r}")


def _count(name: str, v, hi: int) -> int:
    """`v` (a Python or numpy integer, no bool) as an int in 1..hi."""
    if not T.is_integer(v) or not 1 <= v <= hi:
        raise ValidationError(f"{name} must be an int in 1..{hi}, got {v!r}")
    return int(v)


@dataclass(frozen=True)
class TensorMap:
    """A tiled tensor map (the arguments of `cuTensorMapEncodeTiled`), validated at construction.

    dtype: element type name ('s8', 'bf16', ...; 4-bit data as 'u8'); base: device address of
    element 0 (an int, numpy integers too; 16-byte aligned, 32 with 32-byte interleave);
    global_dims: extent per dimension, innermost first (rank 1..5); global_strides: byte strides
    of dimensions 1..rank-1 (multiples of 16, < 2^40; default: dense; numpy arrays too); box:
    the tile one copy moves, innermost first (each 1..256);
    element_strides: 1..8 per dimension (default 1), the traversal step: ceil(box[i] / e[i])
    elements are moved along dimension i, at coordinates c, c + e, ...; the first must be 1
    without interleave (TMA has no stride in dimension 0: the driver would ignore another value, so
    it is refused rather than silently not applied); interleave: 0/16/32 bytes (rank >= 3;
    with 32, base and strides 32-byte aligned and swizzle 32); swizzle: 0/32/64/128 bytes
    (without interleave the inner box must not exceed that span); l2_promotion: 0/64/128/256;
    oob_fill: 'zero' or 'nan' (floating types) for the out-of-bounds part of a box.
    """

    dtype: str
    base: int
    global_dims: tuple
    box: tuple
    global_strides: tuple | None = None
    element_strides: tuple | None = None
    interleave: int = 0
    swizzle: int = 0
    l2_promotion: int = 128
    oob_fill: str = "zero"
    _blob: list = field(default_factory=list, compare=False, repr=False)
    #: the array a map made by `from_array` addresses, kept alive as long as the map (a launch holds the
    #: map; without this a temporary array's memory could be freed, and reused, before the copy reads it)
    _owner: object = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        t = T.lookup(self.dtype)
        if t in (T.s4, T.u4):
            raise ValidationError(f"the tensor-memory-access engine has no {t.name} element: address 4-bit data "
                                  "as bytes (dtype 'u8', innermost extent and box halved; two values per byte)")
        if t.name not in TENSORMAP_DTYPES:
            raise ValidationError(f"tensor map dtype {t.name!r} is not a TMA element type; use one of "
                                  + ", ".join(sorted(TENSORMAP_DTYPES)))
        object.__setattr__(self, "dtype", t.name)
        eb = t.bits // 8
        dims = _ints(self.global_dims, "global_dims")
        rank = len(dims)
        if not 1 <= rank <= 5:
            raise ValidationError(f"a tensor map has rank 1..5, got {rank} dimensions {dims}")
        if any(not 1 <= n <= (1 << 32) for n in dims):
            raise ValidationError(f"global_dims {dims} must each be in 1..2^32")
        if not T.is_integer(self.base) or self.base < 0:
            raise ValidationError(f"tensor map base must be a device address (a non-negative int), got {self.base!r}")
        object.__setattr__(self, "base", int(self.base))
        object.__setattr__(self, "interleave", _option("interleave", self.interleave, INTERLEAVES,
                                                       "0 (none), 16 or 32 bytes"))
        if self.interleave and rank < 3:
            raise ValidationError(f"an interleaved tensor map has rank 3..5 (e.g. NC/8HWC8), got rank {rank}")
        align = 32 if self.interleave == 32 else 16
        if self.base % align:
            raise ValidationError(f"tensor map base {self.base:#x} must be {align}-byte aligned"
                                  + (" (32 with 32-byte interleave)" if align == 32 else ""))
        strides = self.global_strides
        if strides is None:
            acc, strides = dims[0] * eb, []
            for n in dims[1:]:
                strides.append(acc)
                acc *= n
        strides = _ints(strides, "global_strides")
        if len(strides) != rank - 1:
            raise ValidationError(f"global_strides gives the byte stride of dimensions 1..rank-1: {rank - 1} "
                                  f"value(s) for rank {rank}, got {strides}")
        for i, s in enumerate(strides):
            if s % 16 or s <= 0:
                raise ValidationError(f"global stride {i + 1} = {s} bytes must be a positive multiple of 16 "
                                      "(pad the rows, or use a narrower view)")
            if s >= (1 << 40):
                raise ValidationError(f"global stride {i + 1} = {s} bytes must be < 2^40")
            if self.interleave == 32 and s % 32:
                raise ValidationError(f"global stride {i + 1} = {s} bytes must be a multiple of 32 with 32-byte "
                                      "interleave")
        box = _ints(self.box, "box")
        if len(box) != rank:
            raise ValidationError(f"box needs one extent per dimension ({rank}), got {box}")
        if any(not 1 <= b <= 256 for b in box):
            raise ValidationError(f"box {box}: each extent must be in 1..256 elements")
        es = _ints(self.element_strides, "element_strides") if self.element_strides is not None else (1,) * rank
        if len(es) != rank or any(not 1 <= e <= 8 for e in es):
            raise ValidationError(f"element_strides needs {rank} values in 1..8, got {es}")
        if self.interleave == 0 and es[0] != 1:
            raise ValidationError(f"element_strides[0] = {es[0]}: without interleave TMA has no traversal stride "
                                  "in dimension 0 (the driver ignores this value and moves every element), so "
                                  "anything but 1 would not do what it says; stride the outer dimensions")
        if not isinstance(self.swizzle, Swizzle):
            object.__setattr__(self, "swizzle", _option("swizzle", self.swizzle, (0, 32, 64, 128),
                                                        "one of 0 (none), 32, 64 or 128 bytes"))
        sw = swizzle_mode(self.swizzle)
        inner = box[0] * eb
        if self.interleave == 0:
            what, legal = self._inner_box_names()
            if inner % 16:
                raise ValidationError(f"{what} {box[0]} x {eb} = {inner} bytes; it must be a multiple of 16 bytes")
            if sw.nbytes and inner > sw.nbytes:
                raise ValidationError(f"{what} {inner} bytes, more than the {sw.nbytes}-byte swizzle span: use "
                                      + legal.format(n=sw.nbytes // eb))
        elif self.interleave == 32 and sw.nbytes != 32:
            raise ValidationError(f"32-byte interleave needs swizzle 32, got {sw.nbytes or 'none'}")
        object.__setattr__(self, "l2_promotion", _option("l2_promotion", self.l2_promotion, L2_PROMOTIONS,
                                                         "0, 64, 128 or 256 bytes"))
        if self.oob_fill not in OOB_FILLS:
            raise ValidationError(f"oob_fill is 'zero' or 'nan', got {self.oob_fill!r}")
        if self.oob_fill == "nan" and not t.is_float:
            raise ValidationError("oob_fill='nan' needs a floating-point dtype")
        for name, v in (("global_dims", dims), ("global_strides", strides), ("box", box), ("element_strides", es)):
            object.__setattr__(self, name, v)

    def _inner_box_names(self) -> tuple:
        """(the subject of an error about the inner extent of a copy, what the caller sets it with) for this kind
        of map: a tiled map's is box[0]."""
        return "the inner box is", "a box of at most {n} elements innermost"

    # ------------------------------------------------------------ construction from arrays
    @classmethod
    def from_array(cls, array, box, *, dtype=None, swizzle=0, **kw) -> "TensorMap":
        """A tensor map over a GPU array (DeviceBuffer, `__cuda_array_interface__` or DLPack).

        The array's shape is read outermost first (numpy order) and reversed into global_dims;
        its byte strides likewise.  `box` is innermost first.  `dtype` overrides the element type
        (e.g. 'u8' for packed 4-bit data held in an int8 array).
        """
        dtype, ptr, dims, st = _array_geometry(array, dtype)
        return cls(dtype, int(ptr), tuple(dims), tuple(box), tuple(st), swizzle=swizzle, _owner=array, **kw)

    @classmethod
    def im2col(cls, array_or_ptr, *, lower_corner, upper_corner, channels_per_pixel, pixels_per_column,
               **kw) -> "Im2colTensorMap":
        """An im2col tensor map (`Im2colTensorMap`, `cuTensorMapEncodeIm2col`) over a GPU array of
        shape (N, (D, (H,)) W, C), or a raw pointer with dtype= and global_dims= (C, W, (H, (D,)) N).

        lower_corner / upper_corner: the filter-base bounding box in W (H, D), innermost first;
        channels_per_pixel (1..256) and pixels_per_column (1..1024): what one copy moves; kw:
        global_strides, element_strides, interleave, swizzle, l2_promotion, oob_fill, dtype.
        """
        return _im2col(array_or_ptr, lower_corner=lower_corner, upper_corner=upper_corner,
                       channels_per_pixel=channels_per_pixel, pixels_per_column=pixels_per_column, **kw)

    # ------------------------------------------------------------ facts
    @property
    def rank(self) -> int:
        """Number of dimensions."""
        return len(self.global_dims)

    @property
    def element_bytes(self) -> int:
        """Bytes per element."""
        return T.lookup(self.dtype).bits // 8

    @property
    def box_bytes(self) -> int:
        """Bytes one full box lands in shared memory (the expect_tx count of one copy)."""
        n = self.element_bytes
        for b, e in zip(self.box, self.element_strides):
            n *= -(-b // e)
        return n

    # ------------------------------------------------------------ driver
    def encode(self) -> bytes:
        """The 128-byte CUtensorMap from the driver's encoder (`cuTensorMapEncodeTiled` here; computed
        once, then cached), after the driver placed a foreign array's memory in ptxforge's context."""
        owner = self._owner
        if owner is not None and getattr(owner, "nbytes", 0) and getattr(owner, "_ptr", None) == 0:
            from .memory import DeviceBuffer
            if isinstance(owner, DeviceBuffer):  # freed: the map would send the TMA into freed memory
                raise LaunchError(f"the DeviceBuffer of this tensor map ({owner!r}) was freed; make the map again "
                                  "over live memory (TensorMap.from_array)")
        if self._blob:
            return self._blob[0]
        from .driver import api, enter, leave
        d = api()
        prev = enter()  # the encoders need an initialized driver; the caller's context is given back
        try:
            return self._encoded(d)
        finally:
            leave(prev)

    def _byte_span(self):
        """(0, one past the last byte) the map's global dimensions and strides reach from its base, or None for an
        interleaved layout (whose innermost dimension is the interleave, not elements)."""
        if self.interleave:
            return None
        from .arrays import byte_span
        eb = T.lookup(self.dtype).bits // 8
        return byte_span(self.global_dims, (eb, *self.global_strides), eb)

    def _encoded(self, d) -> bytes:
        from .driver import check, check_pointer
        from .memory import DeviceBuffer
        if self._owner is not None and not isinstance(self._owner, DeviceBuffer):
            # a foreign array's memory must be ptxforge's context's and device's, or the TMA goes elsewhere
            check_pointer(self.base, f"the array of a tensor map ({type(self._owner).__name__})", self._byte_span())
        name, layout = self._encoder(d)
        args = (getattr(d.CUtensorMapDataType, TENSORMAP_DTYPES[self.dtype]), self.rank, self.base,
                [d.cuuint64_t(n) for n in self.global_dims], [d.cuuint64_t(s) for s in self.global_strides],
                *layout, [d.cuuint32_t(e) for e in self.element_strides],
                getattr(d.CUtensorMapInterleave, INTERLEAVES[self.interleave]),
                getattr(d.CUtensorMapSwizzle, swizzle_mode(self.swizzle).tensor_map),
                getattr(d.CUtensorMapL2promotion, L2_PROMOTIONS[self.l2_promotion]),
                getattr(d.CUtensorMapFloatOOBfill, OOB_FILLS[self.oob_fill]))
        try:
            tmap = check(getattr(d, name)(*args), name)
        except Exception as e:
            raise LaunchError(f"{name} refused {self!r}: {e}") from e
        blob = ctypes.string_at(int(tmap.getPtr()), TENSORMAP_BYTES)
        self._blob.append(blob)
        return blob

    def _encoder(self, d) -> tuple:
        """(driver function, the arguments between the strides and the element strides): the box."""
        return "cuTensorMapEncodeTiled", ([d.cuuint32_t(b) for b in self.box],)

    def with_base(self, base: int) -> "TensorMap":
        """The same map over another buffer of the same shape (re-validated, not yet encoded)."""
        return TensorMap(self.dtype, int(base), self.global_dims, self.box, self.global_strides,
                         self.element_strides, self.interleave, self.swizzle, self.l2_promotion, self.oob_fill)


def _array_geometry(array, dtype=None):
    """(dtype name, device pointer, global_dims innermost first, byte strides of dims 1..) of a GPU
    array (DeviceBuffer, `__cuda_array_interface__` or DLPack), its shape read outermost first."""
    from .arrays import device_view
    from .memory import DeviceBuffer
    if isinstance(array, DeviceBuffer):
        shape, strides, ptr = tuple(array.shape), None, array.ptr
        dt = _NUMPY_TO_PTX.get((array.dtype.kind, array.dtype.itemsize * 8))
        eb = array.dtype.itemsize
    else:
        v = device_view(array)
        if v is None or not hasattr(v, "ptr"):
            raise ValidationError(f"{type(array).__name__} is not a GPU array (DeviceBuffer, "
                                  "__cuda_array_interface__ or DLPack on a CUDA device)")
        shape, strides, ptr = v.shape, v.strides, v.ptr
        dt = _NUMPY_TO_PTX.get((v.elem.kind, v.elem.bits))
        eb = max(v.elem.bits // 8, 1)
    dtype = dtype or dt
    if dtype is None:
        raise ValidationError("cannot tell the array's element type: pass dtype=")
    if not 1 <= len(shape) <= 5:
        raise ValidationError(f"a tensor map has rank 1..5: the array has {len(shape)} dimensions {tuple(shape)}")
    new_eb = T.lookup(dtype).bits // 8
    dims = [int(n) for n in reversed(shape)]
    if new_eb and (dims[0] * eb) % new_eb:
        raise ValidationError(f"the array's rows are {dims[0]} x {eb} bytes, not a whole number of {dtype} "
                              f"elements ({new_eb} bytes): pass a dtype whose size divides {dims[0] * eb}")
    dims[0] = dims[0] * eb // new_eb if new_eb else dims[0]
    if strides is None:
        acc, st = int(shape[-1]) * eb, []
        for n in reversed(shape[:-1]):
            st.append(acc)
            acc *= int(n)
    else:
        if strides[-1] != eb and shape[-1] != 1:
            raise ValidationError("the innermost dimension of a tensor-mapped array must be contiguous")
        st = [int(s) for s in reversed(strides[:-1])]
    return dtype, int(ptr), tuple(dims), tuple(st)


#: Range of the im2col bounding-box corners (signed) by tensor rank (cuTensorMapEncodeIm2col).
IM2COL_CORNER_RANGE = {3: (-(1 << 15), (1 << 15) - 1), 4: (-128, 127), 5: (-16, 15)}
#: Range of the im2col offsets an instruction adds (unsigned) by rank (PTX ISA, im2col mode).
IM2COL_OFFSET_RANGE = {3: (1 << 16) - 1, 4: (1 << 8) - 1, 5: (1 << 5) - 1}


@dataclass(frozen=True)
class Im2colTensorMap(TensorMap):
    """An im2col tensor map (`cuTensorMapEncodeIm2col`): a batch of images, dimensions innermost
    first C, W, (H, (D,)) N (rank 3..5), read by `cp.async.bulk.tensor...im2col` loads.

    lower_corner / upper_corner: the bounding box of filter base positions in W (H, D), innermost
    first: from lower_corner[j] to extent - 1 + upper_corner[j] (e.g. -pad and pad - (R - 1));
    channels_per_pixel: channels each pixel moves (1..256); pixels_per_column: pixels one copy
    moves (1..1024), walking the box W fastest, then H, D, then the next image, with the
    element strides of W/H/D as the traversal steps.  `box` is derived: (channels, 1, ...).
    """

    lower_corner: tuple = ()
    upper_corner: tuple = ()
    channels_per_pixel: int = 0
    pixels_per_column: int = 0

    def __post_init__(self):
        dims = _ints(self.global_dims, "global_dims")
        rank = len(dims)
        if not 3 <= rank <= 5:
            raise ValidationError(f"an im2col tensor map has rank 3..5 (NWC, NHWC, NDHWC), got {rank} dimensions")
        cpp = _count("channels_per_pixel", self.channels_per_pixel, 256)
        ppc = _count("pixels_per_column", self.pixels_per_column, 1024)
        object.__setattr__(self, "channels_per_pixel", cpp)
        object.__setattr__(self, "pixels_per_column", ppc)
        object.__setattr__(self, "box", (cpp,) + (1,) * (rank - 1))
        super().__post_init__()
        lo_lim, hi_lim = IM2COL_CORNER_RANGE[rank]
        for name in ("lower_corner", "upper_corner"):
            v = _ints(getattr(self, name), name)
            if len(v) != rank - 2:
                raise ValidationError(f"{name} gives W{', H' if rank > 3 else ''}{', D' if rank > 4 else ''} "
                                      f"(innermost first): {rank - 2} value(s) for rank {rank}, got {v}")
            if any(not lo_lim <= x <= hi_lim for x in v):
                raise ValidationError(f"{name} {v}: each must be in [{lo_lim}, {hi_lim}] for rank {rank}")
            object.__setattr__(self, name, v)
        for j in range(rank - 2):
            hi = self.global_dims[j + 1] - 1 + self.upper_corner[j]
            if hi < self.lower_corner[j]:
                raise ValidationError(f"the im2col bounding box is empty in dimension {j + 1}: from "
                                      f"{self.lower_corner[j]} to {hi} (= extent - 1 + upper_corner)")

    def _inner_box_names(self) -> tuple:
        """An im2col copy's inner extent is its channels per pixel (its box is derived from them)."""
        return "channels_per_pixel x element size is", "channels_per_pixel of at most {n}"

    @property
    def box_bytes(self) -> int:
        """Bytes one im2col copy lands (its expect_tx count): pixels x channels x element bytes."""
        return self.pixels_per_column * self.channels_per_pixel * self.element_bytes

    def box_positions(self, j: int) -> range:
        """The filter base positions of the bounding box in spatial dimension j (0: W, 1: H, 2: D)."""
        lo = self.lower_corner[j]
        return range(lo, self.global_dims[j + 1] + self.upper_corner[j], self.element_strides[j + 1])

    def _encoder(self, d) -> tuple:
        """`cuTensorMapEncodeIm2col` and its bounding box and copy shape (in place of a box)."""
        return "cuTensorMapEncodeIm2col", (list(self.lower_corner), list(self.upper_corner), self.channels_per_pixel,
                                           self.pixels_per_column)

    def with_base(self, base: int) -> "Im2colTensorMap":
        """The same map over another buffer of the same shape (re-validated, not yet encoded)."""
        return Im2colTensorMap(self.dtype, int(base), self.global_dims, self.box, self.global_strides,
                               self.element_strides, self.interleave, self.swizzle, self.l2_promotion, self.oob_fill,
                               lower_corner=self.lower_corner, upper_corner=self.upper_corner,
                               channels_per_pixel=self.channels_per_pixel, pixels_per_column=self.pixels_per_column)


def _im2col(array_or_ptr, *, lower_corner, upper_corner, channels_per_pixel, pixels_per_column, dtype=None,
            global_dims=None, global_strides=None, **kw) -> Im2colTensorMap:
    """An im2col tensor map (`Im2colTensorMap`) over a GPU array of shape (N, (D, (H,)) W, C) (numpy order;
    DeviceBuffer, `__cuda_array_interface__` or DLPack) or a raw pointer with global_dims (innermost
    first: C, W, (H, (D,)) N) and optional global_strides; encoded by `cuTensorMapEncodeIm2col`.
    kw: element_strides, interleave, swizzle, l2_promotion, oob_fill as for a tiled map."""
    extra = dict(lower_corner=lower_corner, upper_corner=upper_corner,
                 channels_per_pixel=channels_per_pixel, pixels_per_column=pixels_per_column)
    if T.is_integer(array_or_ptr):
        if global_dims is None or dtype is None:
            raise ValidationError("a raw pointer needs dtype and global_dims (innermost first: C, W, (H, (D,)) N)")
        dims = _ints(global_dims, "global_dims")
        return Im2colTensorMap(dtype, int(array_or_ptr), dims, (1,) * len(dims), global_strides, **kw, **extra)
    dtype, ptr, dims, st = _array_geometry(array_or_ptr, dtype)
    return Im2colTensorMap(dtype, ptr, dims, (1,) * len(dims), st, **kw, **extra, _owner=array_or_ptr)

