"""Hopper on the H200 against the interpreter: wgmma forms and layouts (a Hypothesis sample), a wrong
descriptor, the TMA copy (swizzled image and ragged edges) and the wgmma tile example.  Integer and
data-movement results must be bit-identical; float results (small exact values) agree with numpy.

    PTXFORGE_REQUIRE_GPU=1 HYPOTHESIS_PROFILE=gpu python -m pytest -q tests/test_hopper_gpu.py
"""

import numpy as np
import pytest
from hypothesis import Phase, given, settings

import ptxforge as pf
from ptxforge import interp
from ptxforge.hopper.layout import SmemTile
from ptxforge.isa.wgmma import wgmma_form
from ptxforge.testing.interp_strategies import seeds
from ptxforge.testing.wgmma_probe import wgmma_case
from ptxforge.testing.wgmma_strategies import wgmma_probe_specs

from support.examples import load_example

pytestmark = pytest.mark.gpu


def _both(case):
    gpu = [a.copy() if isinstance(a, np.ndarray) else a for a in case.args]
    cpu = [a.copy() if isinstance(a, np.ndarray) else a for a in case.args]
    m = case.kernel.module()
    pf.load(m)[m.kernels[0].name](1, 128, *gpu)
    interp.run(m, block=128, args=cpu)
    return gpu[6], cpu[6]


def _same(case, gpu, cpu):
    if case.form.is_integer:
        np.testing.assert_array_equal(gpu, cpu)
    else:
        f = np.float16 if case.form.d_type.name == "f16" else np.float32
        g, c = gpu.view(f).astype(np.float64), cpu.view(f).astype(np.float64)
        np.testing.assert_allclose(g, c, rtol=2 ** -10, atol=2 ** -8)
    np.testing.assert_array_equal(cpu, case.expected())


@settings(max_examples=25, deadline=None, phases=(Phase.explicit, Phase.generate))  # no shrinking on the device
@given(spec=wgmma_probe_specs(), seed=seeds())
def test_wgmma_forms_and_layouts_match_the_interpreter(spec, seed):
    form = spec.pop("form")
    case = wgmma_case(form, np.random.default_rng(seed), **spec)
    gpu, cpu = _both(case)
    _same(case, gpu, cpu)


@pytest.mark.parametrize("b_major, swz", [("K", 0), ("K", 32), ("K", 64), ("K", 128), ("MN", 0), ("MN", 32),
                                          ("MN", 64), ("MN", 128)])
@pytest.mark.parametrize("rs", [False, True], ids=["SS", "RS"])
def test_every_swizzle_and_major_for_bf16(b_major, swz, rs):
    case = wgmma_case(wgmma_form(64, "bf16"), np.random.default_rng(1), rs=rs, a_major="K" if rs else b_major,
                      b_major=b_major, swizzle_a=0 if rs else swz, swizzle_b=swz, scale_d=1)
    gpu, cpu = _both(case)
    _same(case, gpu, cpu)


@pytest.mark.parametrize("claimed", [0, 32, 64])
def test_a_wrong_descriptor_gives_the_same_wrong_numbers(claimed):
    case = wgmma_case(wgmma_form(64, "s8"), np.random.default_rng(3), swizzle_b=128)
    wrong = SmemTile("s8", 64, 128, "K", claimed)
    case.args[4] = np.array([wrong.descriptor(0, s) for s in range(4)], dtype=np.uint64)
    gpu, cpu = _both(case)
    np.testing.assert_array_equal(gpu, cpu)


