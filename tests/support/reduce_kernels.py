"""Small kernels around atomics and bulk reductions, shared by the interpreter tests of those instructions and
the GPU tests that hold the interpreter to the hardware."""

import ptxforge as pf
from ptxforge.isa import types as T


def half_atom_kernel(t, op, n_threads, vec=1, collide=True):
    """Thread i applies its value(s) to word i (or all to word 0 with `collide`), and keeps the old value(s)."""
    k = pf.KernelBuilder("h", target="sm_90", reqntid=n_threads)
    mem, vals, olds = (k.param_ptr(x, pf.b8) for x in ("mem", "vals", "olds"))
    tt = T.lookup(t)
    nbytes = tt.bits // 8 * vec
    i = k.tid()
    off = k.mul(i, nbytes, mode="wide")
    addr = mem if collide else k.add(mem, off)
    bt = T.lookup(f"b{tt.bits}")
    v = [k.ld(k.add(vals, off), type=bt, offset=j * tt.bits // 8, dst=k.reg(bt)) for j in range(vec)]
    old = k.atom(op, addr, v if vec > 1 else v[0], type=t)
    for j, r in enumerate(old.regs if vec > 1 else [old]):
        k.st(k.add(olds, off), r, type=bt, offset=j * tt.bits // 8)
    return k


def one_d_kernel(op, tname, n, *, fence=True, early_write=False):
    """32 threads copy n elements of `src` into shared memory; thread 0 reduces them into `g` (1-D bulk reduction)."""
    t = T.lookup(tname)
    bt = T.lookup(f"b{t.bits}")
    eb = t.bits // 8
    k = pf.KernelBuilder("reduce_1d", target="sm_90a", reqntid=32)
    g, src = k.param_ptr("g", bt), k.param_ptr("src", bt)
    buf = k.shared("buf", n * eb, align=128)
    tid = k.tid()
    for j in range(0, n, 32):
        i = k.add(tid, j, type=T.u32)
        v = k.ld(k.mad(i, eb, src, type=T.u32, mode="wide"), type=bt)
        k.st(k.mad(i, eb, k.shared_base(buf), type=T.u32), v, type=bt, space="shared")
    if fence:
        k.fence("fence.proxy.async.shared::cta")
    k.bar_sync(0)
    with k.if_(k.setp("eq", tid, 0, type=T.u32)):
        k.bulk_reduce(g, buf, n * eb, op, tname)
        k.bulk_commit()
        if early_write:
            k.st(k.shared_base(buf), 0, type=T.u32, space="shared")
        k.bulk_wait(0, read=True)
    return k.module()
