"""The weight-streaming s4 kernel (`HopperGemm(prepacked=True)`): the weights prepacked once into the
order their wgmma fragments are read in, copied by each consumer thread (cp.async, `stages` k-blocks
ahead) and widened in registers; the activations widened by the consumers into s8 tiles in the same
K order.

On the interpreter: the prepacking kernel equals its numpy model; the GEMM is exact against numpy and
free of findings at ragged M, N and K (rows past the edges, K not a multiple of the 256-value block,
one- and many-block units, split K, persistent CTAs walking several units), with one and two consumer
warpgroups and both exact widenings.  Assembled for sm_90a without spills; the entry waits before its
first global access under pdl; the options it cannot take, and weights that are not prepacked, are
refused by name.  On the GPU: exact at ragged shapes through `run`, and through a prepared plan over
changing prepacked weights."""

import numpy as np
import pytest

from ptxforge.errors import ValidationError
from ptxforge.schedules.hopper import HopperGemm, random_operands, reference, run
from ptxforge import interp
from ptxforge.schedules.hopper.prepack import SIGMA, prepack_module, prepack_numpy, prepacked_shape
from ptxforge.schedules.hopper.stream import B_BUFFERS, chunks, stream_stage_bytes
from support.hopper_gemm import run_on_interpreter

BASE = dict(wg_m=64, block_k_bytes=256, swap_ab=True, scaled=True, prepacked=True)

CASES = [  # (options, (m, n, k, splits, CTAs or None: one per unit))
    (dict(block_n=32, consumers=2, stages=4), (20, 150, 800, 1, None)),
    (dict(block_n=32, consumers=2, stages=2), (32, 200, 1280, 1, 1)),  # one CTA walks 4 units of 5 blocks
    (dict(block_n=32, consumers=1, stages=4), (9, 70, 32, 1, None)),  # K smaller than one block
    (dict(block_n=64, consumers=2, stages=2, scaled=False), (40, 130, 1056, 2, None)),  # split K, sign-extended
    (dict(block_n=32, consumers=2, stages=6, pdl=True), (33, 64, 544, 1, 1)),  # two column tiles of A's rows
    (dict(block_n=128, consumers=1, stages=4), (100, 64, 768, 1, None)),
    (dict(block_n=32, consumers=2, stages=2, block_k_bytes=512), (32, 200, 1312, 1, 1)),  # two blocks per k-step
    (dict(block_n=64, consumers=1, stages=2, block_k_bytes=512, scaled=False), (40, 130, 1824, 2, None)),
]


def _id(case):
    kw, shape = case
    return "-".join(f"{k}{'' if v is True else v}" for k, v in kw.items()) + "_" + "x".join(map(str, shape[:4]))


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_streaming_kernel_is_exact_and_clean_on_the_interpreter(case):
    kw, (m, n, k, splits, ctas) = case
    cfg = HopperGemm("s4", **{**BASE, **kw})
    got, want, r = run_on_interpreter(cfg, m, n, k, splits=splits, clusters=ctas, seed=m * n + k)
    assert r.ok, str(r)
    np.testing.assert_array_equal(got, want)


def test_k_order_of_a_loads_matches_the_widened_b_tile():
    """sigma is a permutation whose pairs (0, 1) and (2, 3) of fragment slots are the chunks {p, p + 2} one
    B thread holds: that is what lets each B thread store 8 contiguous bytes per half k-step."""
    assert sorted(SIGMA) == [0, 1, 2, 3]
    for p in range(2):
        assert (SIGMA[2 * p], SIGMA[2 * p + 1]) == (p, p + 2)
    # the quad's first loads cover the half-row's 64 bytes: whole sectors per instruction
    assert sorted(16 * s for s in SIGMA) == [0, 16, 32, 48]


