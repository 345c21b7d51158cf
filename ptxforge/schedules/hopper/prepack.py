"""The prepacked order of the weight-streaming kernel's A (`HopperGemm(prepacked=True)`, stream.py).

Weights that stay the same from call to call (a decode step's) are reordered once so that the kernel
reads them front to back: each warp's 16-byte loads cover 512 contiguous bytes and each CTA one
contiguous range.  On the H200 that streams 32 MB of packed int4 weights in about the time a kernel
that only reads them sequentially takes (10 us), where the same loads of row-major weights, 128 bytes
of each of 64 rows 4 KB apart at a time, took twice as long.

Order (16-byte chunks, 64-row tiles, k-blocks of 256 values = 128 packed bytes per row): chunk
(tile T, block kb, warp w, load i = 2 r + c, lane 4 g + t) holds bytes 64 c + 16 sigma(t) .. + 15
of block kb of row 64 T + 16 w + 8 r + g, sigma = (0, 2, 1, 3); rows past N and bytes past K are
zeros (N rounded up to 64 rows, each row to whole blocks).  `prepack_numpy` is the numpy model,
`prepack_tiles` the GPU kernel, `prepack` takes either kind of array and gives `PrepackedWeights`.
"""

from __future__ import annotations

import functools

import numpy as np

from ...builder import KernelBuilder
from ...errors import ValidationError
from ...isa import types as T

_PTXFORGE_INTERNAL = True

#: packed bytes of one k-block of one row (256 values, 8 k-steps)
BLOCK_BYTES = 128

#: rows of A per tile (one m64 wgmma)
TILE_ROWS = 64

#: the 16-byte chunk of a 64-byte half-row thread t of a quad copies (slot t of the wgmma fragment)
SIGMA = (0, 2, 1, 3)

