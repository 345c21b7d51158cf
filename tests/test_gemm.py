"""The integer GEMM schedules on the CPU: validation, paths per target, assembly, SASS, addressing."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxforge as pf
from ptxforge.assembler import disassembler
from ptxforge.errors import ValidationError
from ptxforge.schedules.gemm import Int4Gemm, Int8Gemm
from ptxforge.schedules.gemm.addressing import layout_offsets
from ptxforge.schedules.gemm.config import SCALED_K_LIMIT
from ptxforge.schedules.gemm.copy import copy_geometry
from ptxforge.schedules.gemm.fragments import plan_a_fragments, plan_b_fragments
from ptxforge.copy.layout import SmemLayout
from ptxforge.testing.gemm_strategies import gemm_schedules

needs_sass = pytest.mark.skipif(disassembler() is None, reason="no nvdisasm/cuobjdump (pip install "
                                                                 "nvidia-cuda-nvdisasm)")


# ---------------------------------------------------------------- the reference configuration

def test_reference_configuration():
    g = Int4Gemm()
    assert (g.block_m, g.block_n, g.block_k, g.stages, g.threads) == (128, 128, 64, 3, 128)
    assert (g.warp_m, g.warp_n, g.accumulators) == (64, 64, 128)
    assert g.target == pf.Target.parse("sm_90") and g.path_name == "s8_scaled"
    assert g.block == (128, 1, 1)
    # 3 stages of (128 + 128) rows x 32 bytes
    assert g.shared_bytes == 3 * 256 * 32
    assert g.grid(1024, 1024) == (64, 1, 1)
    assert Int4Gemm(raster_group=1).grid(1000, 300) == (3, 8, 1)


def test_emission_is_deterministic():
    assert str(Int4Gemm().emit()) == str(Int4Gemm().emit())


def test_path_is_visible_in_the_listing_header():
    ptx = Int4Gemm().ptx()
    assert "compute path = s8_scaled" in ptx
    assert "no 4-bit tensor-core instruction" in ptx
    assert "compute path = native_s4" in Int4Gemm(target="sm_80").ptx()


@pytest.mark.parametrize("operand, target, path", [
    ("s4", "sm_80", "native_s4"), ("s4", "sm_86", "native_s4"), ("s4", "sm_89", "native_s4"),
    ("s4", "sm_90", "s8_scaled"), ("u4", "sm_80", "native_u4"), ("u4", "sm_90", "u8"),
])
def test_default_path_per_target(operand, target, path):
    assert Int4Gemm(operand=operand, target=target).path_name == path


def test_int8_paths():
    assert Int8Gemm().path_name == "s8"
    assert Int8Gemm(operand="u8").path_name == "u8"
    assert Int8Gemm(target="sm_80").path_name == "s8"


def test_reference_kernel_assembles_for_sm80_and_sm90():
    g = Int4Gemm()
    for arch in ("sm_80", "sm_90"):
        rep = g.retarget(arch).assemble()
        assert rep.spills == 0 and rep.resources.stack == 0
        assert 64 < rep.registers <= 255
        assert rep.ctas_per_sm >= 1
        assert arch in str(rep)
    assert g.retarget("sm_80").assemble().schedule.path_name == "native_s4"


# ---------------------------------------------------------------- SASS

@needs_sass
def test_sm90_default_path_uses_s8_tensor_cores_and_no_emulation():
    ops = Int4Gemm().assemble().sass_opcodes()
    assert ops["IMMA.16832.S8.S8"] == 64  # 4x8 m16n8 blocks x 2 nibble halves, one k-step per k-tile
    assert not [o for o in ops if o.startswith("CALL")]
    assert ops["LDSM.16.M88.4"] == 8
    assert ops["LDGSTS.E.BYPASS.128"] > 0


@needs_sass
def test_sm80_native_path_uses_s4_tensor_cores():
    ops = Int4Gemm(target="sm_80").assemble().sass_opcodes()
    assert ops["IMMA.16864.S4.S4"] == 32
    assert not [o for o in ops if o.startswith("CALL")]


@needs_sass
def test_native_s4_on_sm90_warns_and_still_assembles():
    g = Int4Gemm(path="native_s4", block_m=64, block_n=64)
    with pytest.warns(pf.EmulatedInstructionWarning, match="software routine"):
        g.emit()  # emission warns (the module `assemble` uses is kept per schedule, so emit afresh)
    with warnings.catch_warnings():  # assemble emits the module it keeps once more, saying the same
        warnings.simplefilter("ignore", pf.EmulatedInstructionWarning)
        rep = g.assemble()
    assert "emulated" in g.path_reason
    assert any(o.startswith("CALL") for o in rep.sass_opcodes())


@needs_sass
@settings(max_examples=6)
@given(gemm_schedules(targets=("sm_90",), operands=("s4",), max_acc=128))
def test_sm90_default_4bit_path_never_calls_an_emulation_routine(g):
    g = Int4Gemm(**{**_params(g), "path": None})
    ops = g.assemble().sass_opcodes()
    assert not [o for o in ops if o.startswith("CALL")]
    assert ops["IMMA.16832.S8.S8"] > 0


def _params(g):
    import dataclasses
    return {f.name: getattr(g, f.name) for f in dataclasses.fields(g)}


# ---------------------------------------------------------------- every legal schedule assembles

@given(gemm_schedules())
def test_every_legal_schedule_assembles_without_spills(g):
    rep = g.assemble()
    assert rep.spills == 0, str(rep)
    assert rep.registers <= 255
    assert rep.resources.stack == 0


@settings(max_examples=8)
@given(gemm_schedules(targets=("sm_90",), max_acc=128, max_threads=512))
def test_large_warp_tiles_assemble_without_spills(g):
    rep = g.assemble()
    assert rep.spills == 0, str(rep)


# ---------------------------------------------------------------- validation

@pytest.mark.parametrize("kwargs, msg", [
    (dict(block_m=120), "multiple of 16"),
    (dict(block_n=136, warps_n=2), "multiple of 16"),
    (dict(block_n=100, warps_n=8, warps_m=1), "does not split"),
    (dict(block_k=96), "power of two"),
    (dict(block_k=32), "multiple of 64"),
    (dict(stages=1), "at least 2 stages"),
    (dict(warps_m=8, warps_n=8, block_m=512, block_n=512), "at most 1024 threads"),
    (dict(warps_m=3), "power of two"),
    (dict(block_m=256, block_n=128, warps_m=2, warps_n=2), "accumulator registers"),
    (dict(block_k=1024, stages=8), "shared memory"),
    (dict(smem_layout="banana"), "smem_layout"),
    (dict(path="s8"), "does not take .s4"),
    (dict(path="nope"), "unknown compute path"),
    (dict(operand="s8"), "Int8Gemm"),
    (dict(copy_bytes=3), "copy_bytes"),
    (dict(target="sm_70"), "not supported"),
])
def test_validation_errors(kwargs, msg):
    with pytest.raises(pf.PtxforgeError, match=msg):
        Int4Gemm(**kwargs)


def test_shared_memory_limit_names_the_bytes():
    with pytest.raises(ValidationError, match=r"need \d+ bytes of shared memory; sm_86 allows at most 101376"):
        Int4Gemm(block_m=256, block_n=128, warps_m=4, warps_n=2, block_k=256, stages=4, target="sm_86")
    # the same tiles fit the H200
    assert Int4Gemm(block_m=256, block_n=128, warps_m=4, warps_n=2, block_k=256, stages=4).shared_bytes == 196608


def test_int8_validation():
    with pytest.raises(ValidationError, match="Int4Gemm"):
        Int8Gemm(operand="s4")
    with pytest.raises(ValidationError, match="does not take .s8"):
        Int8Gemm(path="s8_scaled")
    with pytest.raises(ValidationError, match="multiple of 32"):
        Int8Gemm(block_k=16)


def test_problem_checks():
    g = Int4Gemm()
    with pytest.raises(ValidationError, match="odd"):
        g.check_problem(4, 4, 33)
    with pytest.raises(ValidationError, match="s8_signext"):
        g.check_problem(4, 4, SCALED_K_LIMIT)
    with pytest.raises(ValidationError, match="M must be"):
        g.check_problem(0, 4, 64)
    Int4Gemm(path="s8_signext").check_problem(4, 4, SCALED_K_LIMIT)
    Int8Gemm().check_problem(3, 5, 7)  # any K for 8-bit operands


# ---------------------------------------------------------------- variants per problem

@pytest.mark.parametrize("k, width", [(1024, 16), (64, 16), (48, 8), (40, 4), (36, 2), (34, 1), (2, 1)])
def test_copy_width_follows_k(k, width):
    assert Int4Gemm().for_problem(k).copy_bytes == width


def test_copy_width_follows_alignment_and_int8_rows():
    assert Int4Gemm().for_problem(1024, align=8).copy_bytes == 8
    assert Int8Gemm().for_problem(24).copy_bytes == 8
    assert Int8Gemm().for_problem(7).copy_bytes == 1
    assert Int4Gemm(copy_bytes=4).for_problem(1024).copy_bytes == 4  # never wider than asked


def test_odd_n_stores_single_values():
    assert Int4Gemm().for_problem(64, 7).c_vector == 1
    assert Int4Gemm().for_problem(64, 8).c_vector == 2
    assert Int4Gemm().for_problem(64, 8, c_align=4).c_vector == 1


def test_large_k_switches_the_default_path_to_exact_sign_extension():
    assert Int4Gemm().for_problem(SCALED_K_LIMIT).path_name == "s8_signext"
    assert Int4Gemm().for_problem(SCALED_K_LIMIT - 32).path_name == "s8_scaled"
    assert Int4Gemm(target="sm_80").for_problem(SCALED_K_LIMIT).path_name == "native_s4"


@pytest.mark.parametrize("m, n, k", [(1024, 1024, 1024), (8192, 8192, 8192), (32, 8192, 8192), (128, 8192, 8192),
                                     (5, 7, 34)])
def test_for_shape_gives_a_legal_schedule_that_fills_the_gpu(m, n, k):
    g = Int4Gemm.for_shape(m, n, k, target="sm_90")  # the mma.sync configuration (no GPU decides it)
    ctas = g.grid(m, n)[0] * g.grid(m, n)[1]
    if m * n >= 1024 * 1024:
        assert ctas >= 100, g.describe()
    if m <= 64:
        assert g.block_m <= 32
    assert g.for_problem(k, n) == g


# ---------------------------------------------------------------- addressing: writers and readers agree

@pytest.mark.parametrize("kind", ["swizzle", "padded"])
@pytest.mark.parametrize("g", [Int4Gemm(), Int4Gemm(block_k=256, block_m=256, warps_m=4, warps_n=2),
                               Int8Gemm(block_k=128, block_m=64, block_n=32, warps_m=2, warps_n=1),
                               Int4Gemm(block_m=16, block_n=64, warps_m=1, warps_n=4, copy_bytes=1)])
def test_ldmatrix_reads_what_the_copies_wrote(g, kind):
    import dataclasses
    g = dataclasses.replace(g, smem_layout=kind)
    la, lb = g.layouts
    for rows, layout, region, fam in (
            (g.block_m, la, 0, plan_a_fragments(la, 0, g.threads, g.warps_m, g.warp_m, g.ksteps)),
            (g.block_n, lb, la.nbytes, plan_b_fragments(lb, la.nbytes, g.threads, g.warps_m, g.warp_n, g.ksteps))):
        # the shared image after the copies: each byte tagged with its (row, byte) in the tile
        image = -np.ones(g.stage_bytes, np.int64)
        row0, byte0, rs, cs = copy_geometry(rows, layout.row_bytes, g.threads)
        total = rows * layout.row_bytes // 16
        written = 0
        for tid in range(g.threads):
            for j, (r, c) in enumerate(zip(rs, cs)):
                if tid + j * g.threads >= total:
                    continue
                row, byte = row0[tid] + r, byte0[tid] + c
                off = region + int(layout_offsets(layout, np.array(row), np.array(byte)))
                for x in range(16):
                    assert image[off + x] == -1, "two copies write one byte"
                    image[off + x] = row * 1000 + byte + x
                    written += 1
        assert written == rows * g.row_bytes_k
        # every lane of every ldmatrix reads 16 bytes of one row, starting at the byte it asks for;
        # and the planner's base register + immediate gives the same address
        orow, obyte = _origin(g, "a" if region == 0 else "b")
        for (r, c), acc in zip(fam.consts, fam.accesses):
            got = region + layout_offsets(layout, orow + r, obyte + c)
            br, bc = fam.base_consts[acc.base]
            assert np.array_equal(got, region + layout_offsets(layout, orow + br, obyte + bc) + acc.imm)
            for lane_off, row, byte in zip(got, orow + r, obyte + c):
                assert image[lane_off:lane_off + 16].tolist() == [row * 1000 + byte + x for x in range(16)]


def _origin(g, rows_kind):
    """(row, byte) of every thread's first ldmatrix address, as gemm_fragments lays them out."""
    tid = np.arange(g.threads)
    warp, lane = tid // 32, tid % 32
    if rows_kind == "a":
        return (warp % g.warps_m) * g.warp_m + lane % 16, (lane // 16) * 16
    return (warp // g.warps_m) * g.warp_n + lane % 8 + 8 * (lane // 16), ((lane // 8) % 2) * 16


def test_swizzle_makes_ldmatrix_phases_conflict_free():
    # eight lanes of one 8x8 matrix must hit eight different 16-byte bank groups
    for g in (Int4Gemm(), Int4Gemm(block_k=128), Int4Gemm(block_k=256), Int8Gemm(block_k=128)):
        la, lb = g.layouts
        fam = plan_a_fragments(la, 0, g.threads, g.warps_m, g.warp_m, g.ksteps)
        row0, byte0 = _origin(g, "a")
        for r, c in fam.consts:
            off = layout_offsets(la, row0 + r, byte0 + c)
            for phase in range(4):
                lanes = off[:32][phase * 8:(phase + 1) * 8]
                assert len({(o // 16) % 8 for o in lanes}) == 8


def test_layout_offsets_match_smemlayout():
    for kind in ("swizzle", "padded"):
        for rb in (32, 64, 128, 256):
            lay = SmemLayout(64, rb, kind)
            rows, cols = np.meshgrid(np.arange(64), np.arange(rb), indexing="ij")
            got = layout_offsets(lay, rows, cols)
            assert all(got[r, c] == lay.byte_offset(r, c) for r in range(0, 64, 7) for c in range(0, rb, 5))


# ---------------------------------------------------------------- instruction mix

def test_main_loop_instruction_mix():
    mix = Int4Gemm().instruction_mix()
    assert mix["mma"] == 64 and mix["ldmatrix"] == 8
    assert mix["cp.async"] == 4 * 3  # 2 A + 2 B copies per thread per k-tile; prologue of 2 + loop
    assert Int4Gemm(target="sm_80").instruction_mix()["mma"] == 32
    assert Int4Gemm(path="s8_signext").instruction_mix()["mma"] == 64


def test_listing_maps_lines_to_python():
    text = Int4Gemm().listing()
    assert "gemm/fragments.py" in text and "gemm/copy.py" in text


@given(st.sampled_from([Int4Gemm(), Int4Gemm(operand="u4"), Int8Gemm()]))
def test_kernel_parameters(g):
    k = g.module.kernels[0]
    assert [p.name for p in k.params] == ["a", "b", "c", "m", "n", "k"]
    assert k.block_limit == ("reqntid", (g.threads, 1, 1))


# ---------------------------------------------------------------- small GEMMs through the CPU interpreter

interp = pytest.importorskip("ptxforge.interp")


def _operands(g, m, n, k, rng, extremes=False):
    from ptxforge.int4 import pack_int4, random_int4
    if g.bits == 4:
        signed = g.operand == "s4"
        av = random_int4((m, k), rng, signed=signed, extremes=extremes)
        bv = random_int4((n, k), rng, signed=signed, extremes=extremes)
        return pack_int4(av, signed=signed), pack_int4(bv, signed=signed)
    lo, hi = (-128, 127) if g.operand == "s8" else (0, 255)
    dt = np.int8 if g.operand == "s8" else np.uint8
    if extremes:
        return rng.choice(np.array([lo, hi]), (m, k)).astype(dt), rng.choice(np.array([lo, hi]), (n, k)).astype(dt)
    return rng.integers(lo, hi + 1, (m, k)).astype(dt), rng.integers(lo, hi + 1, (n, k)).astype(dt)


def run_on_interpreter(g, m, n, k, seed, extremes=False):
    rng = np.random.default_rng(seed)
    a, b = _operands(g, m, n, k, rng, extremes)
    v = g.for_problem(k, n)
    c = np.full((m, n), -0x5A5A5A5A, np.int32)  # poison: every element must be written
    rep = interp.run(v.module, grid=v.grid(m, n), block=v.block, args=[a, b, c, m, n, k], shared=v.shared_bytes)
    assert rep.ok, str(rep)  # also: no races, no early reads of cp.async data, no out-of-bounds access
    want = g.reference(a, b, k)
    assert np.array_equal(c.astype(np.int64), want), f"{v.kernel_name} {m}x{n}x{k}: " \
        f"{int((c != want).sum())} wrong elements"


@pytest.mark.parametrize("g, shape", [
    (Int4Gemm(), (64, 64, 128)),
    (Int4Gemm(), (130, 70, 96)),
    (Int4Gemm(target="sm_80"), (64, 64, 128)),
    (Int4Gemm(path="s8_signext", block_m=32, block_n=32, warps_m=1, warps_n=1), (40, 50, 192)),
    (Int4Gemm(operand="u4", block_m=32, block_n=32, warps_m=1, warps_n=1), (33, 17, 128)),
    (Int8Gemm(block_m=32, block_n=64, warps_m=1, warps_n=2), (30, 45, 100)),
    (Int8Gemm(operand="u8", block_m=32, block_n=32, warps_m=1, warps_n=1), (30, 45, 77)),
])
def test_interpreter_matches_numpy(g, shape):
    run_on_interpreter(g, *shape, seed=sum(shape))


@pytest.mark.parametrize("k", [34, 36, 40, 48, 64, 200])
def test_interpreter_ragged_k_every_copy_width(k):
    run_on_interpreter(Int4Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1), 7, 9, k, seed=k)


def test_interpreter_extreme_values_everywhere():
    # only -8 and 7: the largest products and sums the scaled path must still get exactly right
    run_on_interpreter(Int4Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1), 32, 32, 512, seed=3, extremes=True)
    run_on_interpreter(Int8Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1), 16, 16, 256, seed=4, extremes=True)


@settings(max_examples=12)
@given(gemm_schedules(max_acc=32, max_threads=128, allow_emulated=True), st.integers(1, 70), st.integers(1, 70),
       st.integers(1, 160), st.integers(0, 2 ** 32 - 1))
def test_interpreter_property(g, m, n, k, seed):
    if g.bits == 4:
        k *= 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.EmulatedInstructionWarning)
        run_on_interpreter(g, m, n, k, seed)


def test_run_plumbing_through_the_interpreter(monkeypatch):
    """GemmSchedule.run's checks, variant choice and arguments, with the launch done by the interpreter."""
    from ptxforge.runtime.arrays import HostArray
    from ptxforge.schedules.gemm import run as gemm_run

    launched = []

    class FakeKernel:
        def __init__(self, s):
            self.s = s

        def __call__(self, grid, block, *args, shared=0, stream=None):
            arrays = [x.array if isinstance(x, HostArray) else x for x in args]
            rep = interp.run(self.s.module, grid=grid, block=block, args=arrays, shared=shared)
            assert rep.ok, str(rep)
            launched.append(self.s)

    monkeypatch.setattr(gemm_run, "load_kernel", FakeKernel)
    g = Int4Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1)
    rng = np.random.default_rng(11)
    a, b = _operands(g, 40, 33, 100, rng)
    c = g.run(a, b)
    assert np.array_equal(c.astype(np.int64), g.reference(a, b))
    assert launched[-1].copy_bytes == 2 and launched[-1].c_vector == 1  # 50-byte rows, odd N
    with pytest.raises(ValidationError, match="same K"):
        g.run(a, b[:, :-1])
    with pytest.raises(ValidationError, match="8-bit"):
        g.run(a.astype(np.int16), b)
    with pytest.raises(ValidationError, match="rows must be exactly"):
        g.run(a, b, k=98)
    with pytest.raises(ValidationError, match="int32 array of shape"):
        g.run(a, b, np.zeros((40, 33), np.int64))


