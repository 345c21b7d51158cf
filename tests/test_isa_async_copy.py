"""cp.async (sm_80), its completion, createpolicy, and the sm_90 bulk copies."""

import pytest

import ptxforge as pf
from ptxforge import Addr, b8, f32, s32, u32
from support.located import assert_located
from support.ptx_text import assembler_verdict, raw_kernel

HERE = __file__


def kernel(target="sm_80"):
    k = pf.KernelBuilder("t", target=target)
    g = k.param_ptr("g", f32)
    s = k.shared_base(k.shared("s", 1024, align=128))
    mbar = k.shared_base(k.shared("mbar", 8, align=8))
    return k, g, s, mbar


def emitted(k, skip):
    """Rendered instructions after the first `skip` (the setup), without the final ret."""
    return [i.render() for i in k.finish().instructions[skip:-1]]


SETUP = 4  # ld.param, cvta, mov s, mov mbar


# ---------------------------------------------------------------- cp.async forms

@pytest.mark.parametrize("kwargs, size, text", [
    ({}, 16, "cp.async.cg.shared.global [%s_base], [%g], 16;"),
    ({}, 8, "cp.async.ca.shared.global [%s_base], [%g], 8;"),
    ({}, 4, "cp.async.ca.shared.global [%s_base], [%g], 4;"),
    ({"cache": "ca"}, 16, "cp.async.ca.shared.global [%s_base], [%g], 16;"),
    ({"src_size": 7}, 16, "cp.async.cg.shared.global [%s_base], [%g], 16, 7;"),
    ({"src_size": 0}, 4, "cp.async.ca.shared.global [%s_base], [%g], 4, 0;"),
    ({"prefetch": "L2::128B"}, 4, "cp.async.ca.shared.global.L2::128B [%s_base], [%g], 4;"),
    ({"prefetch": "L2::256B"}, 16, "cp.async.cg.shared.global.L2::256B [%s_base], [%g], 16;"),
])
def test_cp_async_renders(kwargs, size, text):
    k, g, s, _ = kernel()
    k.cp_async(s, g, size, **kwargs)
    assert emitted(k, SETUP) == [text]
    pf.assemble(k.module())


def test_zero_fill_from_a_register_ignore_src_and_cache_policy():
    k, g, s, _ = kernel()
    n = k.reg(u32, "n")
    p = k.setp("ne", n, 0, dst=k.reg(pf.pred, "odd"))
    k.cp_async(Addr(s, 16), g, 16, src_size=n)
    k.cp_async(Addr(s, 32), Addr(g, 8), 8, ignore_src=p)
    k.cp_async(Addr(s, 40), Addr(g, 16), 8, ignore_src=~p)
    pol = k.createpolicy("L2::evict_last", 1.0, dst=k.reg(pf.b64, "pol"))
    k.cp_async(Addr(s, 48), Addr(g, 32), 4, cache_policy=pol, pred=p)
    assert emitted(k, SETUP + 1) == [
        "cp.async.cg.shared.global [%s_base+16], [%g], 16, %n;",
        "cp.async.ca.shared.global [%s_base+32], [%g+8], 8, %odd;",
        "cp.async.ca.shared.global [%s_base+40], [%g+16], 8, !%odd;",
        "createpolicy.fractional.L2::evict_last.b64 %pol, 0f3F800000;",
        "@%odd cp.async.ca.shared.global.L2::cache_hint [%s_base+48], [%g+32], 4, %pol;",
    ]
    m = k.module()
    assert str(m.version) == "7.5"  # ignore-src is PTX 7.5; the cache hint 7.4
    pf.assemble(m)


def test_completion_forms():
    k, g, s, mbar = kernel()
    k.cp_async(s, g, 16)
    k.cp_async_commit()
    k.cp_async_wait(2)
    k.cp_async_wait_all()
    k.cp_async_mbarrier_arrive(mbar)
    k.cp_async_mbarrier_arrive(mbar, noinc=True)
    assert emitted(k, SETUP + 1) == [
        "cp.async.commit_group;",
        "cp.async.wait_group 2;",
        "cp.async.wait_all;",
        "cp.async.mbarrier.arrive.shared.b64 [%mbar_base];",
        "cp.async.mbarrier.arrive.noinc.shared.b64 [%mbar_base];",
    ]
    m = k.module()
    assert str(m.version) == "7.0"
    pf.assemble(m)


def test_cp_async_needs_sm80():
    # sm_80 is the oldest target ptxforge knows; the requirement is still recorded on the form
    k, g, s, _ = kernel()
    k.cp_async(s, g, 16)
    ins = k.finish().instructions[SETUP]
    assert ins.req.min_sm == 80 and str(ins.req.min_ptx) == "7.0"
    assert ins.info.cp_size == 16 and ins.info.cache == "cg"


# ---------------------------------------------------------------- validation

def test_two_bytes_is_refused_at_the_users_line():
    k, g, s, _ = kernel()
    with pytest.raises(pf.ValidationError) as info:
        k.cp_async(s, g, 2)  # <- two-bytes
    assert "cp.async copies 4, 8 or 16 bytes, not 2" in str(info.value)
    assert "counts bytes" in str(info.value)
    assert_located(info.value, "<- two-bytes", HERE)


def test_cg_with_eight_bytes_is_refused():
    k, g, s, _ = kernel()
    with pytest.raises(pf.ValidationError) as info:
        k.cp_async(s, g, 8, cache="cg")  # <- cg-eight
    assert "cp.async.cg copies exactly 16 bytes, not 8" in str(info.value)
    assert_located(info.value, "<- cg-eight", HERE)