@pytest.mark.parametrize("rows, k", [(64, 256), (70, 544), (130, 1056), (5, 32)])
def test_prepacking_kernel_matches_its_numpy_model(rows, k):
    """Every byte of the prepacked copy, zeros past the rows and past K included (the output poisoned)."""
    rng = np.random.default_rng(rows + k)
    src = rng.integers(0, 256, (rows, k // 2), dtype=np.uint8)
    want = prepack_numpy(src)
    assert want.shape == prepacked_shape(rows, k)
    out = np.full(want.shape, 0xA5, np.uint8)
    blocks = -(-(k // 2) // 128)
    chunks_ = want.size // 16
    r = interp.run(prepack_module(), grid=-(-chunks_ // 256), block=256, args=[src, out, rows, k // 2, blocks])
    assert r.ok, str(r)
    np.testing.assert_array_equal(out, want)


def test_prepacked_order_puts_each_fragment_chunk_where_its_thread_reads():
    """Chunk (tile, block, warp, load 2 r + c, lane 4 g + t) is bytes 64 c + 16 sigma(t) of block kb of row
    64 tile + 16 w + 8 r + g: checked for every chunk of a two-tile, three-block matrix of distinct rows."""
    rows, k = 128, 768
    src = np.zeros((rows, k // 2), np.uint8)
    ids = np.arange(rows * (k // 32)).reshape(rows, k // 32)  # one id per 16-byte chunk
    src.view(np.uint32).reshape(rows, -1)[:, ::4] = ids  # the first word of each chunk names it
    got = prepack_numpy(src).view(np.uint32)[::4]
    blocks = k // 256
    for o, chunk_id in enumerate(got):
        lane, i, w, tb = o % 32, o // 32 % 4, o // 128 % 4, o // 512
        tile, kb = divmod(tb, blocks)
        g, t, r, c = lane // 4, lane % 4, i // 2, i % 2
        row = 64 * tile + 16 * w + 8 * r + g
        assert chunk_id == ids[row, (kb * 128 + 64 * c + 16 * SIGMA[t]) // 16]


def test_shared_memory_accounts_for_every_buffer():
    cfg = HopperGemm("s4", **{**BASE, "block_n": 64, "consumers": 2, "stages": 2})
    assert chunks(cfg) == 4 + 2 * 2
    assert cfg.stream_bytes == 2 * 2 * stream_stage_bytes(cfg)
    assert cfg.convert_bytes == 2 * B_BUFFERS * 64 * 256  # three s8 B tiles per warpgroup
    assert cfg.reduce_bytes == 128 * cfg.acc_regs * 4
    assert cfg.smem_bytes == 1024 + cfg.stream_bytes + cfg.convert_bytes + cfg.reduce_bytes
    assert cfg.threads == 256 and cfg.block_m == 64 and cfg.stage_bytes == 0


@pytest.mark.parametrize("kw, says", [
    (dict(operand="s8"), "operand='s4'"),
    (dict(block_k_bytes=1024), "block_k_bytes=256 or 512"),
    (dict(stages=3), "an even number of stages"),
    (dict(wg_m=128), "wg_m=64"),
    (dict(biased=True, scaled=False), "biased=False"),
    (dict(interleave_k=True), "interleave_k=False"),
    (dict(cluster_m=2), "no cluster"),
    (dict(block_n=128, consumers=2, stages=4), "shared memory"),
    (dict(swap_ab=False), "swap_ab=True"),
])
def test_options_it_cannot_take_are_refused_by_name(kw, says):
    params = {**BASE, "block_n": 32, "consumers": 2, "stages": 4, **kw}
    op = params.pop("operand", "s4")
    with pytest.raises(ValidationError) as e:
        HopperGemm(op, **params)
    assert says in str(e.value)


@pytest.mark.parametrize("kw", [dict(block_n=32, consumers=2, stages=4, pdl=True), dict(block_n=64, consumers=1,
                                                                                           stages=8),
                                dict(block_n=128, consumers=1, stages=4)], ids=["32-c2", "64-c1", "128-c1"])
def test_streaming_kernel_assembles_without_spills_and_multiplies_on_the_tensor_cores(kw):
    cfg = HopperGemm("s4", **{**BASE, **kw})
    r = cfg.assemble()
    assert r.resources().spills == 0, r.log
    assert "C7513" not in r.log and "C7508" not in r.log, r.log
    names = [i.mnemonic for i in cfg.module.kernels[0].instructions]
    assert any(n.startswith("wgmma.mma_async") for n in names)
    assert any(n.startswith("cp.async.cg.shared.global") for n in names)
    assert not any("tensor" in n for n in names)  # no TMA
    if cfg.pdl:
        first_global = next(i for i, n in enumerate(names) if n.startswith("cp.async.cg"))
        assert names.index("griddepcontrol.wait") < first_global


@pytest.mark.gpu
@pytest.mark.parametrize("kw", [dict(block_n=32, consumers=2, stages=4, pdl=True),
                                dict(block_n=64, consumers=1, stages=8, pdl=True),
                                dict(block_n=128, consumers=1, stages=4, pdl=True)], ids=["32", "64", "128"])
def test_gpu_streaming_kernel_matches_numpy_on_ragged_shapes(kw):
    """Fresh random operands per shape, C poisoned before the launch (run does), exact equality; the
    weights prepacked on the host (numpy B)."""
    cfg = HopperGemm("s4", **{**BASE, **kw})
    rng = np.random.default_rng(hash(cfg.kernel_name) % 1000)
    for m, n, k in [(1, 64, 256), (cfg.block_n - 3, 8192 + 40, 8192 + 96), (20, 300, 544), (7, 130, 32)]:
        a, b = random_operands(cfg, m, n, k, rng)
        np.testing.assert_array_equal(run(cfg, a, b, k=k).astype(np.int64), reference(cfg, a, b),
                                      err_msg=f"{m}x{n}x{k}")


@pytest.mark.gpu
def test_gpu_streaming_plan_over_changing_weights_matches_the_last_set():
    """Weights prepacked on the GPU (the prepacking kernel) equal the host model; 90 back-to-back launches of a
    prepared plan (dependent launches) over three weight sets; the documented run() on them gives the same."""
    from ptxforge.runtime import DeviceBuffer, synchronize
    cfg = HopperGemm("s4", **{**BASE, "block_n": 32, "consumers": 2, "stages": 4, "pdl": True})
    m, n, k = 32, 8192 + 64, 8192
    rng = np.random.default_rng(5)
    a, _ = random_operands(cfg, m, n, k, rng)
    ws = [random_operands(cfg, 1, n, k, rng)[1] for _ in range(3)]
    da = DeviceBuffer.from_host(a)
    pws = [cfg.prepack(DeviceBuffer.from_host(w)) for w in ws]
    synchronize()
    np.testing.assert_array_equal(pws[1].buffer.to_host(), prepack_numpy(ws[1]))
    dc = DeviceBuffer.empty((m, n), np.int32)
    plan = cfg.plan(m, n, k)
    for i in range(90):
        plan(da, pws[i % 3], dc)
    synchronize()
    np.testing.assert_array_equal(dc.to_host().astype(np.int64), reference(cfg, a, ws[89 % 3]))
    c2 = cfg.run(da, pws[0])
    synchronize()
    np.testing.assert_array_equal(c2.to_host().astype(np.int64), reference(cfg, a, ws[0]))
    with pytest.raises(ValidationError, match="PrepackedWeights"):
        plan(da, DeviceBuffer.from_host(ws[0]), dc)


@pytest.mark.gpu
def test_gpu_decode_prepacked_example_runs_exact():
    """examples/decode_prepacked.py: weights prepacked once on the GPU, decode steps through run(), each exact."""
    from support.examples import load_example
    assert load_example("decode_prepacked").main(["--m", "20", "--n", "1000", "--k", "2080", "--calls", "2"]) == 0
