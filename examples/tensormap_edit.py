"""One tensor map for many arrays: each CTA edits the map on the device to point at its own array (the
grouped-GEMM pattern, where the groups' shapes and places are data the device reads).

The groups lie in one buffer at the byte offsets of a table.  The host encodes one map, for group 0.  CTA g
copies it from its parameter into shared memory, rewrites its global address with `tensormap.replace` (the
buffer plus group g's offset) and its row count (groups differ in height), copies it to its own 128-byte slot in global memory with
`tensormap.cp_fenceproxy` (which releases it to the tensormap proxy), acquires it with
`fence.proxy.tensormap::generic.acquire`, then loads its first box through it with TMA and writes the box
out.  Rows past a group's height come back as zeros, as TMA fills them.

On a GPU it runs 6 groups of up to 64 x 256 int32 and checks against numpy; without one the
interpreter runs the same problem and checks it the same way.

    python examples/tensormap_edit.py [--groups G] [--listing] [--sanitizer]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import ptxforge as pf
from ptxforge import u32, u64
from ptxforge.cli import positive_int, run_main

BOX = (64, 16)  # innermost first: 64 int32 (256 bytes) x 16 rows
COLS = 256


def build(target: str = "sm_90a") -> pf.Module:
    """`grouped_first_box(tm, maps, data, offsets, rows, out)`: CTA g loads box (0, 0) of group g (at data +
    offsets[g], rows[g] rows of COLS) through tm edited for it (its map in maps[g]) and writes it to out[g];
    one warp per CTA."""
    k = pf.KernelBuilder("grouped_first_box", target=target, reqntid=32)
    tm = k.param_tensormap("tm")
    maps, data = k.param_ptr("maps", u32), k.param_ptr("data", u32)
    offsets, rows, out = k.param_ptr("offsets", u64), k.param_ptr("rows", u32), k.param_ptr("out", u32)
    smap = k.shared("smap", 128, align=128)
    tile = k.shared("tile", 4 * BOX[0] * BOX[1], align=128)
    bar = k.shared("bar", 8, align=8)
    tid, g = k.tid(), k.ctaid()
    lead = k.setp("eq", tid, 0)
    k.mbarrier_init(bar, 1, pred=lead)
    k.fence("fence.mbarrier_init.release.cluster", pred=lead)
    with k.if_(k.setp("lt", tid, 8)):  # the 128 bytes of the parameter's map, 16 a thread
        w = k.ld(k.add(tm, k.mul(tid, 16, mode="wide")), type=u32, vec=4, space="generic")
        k.st(k.add(k.shared_base(smap), k.mul(tid, 16)), list(w), type=u32, space="shared")
    k.bar_sync(0)
    with k.if_(lead):
        where = k.add(data, k.ld(k.mad(g, 8, offsets, mode="wide"), type=u64))
        k.tensormap_replace(smap, "global_address", where, space="shared::cta")
        k.tensormap_replace(smap, "global_dim", k.ld(k.mad(g, 4, rows, mode="wide"), type=u32), ordinal=1,
                            space="shared::cta")
    k.bar_sync(0)
    mine = k.mad(g, 128, maps, mode="wide")
    k.tensormap_cp_fenceproxy(mine, smap, scope="gpu")  # the whole warp: .sync.aligned
    k.fence("fence.proxy.tensormap::generic.acquire.gpu", addr=mine)
    with k.if_(lead):
        k.mbarrier_arrive(bar, expect_tx=4 * BOX[0] * BOX[1])
        k.tensor_load(tile, mine, (0, 0), bar)
    k.mbarrier_wait(bar, 0)
    base = k.mad(g, 4 * BOX[0] * BOX[1], out, mode="wide")
    for j in range(BOX[0] * BOX[1] // 32):
        o = k.shl(k.add(tid, 32 * j), 2)
        k.st(k.add(base, k.cvt(o, "u64")), k.ld(k.add(k.shared_base(tile), o), type=u32, space="shared"), type=u32)
    return k.module()


def groups(count: int, seed: int = 0) -> list:
    """`count` int32 arrays of COLS columns and 5..64 rows, never all zeros."""
    rng = np.random.default_rng(seed)
    return [rng.integers(1, 1 << 30, (int(rng.integers(5, 65)), COLS), dtype=np.int32).view(np.uint32)
            for _ in range(count)]


def reference(arrays) -> np.ndarray:
    """[G, 16, 64]: the first box of each array, rows past its height zero."""
    out = np.zeros((len(arrays), BOX[1], BOX[0]), np.uint32)
    for g, a in enumerate(arrays):
        part = a[:BOX[1], :BOX[0]]
        out[g, :part.shape[0]] = part
    return out


def _packed(arrays):
    """(one buffer holding every group, the byte offset of each, the row count of each)."""
    data = np.concatenate([a.reshape(-1) for a in arrays])
    offsets = np.cumsum([0] + [a.size * 4 for a in arrays[:-1]]).astype(np.uint64)
    return data, offsets, np.array([a.shape[0] for a in arrays], np.uint32)


def run_cpu(count=6, seed=0):
    """On the interpreter: (result, expected)."""
    from ptxforge import interp
    arrays = groups(count, seed)
    data, offsets, rows = _packed(arrays)
    out = np.zeros((count, BOX[1], BOX[0]), np.uint32)
    interp.run(build(), grid=count, block=32, args=[interp.host_tensor_map(arrays[0], BOX),
                                                    np.zeros(32 * count, np.uint32), data, offsets, rows, out])
    return out, reference(arrays)


def run_gpu(count=6, seed=0):
    """On the GPU: (result, expected)."""
    from ptxforge.runtime import DeviceBuffer, TensorMap
    arrays = groups(count, seed)
    data, offsets, rows = _packed(arrays)
    d = DeviceBuffer.from_host(data)
    out = np.zeros((count, BOX[1], BOX[0]), np.uint32)
    first = TensorMap("u32", d.ptr, (COLS, arrays[0].shape[0]), BOX, (COLS * 4,))
    pf.load(build())["grouped_first_box"](count, 32, first, DeviceBuffer.empty((32 * count,), np.uint32), d,
                                          offsets, rows, pf.Out(out))
    return out, reference(arrays)


def main(argv=None) -> int:
    """Run on the GPU (or the interpreter without one) and check; 0 when correct."""
    from ptxforge.runtime import gpu_skip_reason, offline_summary
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=positive_int, default=6)
    ap.add_argument("--listing", action="store_true")
    ap.add_argument("--sanitizer", action="store_true", help="the same small problem (it already is one)")
    args = ap.parse_args(argv)
    if args.listing:
        print(build().listing())
    reason = gpu_skip_reason()
    if reason is not None:
        print(offline_summary(build(), reason))
        got, want = run_cpu(args.groups)
    else:
        got, want = run_gpu(args.groups)
    where = "interpreter" if reason is not None else pf.device_info().name
    ok = np.array_equal(got, want)
    print(f"tensormap_edit on {where}: {args.groups} groups loaded through one tensor map edited per CTA: "
          f"{'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
