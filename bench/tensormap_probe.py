"""Which value each tensormap.replace field takes for a given TensorMap change, measured on the GPU: the bytes of a
map edited on the device against cuTensorMapEncodeTiled's bytes of the changed map (for each candidate value, in
shared and in global memory).  The whole flow (edit, tensormap.cp_fenceproxy, acquire, a TMA load through the
edited map) is examples/tensormap_edit.py and tests/test_tensormap_edit.py.

    python bench/tensormap_probe.py        (writes tm_probe.json under $OUT, or bench/results/h200_lane/tensormap/)

Equal bytes for global_address (the address), global_dim (the extent), global_stride (bytes), elemtype (the
CUtensorMapDataType value), fill_mode and interleave_layout (their enumerations); for box_dim, element_stride
(the value itself), rank (the rank minus one) and swizzle_mode the edited field matches and the driver also
rewrites bytes the edit leaves (tests/test_tensormap_edit.py checks that loads through such maps agree).
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import ptxforge as pf
from ptxforge.isa import types as T
from ptxforge.runtime import DeviceBuffer, TensorMap, gpu_skip_reason


def main() -> int:
    """Measure and print; 1 without a GPU."""
    if gpu_skip_reason() is not None:
        print(f"needs a GPU: {gpu_skip_reason()}")
        return 1

    buf = DeviceBuffer.empty((1 << 20,), np.uint8)
    base = buf.ptr
    def A(**kw):
        d = dict(dtype="u32", base=base, global_dims=(256, 64, 8), box=(32, 8, 2), global_strides=(1024, 65536))
        d.update(kw)
        return TensorMap(**d)

    # (name, field, ordinal, map before, map after, candidate values)
    cases = [
        ("address", "global_address", None, A(), A(base=base + 4096), [base + 4096]),
        ("rank3to2", "rank", None, A(), A(global_dims=(256, 64), box=(32, 8), global_strides=(1024,)), [2, 1]),
        ("box0", "box_dim", 0, A(), A(box=(16, 8, 2)), [16, 15]),
        ("box2", "box_dim", 2, A(), A(box=(32, 8, 1)), [1, 0]),
        ("gdim1", "global_dim", 1, A(), A(global_dims=(256, 40, 8)), [40, 39]),
        ("gstride0", "global_stride", 0, A(), A(global_strides=(2048, 65536)), [2048, 2048 >> 4, 2047]),
        ("gstride1", "global_stride", 1, A(), A(global_strides=(1024, 131072)), [131072, 131072 >> 4]),
        ("estride1", "element_stride", 1, A(), A(element_strides=(1, 2, 1)), [2, 1]),
        ("elemtype", "elemtype", None, A(), A(dtype="f32"), list(range(13))),
        ("swizzle", "swizzle_mode", None, A(), A(swizzle=128), [0, 1, 2, 3]),
        ("fill", "fill_mode", None, A(dtype="f32"), A(dtype="f32", oob_fill="nan"), [0, 1]),
        ("interleave", "interleave_layout", None, A(box=(4, 8, 2)), A(box=(4, 8, 2), interleave=16), [0, 1, 2]),
    ]
    runs = [(c, v, sp) for c in cases for v in c[5] for sp in ("shared::cta", "global")]
    k = pf.KernelBuilder("tm_probe", target="sm_90a", reqntid=32)
    src = k.param_ptr("src", T.b32)
    out = k.param_ptr("out", T.b32)
    sm = k.shared("sm", 128, align=128)
    tid = k.tid()
    lead = k.setp("eq", tid, 0)
    for i, ((name, field, ordn, a, b, _), v, sp) in enumerate(runs):
        with k.if_(lead):
            dst = k.add(out, i * 128, type=T.u64)
            for j in range(8):
                w = k.ld(k.add(src, i * 128 + 16 * j, type=T.u64), type=T.b32, vec=4)
                if sp == "shared::cta":
                    k.st(k.add(k.shared_base(sm), 16 * j), list(w), type=T.b32, space="shared")
                else:
                    k.st(k.add(dst, 16 * j, type=T.u64), list(w), type=T.b32)
            if sp == "shared::cta":
                k.tensormap_replace(sm, field, v, ordinal=ordn, space="shared::cta")
                for j in range(8):
                    w = k.ld(k.add(k.shared_base(sm), 16 * j), type=T.b32, space="shared", vec=4)
                    k.st(k.add(dst, 16 * j, type=T.u64), list(w), type=T.b32)
            else:
                k.membar("gl")
                k.tensormap_replace(dst, field, v, ordinal=ordn, space="global")
                k.membar("gl")
    m = k.module()
    srcs = np.concatenate([np.frombuffer(c[3].encode(), np.uint8) for c, _, _ in runs])
    o32 = np.zeros(len(runs) * 32, np.uint32)
    pf.load(m)["tm_probe"](1, 32, DeviceBuffer.from_host(srcs.view(np.uint32)), pf.Out(o32))
    o = o32.view(np.uint8)
    res = {}
    for i, ((name, field, ordn, a, b, _), v, sp) in enumerate(runs):
        got = o[i * 128:(i + 1) * 128]
        want = np.frombuffer(b.encode(), np.uint8)
        before = np.frombuffer(a.encode(), np.uint8)
        diff = np.flatnonzero(got != want).tolist()
        res.setdefault(name, []).append(dict(value=v, space=sp, equal=not diff, diff_bytes=diff[:12],
                                             changed_by_replace=np.flatnonzero(got != before).tolist()[:12],
                                             changed_by_encoder=np.flatnonzero(want != before).tolist()[:12]))
    for name, rs in res.items():
        hits = [(r["value"], r["space"]) for r in rs if r["equal"]]
        print(f"{name:12s} equal for {hits}")
        if not hits:
            for r in rs[:4]:
                print("    ", r)
    where = os.environ.get("OUT") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "h200_lane",
                                                   "tensormap")
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, "tm_probe.json"), "w") as fh:
        json.dump(res, fh, indent=1)

    return 0


if __name__ == "__main__":
    sys.exit(main())