def test_tma_copy_matches_the_interpreter_bit_for_bit():
    ex = load_example("hopper_tma_copy")
    g_dst, g_dump, src, corner = ex.run_gpu(200, 152, stages=3, grid=2)
    c_dst, c_dump, c_src, c_corner = ex.run_cpu(200, 152, stages=3, grid=2)
    np.testing.assert_array_equal(src, c_src)
    np.testing.assert_array_equal(g_dst, src)
    np.testing.assert_array_equal(g_dump, c_dump)
    np.testing.assert_array_equal(g_dump.view(np.uint8), ex.swizzled_box(src, *corner))
    big_dst, _, big_src, _ = ex.run_gpu(4096 + 37, 2048 + 24, stages=4)
    np.testing.assert_array_equal(big_dst, big_src)


@pytest.mark.parametrize("dtype", ["s8", "bf16"])
@pytest.mark.parametrize("rs", [False, True], ids=["SS", "RS"])
def test_wgmma_tile_matches_numpy_and_the_interpreter(dtype, rs):
    ex = load_example("hopper_wgmma_tile")
    got, want = ex.run_gpu(dtype, rs, n=64, m=128, n_total=64, kk=256)
    cpu, _ = ex.run_cpu(dtype, rs, n=64, kk=256)
    np.testing.assert_array_equal(got, cpu)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))
    got, want = ex.run_gpu(dtype, rs, n=256, m=512, n_total=512, kk=512)
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


def _b_seen_under(case, phase):
    """The B matrix (element bits) wgmma reads from the probe's B image if the swizzle row of each
    address were phase(addr, start, base_offset, mask): one candidate reading of the base offset."""
    from ptxforge.isa.descriptors import decode_descriptor, descriptor_address_linear, swizzle_mode
    img = case.args[1]
    cols = []
    for d in case.args[4]:
        f = decode_descriptor(int(d))
        r = np.arange(case.form.n, dtype=np.int64)[:, None]
        c = np.arange(32, dtype=np.int64)[None, :]
        a = descriptor_address_linear(f, "K", 8, r, c)
        mask = (1 << swizzle_mode(f.swizzle).xor_bits) - 1
        cols.append(img[a ^ (phase(a, f.start_addr, f.base_offset) & mask) << 4].astype(np.uint32))
    return np.concatenate(cols, axis=1)


_BASE_OFFSET_READINGS = {
    "absolute row - base offset (the interpreter's)": lambda a, s, bo: (a >> 7) - bo,
    "start row + base offset": lambda a, s, bo: (a >> 7) - (s >> 7) + bo,
    "absolute row, base offset ignored": lambda a, s, bo: a >> 7,
}


@pytest.mark.parametrize("swz", [32, 64, 128])
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("set_isa", [False, True], ids=["base_offset_0", "isa_base_offset"])
def test_descriptor_base_offset_matches_the_interpreter_bit_for_bit(swz, rows, set_isa):
    """A B tile placed `rows` x 128 bytes into its 1024-aligned buffer (swizzled on absolute addresses),
    descriptors with base offset 0 (what SmemTile gives) or with the PTX ISA's (start >> 7) & 7 set:
    s8, so GPU and interpreter must agree bit for bit.  On a mismatch the message names the reading
    of the field that the GPU follows."""
    case = wgmma_case(wgmma_form(64, "s8"), np.random.default_rng(20 + rows), swizzle_b=swz, b_offset=128 * rows)
    if set_isa:
        case.args[4] = np.array([int(d) | (((int(d) & 0x3FFF) << 4 >> 7) & 7) << 49 for d in case.args[4]],
                                dtype=np.uint64)
    gpu, cpu = _both(case)
    if not np.array_equal(gpu, cpu):
        follows = []
        for name, phase in _BASE_OFFSET_READINGS.items():
            alt = wgmma_case(wgmma_form(64, "s8"), np.random.default_rng(20 + rows), swizzle_b=swz,
                             b_offset=128 * rows)
            alt.args[4] = case.args[4]
            alt.B = _b_seen_under(alt, phase)
            if np.array_equal(gpu, alt.expected()):
                follows.append(name)
        pytest.fail(f"the GPU reads a base-offset descriptor differently from the interpreter; it follows: "
                    f"{follows or 'none of the candidate readings'}")
