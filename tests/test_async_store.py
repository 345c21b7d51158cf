"""st.async and red.async on the interpreter (and on the H200): stores and atomic reductions into the partner CTA's
shared memory of a cluster of two, completing on the partner's mbarrier; every form against numpy, and the reads
and waits the interpreter holds them to."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.isa import types as T

#: (instruction, operation, type, vector width): every st.async element type at its widest vector and scalar,
#: and every red.async operation and type
FORMS = [("st", None, "b32", 1), ("st", None, "u32", 4), ("st", None, "s32", 2), ("st", None, "f32", 4),
         ("st", None, "s64", 2), ("st", None, "f64", 1), ("st", None, "u64", 2), ("st", None, "b64", 1),
         ("red", "add", "u32", 1), ("red", "add", "s32", 1), ("red", "add", "u64", 1), ("red", "min", "u32", 1),
         ("red", "min", "s32", 1), ("red", "max", "u32", 1), ("red", "max", "s32", 1), ("red", "inc", "u32", 1),
         ("red", "dec", "u32", 1), ("red", "and", "b32", 1), ("red", "or", "b32", 1), ("red", "xor", "b32", 1)]
THREADS = 32


def exchange_kernel(kind, op, tname, vec, *, wait=True):
    """A cluster of two CTAs of 32 threads.  st: thread t stores x[rank, t, :] into the partner's inbox[t];
    red: thread t reduces x[rank, t, 0] into the partner's `acc` (which starts at init[partner]).  Both complete
    on the partner's mbarrier, which expects every byte; each CTA waits on its own and writes out its inbox
    (st) or acc (red)."""
    t = T.lookup(tname)
    size = t.bits // 8 * vec
    k = pf.KernelBuilder(f"{kind}_async_{op or 'st'}_{tname}_v{vec}", target="sm_90", reqntid=THREADS,
                         reqnctapercluster=(2, 1, 1))
    x, init, out = k.param_ptr("x", t), k.param_ptr("init", t), k.param_ptr("out", t)
    inbox = k.shared("inbox", THREADS * size, align=16)
    acc = k.shared("acc", 8, align=8)
    bar = k.shared("bar", 8, align=8)
    tid, rank = k.tid(), k.cluster_ctarank()
    partner = k.xor(rank, 1, type=T.b32)
    lead = k.setp("eq", tid, 0, type=T.u32)
    ld_t = T.lookup(f"b{t.bits}")
    k.st(k.shared_base(acc), k.ld(k.mad(rank, t.bits // 8, init, mode="wide", type=T.u32), type=ld_t), type=ld_t,
         space="shared", pred=lead)
    k.mbarrier_init(bar, 1, pred=lead)
    k.fence("fence.mbarrier_init.release.cluster", pred=lead)
    k.cluster_sync()
    k.mbarrier_arrive(bar, expect_tx=THREADS * size, pred=lead)
    row = k.mad(k.mad(rank, THREADS, tid, type=T.u32), size, x, mode="wide", type=T.u32)
    values = [k.ld(row, type=ld_t, offset=j * (t.bits // 8)) for j in range(vec)]
    far_bar = k.mapa(k.shared_base(bar), partner)
    if kind == "st":
        far = k.mapa(k.mad(tid, size, k.shared_base(inbox), type=T.u32), partner)
        k.st_async(far, values if vec > 1 else values[0], far_bar, type=tname)
    else:
        k.red_async(op, k.mapa(k.shared_base(acc), partner), values[0], far_bar, type=tname)
    if wait:
        k.mbarrier_wait(bar, 0)
    if kind == "st":
        mine = k.mad(tid, size, k.shared_base(inbox), type=T.u32)
        dst = k.mad(k.mad(rank, THREADS, tid, type=T.u32), size, out, mode="wide", type=T.u32)
        for j in range(vec):
            k.st(dst, k.ld(mine, type=ld_t, space="shared", offset=j * (t.bits // 8)), type=ld_t, offset=j * (t.bits // 8))
    else:
        k.st(k.mad(rank, t.bits // 8, out, mode="wide", type=T.u32),
             k.ld(k.shared_base(acc), type=ld_t, space="shared"), type=ld_t, pred=lead)
    k.cluster_sync()  # no CTA exits while its partner's accesses may still land in it
    return k


def _numpy_type(tname):
    return {"b32": np.uint32, "u32": np.uint32, "s32": np.int32, "f32": np.float32, "b64": np.uint64,
            "u64": np.uint64, "s64": np.int64, "f64": np.float64}[tname]


def operands(kind, op, tname, vec, rng):
    """x [2, 32, vec] and init [2] of the form's type: random bits (floats: normal samples); inc/dec get one
    bound for every thread (their result depends on the order of the threads otherwise)."""
    dt = _numpy_type(tname)
    if tname.startswith("f"):
        x = rng.standard_normal((2, THREADS, vec)).astype(dt)
    elif op in ("inc", "dec"):
        x = np.full((2, THREADS, vec), 40, dt)
    elif op == "add":
        x = rng.integers(-1000, 1000, (2, THREADS, vec)).astype(dt)
    else:
        info = np.iinfo(dt)
        x = rng.integers(info.min, info.max, (2, THREADS, vec), dtype=dt, endpoint=True)
    if kind == "st":
        return x, np.zeros(2, dt)
    init = np.array([7, 300], dtype=dt) if op in ("inc", "dec", "add") else x[:, 0, 0][::-1].copy() ^ dt(0x55)
    return x, init


def expected(kind, op, tname, x, init):
    """What each CTA writes: its inbox, the partner's rows (st), or its acc after the partner's reductions (red)."""
    if kind == "st":
        return x[::-1].copy()
    dt = _numpy_type(tname)
    bits = np.dtype(dt).itemsize * 8
    out = init.copy()
    for cta in (0, 1):
        v = out[cta]
        for s in x[1 - cta, :, 0]:
            if op == "add":  # wraps at the type's width
                z = (int(v) + int(s)) % 2**bits
                v = dt(z - 2**bits if tname.startswith("s") and z >= 2**(bits - 1) else z)
            elif op == "min":
                v = min(v, s)
            elif op == "max":
                v = max(v, s)
            elif op == "inc":
                v = dt(0) if v >= s else dt(v + 1)
            elif op == "dec":
                v = s if (v == 0 or v > s) else dt(v - 1)
            else:
                v = {"and": v & s, "or": v | s, "xor": v ^ s}[op]
        out[cta] = v
    return out


def _run(kind, op, tname, vec, seed, **kw):
    x, init = operands(kind, op, tname, vec, np.random.default_rng(seed))
    dt = _numpy_type(tname)
    out = np.zeros((2, THREADS, vec) if kind == "st" else (2,), dt)
    report = interp.run(exchange_kernel(kind, op, tname, vec, **kw), grid=2, block=THREADS, args=[x, init, out],
                        check=False)
    return out, expected(kind, op, tname, x, init), report


@pytest.mark.parametrize("kind, op, tname, vec", FORMS, ids=lambda v: str(v))
def test_every_form_lands_on_the_partner_and_matches_numpy(kind, op, tname, vec):
    got, want, report = _run(kind, op, tname, vec, seed=len(tname) + vec)
    assert report.ok, str(report)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind", ["st", "red"])
def test_reading_the_destination_before_the_mbarrier_wait_is_reported(kind):
    """Without the wait the destination is read while the partner's bytes are in flight: an "async" finding."""
    _, _, report = _run(kind, "add" if kind == "red" else None, "u32", 1, seed=3, wait=False)
    assert {f.kind for f in report.findings} >= {"async"}, str(report)