def test_run_accepts_k_beyond_the_scaled_limit_with_the_default_path(monkeypatch):
    from ptxforge.schedules.gemm import run as gemm_run
    used = []

    def fake_load(s):
        used.append(s)
        return lambda *args, **kw: None
    monkeypatch.setattr(gemm_run, "load_kernel", fake_load)
    k = SCALED_K_LIMIT + 64
    a = np.ones((2, k // 2), np.uint8)
    Int4Gemm().run(a, a)
    assert used[-1].path_name == "s8_signext"
    with pytest.raises(ValidationError, match="s8_signext"):
        Int4Gemm(path="s8_scaled").run(a, a)


def test_interpreter_narrow_copies_of_a_long_k_tile():
    # 512-byte rows copied a byte at a time by one warp: the copy planner's unrolling limit is
    # exceeded, its width decision still applies, and the schedule's own split must hold
    g = Int4Gemm(block_m=32, block_n=16, block_k=1024, warps_m=1, warps_n=1, stages=2)
    run_on_interpreter(g, 40, 18, 1026, seed=12)


# ---------------------------------------------------------------- the parts API

def _example(name):
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("g, shape", [
    (Int8Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1), (45, 37, 100)),
    (Int8Gemm(block_m=64, block_n=64, warps_m=2, warps_n=2), (70, 90, 64)),
    (Int8Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1, target="sm_80"), (33, 40, 36)),
])
def test_fused_epilogue_example_is_exact_and_assembles(g, shape):
    ex = _example("gemm_fused_epilogue")
    c, want, module = ex.run(g, *shape, seed=sum(shape))
    assert (want == ex.LO).any() and (want == ex.HI).any() and ((want > ex.LO) & (want < ex.HI)).any()
    assert np.array_equal(c.astype(np.int64), want), f"{int((c != want).sum())} wrong elements"
    assert [p.name for p in module.kernels[0].params][-1] == "bias"
    res = pf.assemble(module).resources(module.kernels[0].name)
    assert res.spills == 0


