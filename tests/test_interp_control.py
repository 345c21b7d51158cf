"""Control flow and barriers: divergent branches reconverge, loops with per-thread trip counts,
early exit, bar.sync semantics, and the reports for deadlocks, divergent barriers and bra.uni."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

import ptxforge as pf
from ptxforge import b32, s32, u32
from ptxforge import interp
from ptxforge.errors import LaunchError
from ptxforge.testing.interp_strategies import launch_shapes, poison, seeds


def collatz_probe():
    """Per-thread while loop (data-dependent trip count) inside an if/else."""
    k = pf.KernelBuilder("collatz", target="sm_80", maxntid=256)
    src, out = k.param_ptr("src", u32), k.param_ptr("out", u32)
    i = k.global_index()
    off = k.mul(i, 4, mode="wide")
    x = k.ld(k.add(src, off), type=u32)
    steps = k.mov(0, type=u32)
    with k.if_(k.setp("ne", k.and_(i, 3, type=b32), 3)):
        with k.loop():
            k.break_(k.setp("le", x, 1))
            odd = k.setp("ne", k.and_(x, 1, type=b32), 0)
            k.mad(x, 3, 1, dst=x, pred=odd)
            k.shr(x, 1, dst=x, pred=~odd)
            k.add(steps, 1, dst=steps)
    with k.else_():
        k.mov(12345, dst=steps)
    k.st(k.add(out, off), steps, type=u32)
    return k.module()


def collatz(x):
    n = 0
    while x > 1:
        x = 3 * x + 1 if x & 1 else x >> 1
        n += 1
    return n


@given(seed=seeds(), shape=launch_shapes(max_threads=128, max_ctas=3))
def test_divergent_loops_reconverge(seed, shape):
    grid, block = shape
    nb = block[0] * block[1] * block[2]
    k = collatz_probe()
    total = grid[0] * nb  # 1-D global index along x (blocks are linear here)
    x = np.random.default_rng(seed).integers(1, 200, total, dtype=np.uint32)
    out = poison(np.empty(total, np.uint32))
    interp.run(k, grid=grid[0], block=nb, args=[x, out])
    want = [12345 if i % 4 == 3 else collatz(int(v)) for i, v in enumerate(x)]
    np.testing.assert_array_equal(out, want)


def test_multi_dimensional_thread_indices():
    k = pf.KernelBuilder("dims", target="sm_80")
    out = k.param_ptr("out", u32)
    vals = [k.tid("x"), k.tid("y"), k.tid("z"), k.ctaid("x"), k.ctaid("y"), k.laneid()]
    lin = k.mad(k.tid("z"), 12, k.mad(k.tid("y"), 4, k.tid("x")))
    cta = k.mad(k.ctaid("y"), 2, k.ctaid("x"))
    g = k.mad(cta, 24, lin)
    base = k.add(out, k.mul(g, 24, mode="wide"))
    for j, v in enumerate(vals):
        k.st(pf.Addr(base, 4 * j), v, type=u32)
    out = poison(np.empty((2 * 3 * 24, 6), np.uint32))
    interp.run(k.module(), grid=(2, 3), block=(4, 3, 2), args=[out])
    for g in range(2 * 3 * 24):
        cta, lin = divmod(g, 24)
        z, rest = divmod(lin, 12)
        y, x = divmod(rest, 4)
        assert out[g].tolist() == [x, y, z, cta % 2, cta // 2, lin % 32]


def test_early_exit_then_barrier_completes_for_the_rest():
    k = pf.KernelBuilder("early_exit", target="sm_80", reqntid=64)
    out = k.param_ptr("out", u32)
    buf = k.shared("buf", 256, align=16)
    t = k.tid()
    k.exit(pred=k.setp("ge", t, 40))
    base = k.shared_base(buf)
    k.st(k.add(base, k.shl(t, 2)), t, type=u32, space="shared")
    k.bar_sync(0)
    v = k.ld(k.add(base, k.shl(k.sub(39, t, type=u32), 2)), type=u32, space="shared")
    k.st(k.add(out, k.mul(t, 4, mode="wide")), v, type=u32)
    out = poison(np.empty(64, np.uint32))
    r = interp.run(k.module(), block=64, args=[out])
    assert r.ok
    np.testing.assert_array_equal(out[:40], 39 - np.arange(40))
    assert (out[40:] == 0xA7A7A7A7).all()


def test_barrier_skipped_by_an_exited_warp_completes():
    k = pf.KernelBuilder("deadlock", target="sm_80", reqntid=64)
    t = k.tid()
    with k.if_(k.setp("lt", t, 32)):
        k.bar_sync(0)
    r = interp.run(k.module(), block=64, args=[], check=False)
    assert r.ok  # threads 32..63 exit, and exited threads do not count: the barrier completes


def test_barrier_reached_from_two_instructions_is_reported():
    k = pf.KernelBuilder("two_bars", target="sm_80", reqntid=64)
    t = k.tid()
    p = k.setp("lt", t, 16)  # half of warp 0 here, half in the else branch
    with k.if_(p):
        k.bar_sync(1)
    with k.else_():
        k.bar_sync(1)
    r = interp.run(k.module(), block=64, args=[], check=False)
    assert [f.kind for f in r.findings] == ["barrier"]
    assert "different bar instructions" in r.findings[0].message and "warp 0" in r.findings[0].message


def test_real_deadlock_waits_forever():
    k = pf.KernelBuilder("stuck", target="sm_80", reqntid=64)
    t = k.tid()
    with k.if_(k.setp("lt", t, 32)):
        k.bar_sync(0, count=64)  # waits for 64 threads, but the other warp goes to barrier 1
    with k.if_(k.setp("ge", t, 32)):
        k.bar_sync(1, count=64)
    with pytest.raises(interp.InterpError, match="deadlock"):
        interp.run(k.module(), block=64, args=[])


def test_named_barrier_with_count_lets_producer_and_consumer_meet():
    k = pf.KernelBuilder("producer_consumer", target="sm_80", reqntid=96)
    out = k.param_ptr("out", u32)
    buf = k.shared("buf", 128, align=16)
    t = k.tid()
    base = k.shared_base(buf)
    warp = k.shr(t, 5)
    with k.if_(k.setp("eq", warp, 0)):  # producer
        k.st(k.add(base, k.shl(t, 2)), k.mul(t, 7, type=u32), type=u32, space="shared")
        k.bar_arrive(2, 64)
    with k.if_(k.setp("eq", warp, 1)):  # consumer
        k.bar_sync(2, 64)
        lane = k.and_(t, 31, type=b32)
        v = k.ld(k.add(base, k.shl(lane, 2)), type=u32, space="shared")
        k.st(k.add(out, k.mul(lane, 4, mode="wide")), v, type=u32)
    out = poison(np.empty(32, np.uint32))
    r = interp.run(k.module(), block=96, args=[out])  # warp 2 never takes part
    assert r.ok
    np.testing.assert_array_equal(out, 7 * np.arange(32))


def test_divergent_bra_uni_is_reported():
    k = pf.KernelBuilder("uni", target="sm_80", reqntid=32)
    out = k.param_ptr("out", u32)
    t = k.tid()
    acc = k.mov(0, type=u32)
    with k.for_range(0, k.and_(t, 3, type=b32)):  # per-thread trip count, but uniform=True
        k.add(acc, 1, dst=acc)
    k.st(k.add(out, k.mul(t, 4, mode="wide")), acc, type=u32)
    out = np.empty(32, np.uint32)
    r = interp.run(k.module(), block=32, args=[out], check=False)
    assert [f.kind for f in r.findings] == ["branch"]
    np.testing.assert_array_equal(out, np.arange(32) % 4)  # execution still follows each thread


def test_launch_errors():
    k = pf.KernelBuilder("req", target="sm_80", reqntid=64)
    out = k.param_ptr("out", s32)
    n = k.param_value("n", u32)
    k.st(out, n, type=u32)
    m = k.module()
    with pytest.raises(LaunchError, match="requires block"):
        interp.run(m, block=32, args=[np.zeros(4, np.int32), 1])
    with pytest.raises(LaunchError, match="takes 2 arguments"):
        interp.run(m, block=64, args=[np.zeros(4, np.int32)])
    with pytest.raises(LaunchError, match="does not fit"):
        interp.run(m, block=64, args=[np.zeros(4, np.int32), -1])
    a = np.zeros(8, np.int32)
    with pytest.raises(LaunchError, match="overlap"):
        k2 = pf.KernelBuilder("two", target="sm_80")
        k2.param_ptr("x", s32)
        k2.param_ptr("y", s32)
        interp.run(k2.module(), block=1, args=[a[:6], a[2:]])


def test_endless_loop_hits_the_step_limit():
    k = pf.KernelBuilder("spin", target="sm_80", reqntid=32)
    with k.loop():
        k.nanosleep(10)
    with pytest.raises(interp.InterpError, match="limit"):
        interp.run(k.module(), block=32, args=[], max_steps=1000)


@given(seed=seeds(), n=st.integers(1, 300))
def test_ragged_tail_guard(seed, n):
    """The guard pattern every kernel uses: threads past n must not touch memory."""
    k = pf.KernelBuilder("tail", target="sm_80", maxntid=128)
    x, y = k.param_ptr("x", s32), k.param_ptr("y", s32)
    nn = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, nn)):
        off = k.mul(i, 4, mode="wide")
        k.st(k.add(y, off), k.mul(k.ld(k.add(x, off), type=s32), 3), type=s32)
    xs = np.random.default_rng(seed).integers(-1000, 1000, n).astype(np.int32)
    ys = poison(np.empty(n, np.int32))
    interp.run(k.module(), grid=-(-n // 128), block=128, args=[xs, ys, n])
    np.testing.assert_array_equal(ys, 3 * xs)


def _order_probe():
    """Warpgroup 0 stores 1 to a shared word, warpgroup 1 reads it, with no barrier between them: the
    value read depends on the order in which the interpreter steps the two warpgroups."""
    k = pf.KernelBuilder("order_probe", target="sm_80", maxntid=256)
    out = k.param_ptr("out", u32)
    word = k.shared_base(k.shared("word", 4, 4))
    tid = k.tid()
    with k.if_(k.setp("eq", tid, 0)):
        k.st(word, 0, type=u32, space="shared")
    k.bar_sync(0)
    with k.if_(k.setp("lt", tid, 128)):
        k.st(word, 1, type=u32, space="shared")
    with k.else_():
        k.st(k.add(out, k.mul(tid, 4, mode="wide")), k.ld(word, type=u32, space="shared"), type=u32)
    return k.module()


def test_the_last_warpgroup_first_order_runs_a_warpgroup_ahead_of_the_lower_ones():
    """In the default order (lowest pc first) warpgroup 0's store comes first, being earlier in the code;
    with order="last-warpgroup-first" warpgroup 1 runs ahead and reads the word before it is stored.
    The race is reported either way; only the order tells which value a missing barrier lets through."""
    got = {}
    for order in interp.ORDERS:
        out = poison(np.empty(256, np.uint32))
        r = interp.run(_order_probe(), block=256, args=[out], check=False, order=order)
        assert {f.kind for f in r.findings} == {"race"}
        got[order] = set(out[128:].tolist())
    assert got == {"lowest-pc": {1}, "last-warpgroup-first": {0}}
    with pytest.raises(LaunchError, match="order is one of"):
        interp.run(_order_probe(), block=256, args=[np.zeros(256, np.uint32)], order="random")


# ---------------------------------------------------------------- bar.red

@given(seeds(), st.sampled_from([128, 192, 256]), st.integers(1, 3))
def test_bar_red_reduces_each_ctas_predicates(seed, threads, ctas):
    """popc / and / or over the whole CTA (barrier 0) and over two 64-thread groups (barriers 1 and 2 with a
    count): each thread's destination holds its group's reduction, for drawn predicates, one CTA all true and
    one all false."""
    from support.bar_red_probes import bar_red_inputs, bar_red_probe, expected_bar_red
    x = bar_red_inputs(ctas, threads, np.random.default_rng(seed))
    out = poison(np.zeros((ctas, threads, 6), np.uint32))
    report = interp.run(bar_red_probe(threads), grid=ctas, block=threads, args=[x, out])
    assert report.ok, str(report)
    np.testing.assert_array_equal(out, expected_bar_red(x))


def test_bar_red_orders_shared_memory_like_bar_sync():
    """A bar.red between a store and another warp's load of the same word: no race, the value seen."""
    k = pf.KernelBuilder("red_sync", target="sm_80", reqntid=64)
    out = k.param_ptr("out", u32)
    s = k.shared("s", 256)
    tid = k.tid()
    k.st(k.shared_base(s, 0), k.add(tid, 1000), type=u32, space="shared", offset=0, pred=k.setp("eq", tid, 0))
    n = k.bar_red("popc", k.setp("lt", tid, 10), 0)
    v = k.ld(k.shared_base(s), type=u32, space="shared")
    row = k.add(out, k.mul(tid, 8, mode="wide"))
    k.st(row, v, type=u32)
    k.st(row, n, type=u32, offset=4)
    got = np.zeros((64, 2), np.uint32)
    assert interp.run(k, grid=1, block=64, args=[got]).ok
    np.testing.assert_array_equal(got, np.tile([1000, 10], (64, 1)))