def test_every_form_assembles_for_sm_90():
    for form in FORMS:
        pf.assemble(exchange_kernel(*form).module(), "sm_90")


def test_a_misaligned_vector_destination_is_reported():
    k = pf.KernelBuilder("misaligned", target="sm_90", reqntid=32, reqnctapercluster=(2, 1, 1))
    box, bar = k.shared("box", 64, align=16), k.shared("bar", 8, align=8)
    v = k.mov(1, type=T.u32)
    k.mbarrier_init(bar, 1, pred=k.setp("eq", k.tid(), 0, type=T.u32))
    k.cluster_sync()
    k.st_async(k.mapa(k.shared_base(box, 4), 0), [v, v, v, v], k.mapa(k.shared_base(bar), 0), type="u32")
    with pytest.raises(interp.InterpError, match="st.async destination of 16 bytes at .* is not 16-byte aligned"):
        interp.run(k, grid=2, block=32)


@pytest.mark.gpu
def test_gpu_every_form_matches_numpy_and_the_interpreter():
    for form in FORMS:
        kind, op, tname, vec = form
        x, init = operands(kind, op, tname, vec, np.random.default_rng(11))
        out = np.zeros((2, THREADS, vec) if kind == "st" else (2,), _numpy_type(tname))
        k = exchange_kernel(*form)
        from ptxforge.runtime import launch_cluster, DeviceBuffer
        d = DeviceBuffer.from_host(out)
        launch_cluster(pf.load(k.module())[k.name], 2, THREADS, (2, 1, 1), DeviceBuffer.from_host(x),
                       DeviceBuffer.from_host(init), d)
        np.testing.assert_array_equal(d.to_host(), expected(kind, op, tname, x, init), err_msg=str(form))


def test_st_async_with_its_default_semantics_written_out_is_built_read_and_assembled():
    """`st.async.weak...` (how libcu++ spells it) is the same store with `.weak` written: built, assembled,
    read back from its text."""
    k = pf.KernelBuilder("weak", target="sm_90")
    a = k.shared_base(k.shared("buf", 64, align=16))
    bar = k.shared_base(k.shared("bar", 8, align=8))
    k.st_async(a, k.mov(1, type=pf.u32), bar, weak=True)
    k.st_async(a, [k.mov(2, type=pf.u32), k.mov(3, type=pf.u32)], bar, weak=True)
    m = k.module()
    assert "st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.u32" in m.ptx
    assert "st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.v2.u32" in m.ptx
    pf.assemble(m)
    assert pf.parse(m.ptx).ptx == m.ptx