def test_default_epilogue_is_the_c_store():
    from ptxforge.schedules.gemm import store_c
    g = Int4Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1)
    assert str(g.emit(epilogue=store_c)) == str(g.emit()) == g.ptx()


def test_accumulator_tile_elements_cover_the_warp_tile_once():
    from ptxforge.isa.fragments import mma_fragment
    from ptxforge.isa.tensor import mma_form
    from ptxforge.schedules.gemm import AccumulatorTile
    tile = AccumulatorTile([[list(range(4 * (2 * i + j), 4 * (2 * i + j) + 4)) for j in range(2)] for i in range(3)])
    f = mma_fragment(mma_form("m16n8k64", "s4"), "c")  # another form's C table: the same layout
    seen = np.zeros((48, 16), np.int64)
    for lane in range(32):
        r0, c0 = f.rows[lane, 0, 0], f.cols[lane, 0, 0]
        for reg, dr, dc in tile.elements():
            i, j, e = reg // 8, reg // 4 % 2, reg % 4
            assert (r0 + dr - 16 * i, c0 + dc - 8 * j) == (f.rows[lane, e, 0], f.cols[lane, e, 0])
            seen[r0 + dr, c0 + dc] += 1
    assert (seen == 1).all()
    assert tile.m_blocks == 3 and tile.n_blocks == 2 and len(tile.registers()) == 24