@pytest.mark.parametrize("other", ["bar.sync", "another reduction"])
def test_bar_red_mixed_with_another_arrival_is_reported(other):
    """One barrier completed by bar.red in some warps and bar.sync (or bar.red with another reduction) in others:
    PTX leaves the result undefined, so the interpreter reports it."""
    k = pf.KernelBuilder("mixed", target="sm_80", reqntid=64)
    p = k.setp("lt", k.tid(), 40)
    first = k.setp("lt", k.tid(), 32)
    with k.if_(first):
        k.bar_red("popc", p, 0)
    with k.if_(k.not_(first)):
        if other == "bar.sync":
            k.bar_sync(0)
        else:
            k.bar_red("and", p, 0)
    why = "different bar.red reductions" if other != "bar.sync" else "bar.red and of bar.sync"
    with pytest.raises(interp.InterpError, match=f"barrier 0 completed with arrivals of {why}"):
        interp.run(k, grid=1, block=64)


def test_a_barrier_bar_red_used_before_serves_a_plain_bar_sync_after():
    """bar.red on barrier 0, then bar.sync on barrier 0: the second completion is a plain barrier, not a mix."""
    k = pf.KernelBuilder("red_then_sync", target="sm_80", reqntid=64)
    out = k.param_ptr("out", u32)
    n = k.bar_red("popc", k.setp("lt", k.tid(), 5), 0)
    k.bar_sync(0)
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), n, type=u32)
    got = np.zeros(64, np.uint32)
    report = interp.run(k, grid=1, block=64, args=[got])
    assert report.ok, str(report)
    assert (got == 5).all()