def prepacked_shape(rows: int, k: int) -> tuple:
    """(bytes,) of the prepacked copy of `rows` x K packed s4 values: rows rounded up to 64, K to 256."""
    return (-(-rows // TILE_ROWS) * TILE_ROWS * -(-k // 256) * BLOCK_BYTES,)


def prepack_numpy(packed: np.ndarray) -> np.ndarray:
    """numpy model of the prepacked order: uint8 [rows, K/2] (row-major packed s4) -> uint8 [bytes]."""
    p = np.asarray(packed, dtype=np.uint8)
    if p.ndim != 2:
        raise ValidationError(f"prepacking takes a 2-D array of packed bytes [rows, K/2], got shape {p.shape}")
    rows, row_bytes = p.shape
    tiles, blocks = -(-rows // TILE_ROWS), -(-row_bytes // BLOCK_BYTES)
    full = np.zeros((tiles * TILE_ROWS, blocks * BLOCK_BYTES), np.uint8)
    full[:rows, :row_bytes] = p
    x = full.reshape(tiles, 4, 2, 8, blocks, 2, 4, 16)[:, :, :, :, :, :, list(SIGMA), :]  # (T, w, r, g, kb, c, t, 16)
    return np.ascontiguousarray(x.transpose(0, 4, 1, 2, 5, 3, 6, 7)).reshape(-1)


def emit_prepack() -> KernelBuilder:
    """Kernel `prepack_tiles(src, dst, rows, row_bytes, blocks)`: one thread per 16-byte chunk of the
    prepacked copy (`blocks` = ceil(row_bytes / 128) per row), zeros past the rows and past K.
    Grid: ceil(chunks / 256) CTAs of 256 threads, chunks = 8 x blocks x rows rounded up to 64."""
    k = KernelBuilder("prepack_tiles", target="sm_80", maxntid=256)
    src = k.param_ptr("src", T.u8)
    dst = k.param_ptr("dst", T.u8)
    rows = k.param_value("rows", T.u32)
    row_bytes = k.param_value("row_bytes", T.u32)
    blocks = k.param_value("blocks", T.u32)
    o = k.mad(k.ctaid(), 256, k.tid(), type=T.u32)
    total = k.mul(k.mul(k.div(k.add(rows, TILE_ROWS - 1, type=T.u32), TILE_ROWS, type=T.u32), blocks, type=T.u32), 4 * 4 * 32 * 4, type=T.u32)
    with k.if_(k.setp("lt", o, k.shr(total, 2, type=T.u32), type=T.u32)):
        lane = k.and_(o, 31, type=T.b32)
        i = k.and_(k.shr(o, 5, type=T.u32), 3, type=T.b32)
        w = k.and_(k.shr(o, 7, type=T.u32), 3, type=T.b32)
        tb = k.shr(o, 9, type=T.u32)  # tile x blocks + kb
        tile = k.div(tb, blocks, type=T.u32)
        kb = k.sub(tb, k.mul(tile, blocks, type=T.u32), type=T.u32)
        g, t = k.shr(lane, 2, type=T.u32), k.and_(lane, 3, type=T.b32)
        r, c = k.shr(i, 1, type=T.u32), k.and_(i, 1, type=T.b32)
        row = k.add(k.mul(tile, TILE_ROWS, type=T.u32), k.mad(w, 16, k.mad(r, 8, g, type=T.u32), type=T.u32),
                    type=T.u32)
        sig = k.or_(k.shl(k.and_(t, 1, type=T.b32), 1, type=T.b32), k.shr(t, 1, type=T.u32), type=T.b32)
        byte = k.mad(kb, BLOCK_BYTES, k.mad(c, 64, k.shl(sig, 4, type=T.b32), type=T.u32), type=T.u32)
        vals = k.regs(T.b32, 4, name="chunk")
        for v in vals:
            k.mov(0, type=T.b32, dst=v)
        ok = k.setp("lt", row, rows, type=T.u32, combine=("and", k.setp("lt", byte, row_bytes, type=T.u32)))
        at = k.add(k.mad(row, row_bytes, src, mode="wide", type=T.u32), k.cvt(byte, T.u64, frm=T.u32), type=T.u64)
        k.ld(at, type=T.b32, vec=4, dst=vals, pred=ok)
        k.st(k.mad(o, 16, dst, mode="wide", type=T.u32), vals, type=T.b32, vec=4)
    return k


@functools.lru_cache(maxsize=1)
def prepack_module():
    """The Module of the prepacking kernel (emitted once)."""
    return emit_prepack().module()


class PrepackedWeights:
    """Packed s4 weights [rows, K/2] in the prepacked order, on the GPU (what a `prepacked` HopperGemm takes
    as B): `rows`, `k`, the `buffer` (a DeviceBuffer of `prepacked_shape(rows, k)` bytes) and its `ptr`."""

    def __init__(self, buffer, rows: int, k: int):
        if buffer.nbytes != prepacked_shape(rows, k)[0]:
            raise ValidationError(f"a prepacked buffer of {rows} rows and K={k} holds {prepacked_shape(rows, k)[0]} "
                                  f"bytes, got {buffer.nbytes}")
        self.buffer, self.rows, self.k = buffer, int(rows), int(k)

    @property
    def ptr(self) -> int:
        """Device address of the prepacked bytes."""
        return self.buffer.ptr

    @property
    def shape(self) -> tuple:
        """(rows, K / 2): the shape of the packed array it was made from."""
        return (self.rows, self.k // 2)

    def __repr__(self) -> str:
        return f"<PrepackedWeights {self.rows} x K={self.k} at 0x{self.ptr:x}>"


def prepack(b, stream=None) -> PrepackedWeights:
    """`PrepackedWeights` of packed s4 weights B [rows, K/2] (uint8 or int8): a numpy array (reordered on the
    host, then copied), or a GPU array (reordered on the GPU by `prepack_tiles`, on `stream`)."""
    from ...runtime import DeviceBuffer
    if isinstance(b, np.ndarray):
        if b.dtype not in (np.uint8, np.int8) or b.ndim != 2:
            raise ValidationError(f"prepack takes packed s4 weights as 2-D uint8/int8 [rows, K/2], got {b.dtype} "
                                  f"{b.shape}")
        rows, row_bytes = b.shape
        if row_bytes % 16:
            raise ValidationError(f"rows of {row_bytes} packed bytes: the kernel reads 16-byte chunks (K % 32 == 0)")
        return PrepackedWeights(DeviceBuffer.from_host(prepack_numpy(b.view(np.uint8))), rows, 2 * row_bytes)
    from ...runtime.arrays import device_view
    v = device_view(b)
    if v is None or isinstance(v, np.ndarray):
        raise ValidationError("prepack takes a numpy array or a GPU array (DeviceBuffer, __cuda_array_interface__ "
                              f"or DLPack), got {type(b).__name__}")
    if not v.contiguous:
        raise ValidationError("prepack needs C-contiguous weights")
    ptr, shape, el = v.ptr, tuple(v.shape), v.elem
    if len(shape) != 2 or (el.kind, el.bits) not in (("u", 8), ("i", 8)):
        raise ValidationError(f"prepack takes packed s4 weights as 2-D 8-bit [rows, K/2], got {el} {shape}")
    rows, row_bytes = shape
    if row_bytes % 16 or ptr % 16:
        raise ValidationError("the prepacking kernel reads 16-byte chunks: rows of a multiple of 16 bytes "
                              f"(K % 32 == 0), 16-byte aligned; got {row_bytes}-byte rows at 0x{ptr:x}")
    from ...runtime import load
    from ...runtime.streams import stream_handle
    out = DeviceBuffer.empty(prepacked_shape(rows, 2 * row_bytes), np.uint8)
    blocks = -(-row_bytes // BLOCK_BYTES)
    total = -(-rows // TILE_ROWS) * blocks * TILE_ROWS * BLOCK_BYTES // 16
    fn = load(prepack_module())["prepack_tiles"]
    fn((-(-total // 256), 1, 1), (256, 1, 1), ptr, out.ptr, rows, row_bytes, blocks,
       stream=stream_handle(stream) if stream is not None else None)
    return PrepackedWeights(out, rows, 2 * row_bytes)