def test_stage_layout_owns_the_region_offsets():
    from ptxforge.schedules.gemm import StageLayout
    g = Int4Gemm(block_m=64, block_n=128, smem_layout="padded")
    st_ = StageLayout.of(g)
    assert st_.b_offset == st_.a.nbytes == 64 * (32 + 16) and st_.a_offset == 0
    assert st_.stage_bytes == g.stage_bytes and st_.total_bytes == g.shared_bytes
    assert st_.stage_offset(2) == 2 * g.stage_bytes and st_.row_bytes == g.row_bytes_k


@pytest.mark.parametrize("g", [Int4Gemm(), Int4Gemm(target="sm_80"), Int4Gemm(path="s8_signext"), Int8Gemm(),
                               Int4Gemm(block_m=32, block_n=16, warps_m=1, warps_n=1, block_k=256)])
def test_mma_count_from_the_geometry_matches_the_kernel(g):
    assert g.mma_count == g.instruction_mix()["mma"]


def test_targets_are_target_objects_and_retarget_reemits():
    g = Int4Gemm(target="sm_80")
    assert isinstance(g.target, pf.Target) and g.target.sm == 80
    h = g.retarget(pf.Target.parse("sm_90"))
    assert h.target.sm == 90 and h.path_name == "s8_scaled" and ".target sm_90" in h.ptx()
    assert Int4Gemm(target=pf.Target.parse("sm_80")) == g
    with pytest.raises(TypeError):
        g.assemble("sm_90")  # re-emitting for another target is spelled retarget(...).assemble()