def test_src_size_larger_than_cp_size_is_refused():
    k, g, s, _ = kernel()
    with pytest.raises(pf.ValidationError) as info:
        k.cp_async(s, g, 8, src_size=9)  # <- src-size-9
    assert "src-size 9 is outside 0..8" in str(info.value)
    assert_located(info.value, "<- src-size-9", HERE)


@pytest.mark.parametrize("line, message", [
    ("cp.async.ca.shared.global [%r0], [%rd0], 2;", "expected to be 4 or 8 or 16"),
    ("cp.async.cg.shared.global [%r0], [%rd0], 8;", "expected to be 16"),
    ("cp.async.ca.shared.global [%r0], [%rd0], 8, 9;", "out of range"),
    ("cp.async.ca.shared.global [%r0], [%rd0], 32;", "expected to be 4 or 8 or 16"),
])
def test_ptxas_refuses_the_same_cp_async_mistakes(line, message):
    assert message in assembler_verdict(raw_kernel(line))


def test_ptxas_accepts_the_corrected_forms():
    ok = ["cp.async.ca.shared.global [%r0], [%rd0], 4;", "cp.async.cg.shared.global [%r0], [%rd0], 16;",
          "cp.async.ca.shared.global [%r0], [%rd0], 8, 8;"]
    assert assembler_verdict(raw_kernel("\n".join(ok))) is None


@pytest.mark.parametrize("kwargs, match", [
    ({"src_size": 4, "ignore_src": "pred"}, "either src-size"),
    ({"cache": "cs"}, "must be .ca or .cg"),
    ({"prefetch": "L2::512B"}, "prefetch must be one of"),
])
def test_other_refusals(kwargs, match):
    k, g, s, _ = kernel()
    if kwargs.get("ignore_src") == "pred":
        kwargs["ignore_src"] = k.reg(pf.pred)
    with pytest.raises(pf.ValidationError, match=match):
        k.cp_async(s, g, 16, **kwargs)


def test_known_misalignment_is_refused():
    k, g, s, _ = kernel()
    with pytest.raises(pf.ValidationError, match="not a multiple of 16"):
        k.cp_async(Addr(s, 8), g, 16)
    with pytest.raises(pf.ValidationError, match="not a multiple of 8"):
        k.cp_async(s, Addr(g, 4), 8)
    small = k.shared("small", 64, align=4)
    with pytest.raises(pf.ValidationError, match="only 4-byte aligned"):
        k.cp_async(small, g, 8)


def test_source_must_be_a_64_bit_global_address():
    k, g, s, _ = kernel()
    with pytest.raises(pf.ValidationError, match="64-bit"):
        k.cp_async(s, k.reg(u32), 16)


def test_createpolicy_checks():
    k, *_ = kernel()
    with pytest.raises(pf.ValidationError, match="priority"):
        k.createpolicy("L2::evict_sometimes")
    with pytest.raises(pf.ValidationError, match="fraction"):
        k.createpolicy("L2::evict_first", 1.5)
    with pytest.raises(pf.ValidationError, match="non-negative"):
        k.cp_async_wait(-1)


# ---------------------------------------------------------------- bulk copies (sm_90)

def test_bulk_and_tensor_copies_render_and_assemble_for_sm90():
    k, g, s, mbar = kernel("sm_90")
    tmap = k.param_address(k.param("tmap", b8, nbytes=128, align=64))
    n, x, y = k.reg(u32, "n"), k.reg(s32, "x"), k.reg(s32, "y")
    k.bulk_copy(s, g, 4096, mbar)
    k.bulk_copy(s, g, n, mbar)
    k.tensor_load(s, tmap, [x, y], mbar)
    k.tensor_load(s, tmap, [x, 0, 7], mbar)
    k.tensor_store(tmap, [x, y], s)
    k.bulk_commit()
    k.bulk_wait(0, read=True)
    k.bulk_wait(1)
    assert emitted(k, SETUP + 2) == [
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%s_base], [%g], 0x1000, [%mbar_base];",
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%s_base], [%g], %n, [%mbar_base];",
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%s_base], "
        "[%rd0, {%x, %y}], [%mbar_base];",
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%s_base], "
        "[%rd0, {%x, 0, 7}], [%mbar_base];",
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd0, {%x, %y}], [%s_base];",
        "cp.async.bulk.commit_group;",
        "cp.async.bulk.wait_group.read 0;",
        "cp.async.bulk.wait_group 1;",
    ]
    m = k.module()
    assert str(m.version) == "8.0"
    pf.assemble(m)


def test_bulk_copies_are_refused_before_sm90():
    k, g, s, mbar = kernel("sm_80")
    with pytest.raises(pf.TargetError) as info:
        k.bulk_copy(s, g, 1024, mbar)  # <- bulk-on-sm80
    assert "needs sm_90 or newer; the kernel targets sm_80" in str(info.value)
    assert_located(info.value, "<- bulk-on-sm80", HERE)
    line = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r0], [%rd0], 1024, [%r1];"
    assert assembler_verdict(raw_kernel(line, "sm_80")) is not None
    assert assembler_verdict(raw_kernel(line, "sm_90")) is None


def test_bulk_size_must_be_a_multiple_of_16():
    k, g, s, mbar = kernel("sm_90")
    with pytest.raises(pf.ValidationError, match="multiple of 16"):
        k.bulk_copy(s, g, 24, mbar)
    with pytest.raises(pf.ValidationError, match="1 to 5 coordinates"):
        k.tensor_load(s, k.reg(pf.u64), [0] * 6, mbar)
