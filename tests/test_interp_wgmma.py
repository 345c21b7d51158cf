"""The interpreter's wgmma against numpy: every form (sampled), A from registers and from shared
memory, both majors, every swizzle; descriptors decoded bit for bit; the accumulator and
async-proxy hazards are reported with the instruction and its Python line."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ptxforge as pf
from ptxforge import interp
from ptxforge.hopper.layout import SmemTile
from ptxforge.isa.descriptors import encode_descriptor
from ptxforge.isa.wgmma import WGMMA_FORMS, wgmma_form
from ptxforge.testing.interp_strategies import seeds
from ptxforge.testing.wgmma_probe import wgmma_case
from ptxforge.testing.wgmma_strategies import wgmma_probe_specs


def _run(case, **kw):
    return interp.run(case.kernel, block=128, args=case.args, **kw)


@settings(max_examples=60, deadline=None)
@given(spec=wgmma_probe_specs(), seed=seeds())
def test_every_form_layout_and_swizzle_matches_numpy(spec, seed):
    form = spec.pop("form")
    case = wgmma_case(form, np.random.default_rng(seed), **spec)
    _run(case)
    np.testing.assert_array_equal(case.out, case.expected())


@pytest.mark.parametrize("combo", sorted({(f.a_type.name, f.b_type.name, f.d_type.name) for f in WGMMA_FORMS}),
                         ids=".".join)
@pytest.mark.parametrize("rs", [False, True], ids=["SS", "RS"])
def test_each_type_combination_at_the_largest_n(combo, rs):
    form = max((f for f in WGMMA_FORMS if (f.a_type.name, f.b_type.name, f.d_type.name) == combo),
               key=lambda f: f.n)
    case = wgmma_case(form, np.random.default_rng(7), rs=rs, swizzle_a=0 if rs else 128, swizzle_b=128,
                      scale_d=1)
    _run(case)
    np.testing.assert_array_equal(case.out, case.expected())


@pytest.mark.parametrize("claimed", [0, 32, 64])
def test_a_wrong_swizzle_in_the_descriptor_reads_what_that_swizzle_addresses(claimed):
    """Image laid out with 128-byte swizzle, descriptor claims another: the interpreter reads the
    bytes the claimed layout names (as a GPU does), not the intended matrix."""
    form = wgmma_form(64, "s8")
    rng = np.random.default_rng(3)
    case = wgmma_case(form, rng, swizzle_b=128)
    wrong = SmemTile("s8", 64, 128, "K", claimed)
    case.args[4] = np.array([wrong.descriptor(0, s) for s in range(4)], dtype=np.uint64)
    _run(case)
    right = case.expected()
    img = case.args[1]
    seen = img[wrong.element_offsets()].astype(np.uint32)  # what the wrong layout names as B
    case.B = seen.reshape(64, 128)
    np.testing.assert_array_equal(case.out, case.expected())
    assert not np.array_equal(case.out, right)


def test_swapped_lbo_and_sbo_are_caught():
    """No swizzle, K-major: LBO is the K-adjacent core stride (here the 1024-byte atom), SBO the
    8-row stride (128).  Swapped, the 8-row groups land 1024 bytes apart, past the 2 KB tile."""
    form = wgmma_form(64, "s8")
    case = wgmma_case(form, np.random.default_rng(4))
    f = SmemTile("s8", 64, 32, "K", 0).decode(int(case.args[4][0]))
    assert (f.leading_byte_offset, f.stride_byte_offset) == (1024, 128)
    case.args[4] = np.array([encode_descriptor(0, 128, 1024, 0)], np.uint64)
    with pytest.raises(interp.InterpError, match=r"\[oob\].*past the end of 'sB'"):
        _run(case)


def test_missing_proxy_fence_is_reported():
    case = wgmma_case(wgmma_form(64, "s8"), np.random.default_rng(5), fence=False)
    with pytest.raises(interp.InterpError, match=r"\[proxy\].*fence.proxy.async") as info:
        _run(case)
    f = info.value.findings[0]
    assert f.instruction.opcode == "wgmma" and f.other.opcode == "st"
    assert f.loc is not None and f.loc.filename == __file__  # the user line that built the kernel


def test_reading_accumulators_before_the_wait_is_reported():
    case = wgmma_case(wgmma_form(32, "bf16"), np.random.default_rng(6), rs=True, wait=False)
    with pytest.raises(interp.InterpError, match=r"\[wgmma\].*has not been waited") as info:
        _run(case)
    f = info.value.findings[0]
    assert f.instruction.opcode == "st" and f.other.opcode == "wgmma"
    # and the same kernel with the wait in place is clean and right
    ok = wgmma_case(wgmma_form(32, "bf16"), np.random.default_rng(6), rs=True)
    _run(ok)
    np.testing.assert_array_equal(ok.out, ok.expected())


def test_part_of_a_warpgroup_is_reported():
    k = pf.KernelBuilder("wg", target="sm_90a", reqntid=128)
    d = k.regs(pf.b32, 4, "d")
    tid = k.tid()
    with k.if_(k.setp("lt", tid, 64)):
        k.wgmma(k.regs(pf.b32, 4, "a"), k.mov(0, type=pf.b64), d, n=8, a_type="f16", scale_d=0)
    with pytest.raises(interp.InterpError, match="part of a warpgroup"):
        interp.run(k, block=128)


def test_descriptor_outside_shared_memory_is_reported():
    case = wgmma_case(wgmma_form(64, "s8"), np.random.default_rng(8))
    case.args[4] = case.args[4] + np.uint64(3000)  # start address moved 48 KB further
    with pytest.raises(interp.InterpError, match=r"\[oob\].*matrix descriptor"):
        _run(case)


def test_rewriting_an_operand_before_the_wait_is_reported():
    case = wgmma_case(wgmma_form(64, "s8"), np.random.default_rng(9), overwrite_b=True)
    with pytest.raises(interp.InterpError, match=r"\[async\].*wgmma.mma_async may still be reading") as info:
        _run(case)
    f = info.value.findings[0]
    assert f.instruction.opcode == "st" and f.other.opcode == "wgmma"


@settings(max_examples=30, deadline=None)
@given(spec=wgmma_probe_specs(), seed=seeds(), a_rows=st.integers(0, 7), b_rows=st.integers(0, 7))
def test_tiles_off_their_swizzle_pattern_are_read_through_the_base_offset(spec, seed, a_rows, b_rows):
    """Tiles written at a 128-byte boundary inside their pattern (swizzled on absolute addresses), descriptors
    with base offset 0 (wgmma swizzles absolute rows, as TMA does): the interpreter reads the intended
    matrices."""
    form = spec.pop("form")
    case = wgmma_case(form, np.random.default_rng(seed), a_offset=128 * a_rows, b_offset=128 * b_rows, **spec)
    assert (int(case.args[4][0]) >> 49) & 7 == 0
    _run(case)
    np.testing.assert_array_equal(case.out, case.expected())


@pytest.mark.parametrize("swz", [32, 64, 128])
def test_a_non_zero_base_offset_off_the_pattern_reads_other_bytes(swz):
    """The same tile at 384 bytes with base offset 3 set: rows are phased as (absolute row - 3), i.e. as
    if the tile were at 0, so the interpreter reads those bytes, not the matrix."""
    form = wgmma_form(64, "s8")
    case = wgmma_case(form, np.random.default_rng(11), swizzle_b=swz, b_offset=384)
    right = case.expected()
    tile = SmemTile("s8", 64, case.B.shape[1], "K", swz)
    ks = tile.k_slices
    case.args[4] = np.array([int(d) | (3 << 49) for d in case.args[4]], dtype=np.uint64)
    _run(case)
    img = case.args[1]
    seen = img[384 + tile.element_offsets(0)].astype(np.uint32)  # rows phased as at address 0
    case.B = seen.reshape(64, -1)
    np.testing.assert_array_equal(case.out, case.expected())
    assert not np.array_equal(case.out, right) and ks >= 1