def test_emission_parses_no_target_string(monkeypatch):
    from ptxforge.isa import targets
    from ptxforge.schedules import TileCopy
    parsed = []
    real = targets.Target.parse

    def counting(t):
        if not isinstance(t, targets.Target):
            parsed.append(t)
        return real(t)
    monkeypatch.setattr(targets.Target, "parse", staticmethod(counting))
    g, tc = Int4Gemm(block_m=64, target="sm_80"), TileCopy(rows=100, cols=300, target="sm_80")
    assert parsed == ["sm_80", "sm_80"]  # once each, in the constructors
    g.emit(), tc.emit(), g.retarget(g.target).emit()
    assert parsed == ["sm_80", "sm_80"]


@pytest.mark.parametrize("g", [Int4Gemm(block_m=32, block_n=32, warps_m=1, warps_n=1),  # scaled: shift first
                               Int4Gemm(operand="u4", block_m=64, block_n=32, warps_m=2, warps_n=1, target="sm_80")])
def test_a_custom_epilogue_sees_exact_c_and_the_element_coordinates(g):
    """Epilogue C'[r, c] = C[r, c] + 1000*r + c from AccumulatorTile.elements(): wrong offsets, a
    missing shift or a wrong origin all change the result."""
    from ptxforge.schedules.gemm import store_c

    def epi(k, acc, out):
        for reg, dr, dc in acc.elements():
            extra = k.add(k.mul(k.add(out.row0, dr), 1000), k.add(out.col0, dc))
            k.add(reg, extra, dst=reg)
        store_c(k, acc, out)

    m, n, kk = 37, 29, 96
    a, b = _operands(g, m, n, kk, np.random.default_rng(5))
    v = g.for_problem(kk, n)
    c = np.full((m, n), -0x5A5A5A5A, np.int32)
    rep = interp.run(v.emit(epilogue=epi), grid=v.grid(m, n), block=v.block, args=[a, b, c, m, n, kk],
                     shared=v.shared_bytes)
    assert rep.ok, str(rep)
    rows, cols = np.indices((m, n))
    assert np.array_equal(c.astype(np.int64), g.reference(a, b, kk) + 1000 * rows + cols)
