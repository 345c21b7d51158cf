"""MbarrierRing and WarpSpecialized: emitted PTX assembles for sm_90a with the register split applied."""

import pytest

import ptxforge as pf
from ptxforge.builder import KernelBuilder
from ptxforge.errors import ValidationError
from ptxforge.hopper import MbarrierRing, WarpSpecialized, entry_register_cap, register_split
from ptxforge.isa import types as T


def _kernel(stages=3):
    k = KernelBuilder("ring", target="sm_90a", maxntid=384, minnctapersm=1)
    tmap = k.param_tensormap("tmap")
    out = k.param_ptr("out", T.u32)
    smem = k.dynamic_shared("smem", align=1024)
    base = k.shared_base(smem)
    bars = k.add(base, stages * 4096, type=T.u32)
    ws = WarpSpecialized(k, consumer_groups=2)
    ring = MbarrierRing(k, stages, bars, consumer_arrivals=8, suspend_ns=1000)
    t0 = k.setp("eq", ws.tid, 0, type=T.u32)
    ring.init(pred=t0)
    k.bar_sync(0)
    with ws.producer():
        st = ring.producer_state()
        lead = k.setp("eq", ws.tid, 0, type=T.u32)
        with k.for_range(0, 8) as i:
            ring.acquire(st)
            ring.expect_tx(st, 4096, pred=lead)
            dst = k.mad(st.stage, 4096, base, mode="lo", type=T.u32)
            k.tensor_load(dst, tmap, (k.mul(i, 64, type=T.u32, mode="lo"), 0), ring.full(st), pred=lead)
            st.advance()
    with ws.consumer() as c:
        st = ring.consumer_state()
        lane0 = k.setp("eq", ws.lane, 0, type=T.u32)
        acc = k.mov(0, type=T.u32)
        with k.for_range(0, 8):
            ring.wait_full(st)
            v = k.ld(k.mad(st.stage, 4096, base, mode="lo", type=T.u32), type=T.u32, space="shared")
            k.add(acc, v, dst=acc)
            ring.release(st, pred=lane0)
            st.advance()
        k.st(k.mad(k.tid(), 4, out, mode="wide", type=T.u32), acc, type=T.u32)
    return k


def test_ring_kernel_assembles_with_split():
    k = _kernel()
    text = k.module().render().text
    for s in ("setmaxnreg.dec.sync.aligned.u32 40", "setmaxnreg.inc.sync.aligned.u32 232",
              "mbarrier.try_wait.parity.shared::cta.b64", ", 1000;", "mbarrier.arrive.expect_tx",
              "fence.mbarrier_init.release.cluster", ".minnctapersm 1"):
        assert s in text, s
    # whole-program ptxas: the linker backends compile for linking and ignore setmaxnreg (C7504)
    backend = "ptxas" if pf.assembler.find_tool("ptxas") else "auto"
    r = pf.assemble(k.module(), "sm_90a", backend=backend)
    assert r.resources("ring").spills == 0
    if backend != "ptxas":
        return
    assert "C7508" not in r.log  # ptxas would say so if setmaxnreg were ignored
    try:
        ops = r.sass_opcodes("ring")
    except pf.errors.ToolchainMissing:
        return
    assert any(o.startswith("USETMAXREG") for o in ops) and any(o.startswith("UTMALDG") for o in ops)


def test_register_plan_checks():
    register_split(384, 1, 2, 40, 232)
    with pytest.raises(ValidationError, match="wait forever"):
        register_split(384, 1, 2, 40, 256)
    with pytest.raises(ValidationError, match="multiple of 8"):
        register_split(384, 1, 2, 44, 232)
    assert entry_register_cap(384) == 168


@pytest.mark.parametrize("threads, producer, consumer, fits", [
    (384, 40, 232, True), (384, 40, 240, False), (512, 40, 152, True), (512, 40, 160, False),
    (512, 24, 160, True), (640, 40, 104, True), (640, 40, 112, False), (256, 40, 232, True)])
def test_a_register_plan_fits_what_the_launch_gave(threads, producer, consumer, fits):
    """setmaxnreg.inc only takes registers other warpgroups released: the counts asked for must fit
    threads x the entry cap, not just the SM's register file (640 threads start with 96 each, so 40 +
    4 x 112 = 488 per thread slot is more than the 480 there: on the H200 that kernel hung)."""
    consumers = threads // 128 - 1
    if fits:
        register_split(threads, 1, consumers, producer, consumer)
        assert 128 * (producer + consumers * consumer) <= threads * entry_register_cap(threads)
    else:
        with pytest.raises(ValidationError, match=f"at most {(threads * entry_register_cap(threads) // 128 - producer) // consumers // 8 * 8} per consumer"):
            register_split(threads, 1, consumers, producer, consumer)


def test_warp_specialization_needs_entry_cap():
    k = KernelBuilder("nocap", target="sm_90a", maxntid=384)
    with pytest.raises(ValidationError, match="minnctapersm"):
        WarpSpecialized(k, 2)


def test_ring_needs_sm90():
    k = KernelBuilder("old", target="sm_80")
    with pytest.raises(ValidationError, match="sm_90"):
        MbarrierRing(k, 2, k.mov(0, type=T.u32))


@pytest.mark.parametrize("directives, entry", [
    (dict(maxntid=384, minnctapersm=1), 168), (dict(maxntid=384, minnctapersm=2), 80),
    (dict(maxntid=384, maxnreg=128), 128), (dict(maxntid=384, minnctapersm=1, maxnreg=96), 96)])
def test_the_split_is_checked_against_the_kernels_own_entry_cap(directives, entry):
    """A kernel that asks for two CTAs per SM (or caps its registers) starts each thread with fewer
    registers: the default consumer count is the most that fits that, and a split that fits only the
    one-CTA cap is refused (on a GPU its consumers' setmaxnreg.inc would wait forever)."""
    k = KernelBuilder("ws", target="sm_90a", **directives)
    ws = WarpSpecialized(k, consumer_groups=2)
    assert 128 * (40 + 2 * ws.consumer_regs) <= 384 * entry < 128 * (40 + 2 * (ws.consumer_regs + 8))
    if entry < 168:
        with pytest.raises(ValidationError, match=f"starts with {entry} per thread"):
            WarpSpecialized(KernelBuilder("ws", target="sm_90a", **directives), consumer_groups=2, consumer_regs=232)
