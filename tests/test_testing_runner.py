"""The property-test runner (ptxforge.testing.check): a correct kernel passes; each kind of planted
bug is found and shrunk to a small problem with a readable report; float tolerances behave as
documented; the GPU switch fails a check that demands a missing GPU."""

import re
import unittest

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ptxforge import KernelBuilder, b16, f32, u32
from ptxforge.schedules import TileCopy
from ptxforge.testing import (Array, ProblemSpace, PropertyFailure, Size, cdiv, check, check_problem, mutation_check,
                              property_test, relative, ulps)
from ptxforge.runtime import gpu_skip_reason
from ptxforge.testing import REQUIRE_GPU_ENV
from ptxforge.testing.copy_strategies import tile_copy_schedules
from ptxforge.testing.gemm_strategies import gemm_schedules
from ptxforge.testing.kernels import saxpy, transpose
from ptxforge.testing.schedule_problems import constructor_text
from ptxforge.testing.mutants import (drop_bar_sync, drop_mbarrier_wait, loosen_wait_group, mutants_of,
                                      off_by_one_guard)

NO_GPU = gpu_skip_reason() is not None
interp_only = dict(backends=("interp",))
#: Tests that must find a planted bug draw the same problems every run.
SEEDED = settings(derandomize=True, database=None)


def transpose_space(max_size=70, multiple_of=1):
    return ProblemSpace(
        sizes=[Size("rows", 0, max_size, tile=32, multiple_of=multiple_of),
               Size("cols", multiple_of, max_size, tile=32, multiple_of=multiple_of)],
        arrays=[Array("src", ("rows", "cols"), np.float32),
                Array("dst", ("cols", "rows"), np.float32, role="out", write_once=True)],
        grid=lambda p: (cdiv(p.cols, 32), cdiv(p.rows, 32)), block=(32, 8),
        reference=lambda src: src.T)


def failure_of(*args, **kwargs) -> PropertyFailure:
    with pytest.raises(PropertyFailure) as info:
        check(*args, settings=SEEDED, **kwargs)
    return info.value


def test_a_correct_kernel_passes_over_edge_sizes():
    seen = set()
    report = check(transpose(), transpose_space(), max_examples=25, property=lambda p, o: seen.add(p.sizes["rows"]),
                   settings=SEEDED, **interp_only)
    assert report.problems == 25 and report.runs == {"interp": 25}
    assert seen & {0, 1, 31, 32, 33}  # the edges come up by default


def test_the_edges_of_a_size():
    s = Size("k", 0, 100, tile=32, multiple_of=2)
    assert {0, 2, 30, 32, 34, 62, 64, 100} <= set(s.values_near_edges())
    assert all(v % 2 == 0 and 0 <= v <= 100 for v in s.values_near_edges())
    assert 1 in Size("n", 1, 10, tile=4).values_near_edges() and 0 not in Size("n", 1, 10).values_near_edges()


def test_problems_are_rebuilt_from_their_seed_and_outputs_are_poisoned():
    sp = transpose_space()
    a, b = sp.make(rows=5, cols=7, seed=3), sp.make(rows=5, cols=7, seed=3)
    assert a.arrays["src"].shape == (5, 7) and np.array_equal(a.arrays["src"], b.arrays["src"])
    assert not np.array_equal(a.arrays["src"], sp.make(rows=5, cols=7, seed=4).arrays["src"])
    assert np.isnan(a.arrays["dst"]).all() and a.grid == (1, 1, 1)
    assert a.arrays["dst"].tobytes() == sp.array("dst").poison.tobytes() * a.arrays["dst"].size


def test_packed_int4_arrays_hold_two_values_per_byte():
    from ptxforge.int4 import unpack_int4
    sp = ProblemSpace(sizes=[Size("m", 1, 4), Size("k", 1, 9)], arrays=[Array("a", ("m", "k"), "s4", low=-8, high=-8),
                                                                        Array("c", ("m",), np.int32, role="out")])
    p = sp.make(m=3, k=5)
    a = p.arrays["a"]
    assert a.dtype == np.uint8 and a.shape == (3, 3)  # 5 values round up to 3 bytes
    assert (unpack_int4(a, 5) == -8).all() and (a[:, -1] >> 4 == 0).all()  # the odd tail's high nibble is 0


@pytest.mark.parametrize("mutate", [drop_bar_sync, off_by_one_guard], ids=["drop_bar_sync", "off_by_one_guard"])
def test_planted_bugs_in_a_transpose_are_found_and_shrunk(mutate):
    e = failure_of(transpose(), transpose_space(), transform=lambda k: mutate(k, nth=0), max_examples=40,
                   **interp_only)
    p = e.problem
    assert p.sizes["rows"] * p.sizes["cols"] <= 4, p  # shrunk to a tiny matrix
    text = str(e)
    assert "kernels.py:" in text and "emitted at" in text  # findings name the Python lines
    assert "reproduce:" in text and f"rows={p.sizes['rows']}" in text


def test_a_wrong_value_is_reported_with_its_index_and_reproduces():
    sp = transpose_space()
    sp.reference = lambda src: src.T + np.float32(src.size > 40)  # a reference that disagrees from 41 elements
    e = failure_of(transpose(), sp, max_examples=40, **interp_only)
    rows, cols = e.problem.sizes["rows"], e.problem.sizes["cols"]
    assert 40 < rows * cols <= 70 and min(rows, cols) <= 2, e.problem  # shrunk near the least size that fails
    assert re.search(r"dst\[\d+, \d+\]: got .* want", str(e))
    snippet = str(e).split("reproduce:")[1]
    values = eval("dict(" + snippet.split("check_problem(kernel, space, ")[1].split(")  #")[0] + ")")
    with pytest.raises(PropertyFailure):
        check_problem(transpose(), sp, **interp_only, **values)
    from ptxforge.testing.runner import run_problem
    out = run_problem(transpose(), sp, **interp_only, **values)  # the same problem, judged without raising
    assert out.failures and out.problem.sizes == {k: values[k] for k in out.problem.sizes}


@pytest.mark.parametrize("completion,mutate", [("groups", loosen_wait_group), ("groups", drop_bar_sync),
                                               ("mbarrier", drop_mbarrier_wait)])
def test_planted_bugs_in_a_pipelined_copy_are_found_and_shrunk(completion, mutate):
    tc = TileCopy(16, 64, "s8", tile_rows=4, tile_cols=16, threads=64, stages=3, completion=completion)
    e = failure_of(tc, transform=lambda k: mutate(k, nth=0), max_examples=30, **interp_only)
    tiles = cdiv(e.problem.sizes["rows"], tc.tile_rows) * cdiv(e.problem.sizes["cols"], tc.tile_cols)
    assert tiles <= 2 * tc.stages, e.problem  # shrunk to a few tiles (of up to 3 x 4 + 1 per side)
    assert "[interp]" in str(e) and "tile_copy_emit.py:" in str(e)  # the instruction's emitting line


def writes_its_input():
    k = KernelBuilder("copy_and_clear", target="sm_80", maxntid=128)
    x, out = k.param_ptr("x", f32), k.param_ptr("out", f32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        k.st(k.add(out, off), k.ld(k.add(x, off), type=f32))
        k.st(k.add(x, off), 0.0, type=f32)  # the input is not the kernel's to write
    return k.module()


def test_a_write_outside_the_outputs_fails_even_when_outputs_match():
    sp = ProblemSpace(sizes=[Size("n", 0, 300, tile=128)],
                      arrays=[Array("x", ("n",), np.float32), Array("out", ("n",), np.float32, role="out")],
                      grid=lambda p: cdiv(p.n, 128), block=128, reference=lambda x: x)
    e = failure_of(writes_its_input(), sp, max_examples=20, **interp_only)
    assert e.problem.sizes["n"] == 1 and "wrote outside the outputs: input x" in str(e)


def stores_twice():
    """out[i] = x[i], and CTA 0 also stores the next CTA's first element: right values, written twice."""
    k = KernelBuilder("stores_twice", target="sm_80", maxntid=128)
    x, out = k.param_ptr("x", f32), k.param_ptr("out", f32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        k.st(k.add(out, off), k.ld(k.add(x, off), type=f32))
    j = k.add(i, 1)
    with k.if_(k.setp("lt", j, n, combine=("and", k.setp("eq", k.tid(), 127)))):
        off = k.mul(j, 4, mode="wide")
        k.st(k.add(out, off), k.ld(k.add(x, off), type=f32))
    return k.module()


@pytest.mark.parametrize("once", [False, True])
def test_write_once_outputs_catch_an_element_stored_twice(once):
    sp = ProblemSpace(sizes=[Size("n", 0, 300, tile=128)],
                      arrays=[Array("x", ("n",), np.float32),
                              Array("out", ("n",), np.float32, role="out", write_once=once)],
                      grid=lambda p: cdiv(p.n, 128), block=128, reference=lambda x: x)
    if not once:
        check(stores_twice(), sp, max_examples=20, **interp_only)  # the values are right
        return
    e = failure_of(stores_twice(), sp, max_examples=20, **interp_only)
    assert e.problem.sizes["n"] == 129 and "written more than once" in str(e) and "byte offsets 512" in str(e)


# ---------------------------------------------------------------- tolerances

def saxpy_space(tolerance):
    return ProblemSpace(
        sizes=[Size("n", 1, 4096, tile=256)], block=256, grid=lambda p: cdiv(p.n, 256),
        arrays=[Array("x", ("n",), np.float32, low=1, high=4),  # positive: no cancellation, at most 1 ulp apart
                Array("y", ("n",), np.float32, low=1, high=4, role="inout", tolerance=tolerance)],
        scalars=[], args=("x", "y", "n", lambda p: 1.7),
        reference=lambda x, y: np.float32(1.7) * x + y)  # two roundings; the kernel's fma rounds once


def test_float_tolerances_on_a_fused_multiply_add():
    m = saxpy()
    with pytest.raises(PropertyFailure, match="bit-exact"):
        check_problem(m, saxpy_space(None), n=4096, **interp_only)
    check_problem(m, saxpy_space(ulps(1)), n=4096, **interp_only)
    check_problem(m, saxpy_space(relative(1e-6, atol=1e-6)), n=4096, **interp_only)
    with pytest.raises(PropertyFailure, match="within 0 ulp"):
        check_problem(m, saxpy_space(ulps(0)), n=4096, **interp_only)


def test_block_choices_and_drawn_scalars_reach_the_launch():
    from hypothesis import strategies as st
    from ptxforge.testing import Scalar
    blocks, scalars = set(), set()
    sp = ProblemSpace(
        sizes=[Size("n", 1, 700, tile=128)], block=[64, 128, 256], grid=lambda p: cdiv(p.n, p.block[0]),
        arrays=[Array("x", ("n",), np.float32, low=1, high=4), Array("y", ("n",), np.float32, low=1, high=4),
                Array("out", ("n",), np.float32, role="out", tolerance=ulps(1))],
        scalars=[Scalar("a", st.floats(1, 2, width=32))],
        reference=lambda x, y, a: np.float32(a) * x + y)
    check(saxpy(out=True), sp, max_examples=20, settings=SEEDED, **interp_only,
          property=lambda p, o: (blocks.add(p.block[0]), scalars.add(p.scalars["a"])))
    assert len(blocks) > 1 and len(scalars) > 1


def test_ulps_count_across_zero_and_nan_matches_nan():
    t = ulps(2)
    tiny = np.array([1], np.uint32).view(np.float32)  # the smallest positive subnormal
    assert t.passes(-tiny, tiny).all() and not ulps(1).passes(-tiny, tiny).any()
    assert t.passes(np.float32([-0.0]), np.float32([0.0])).all()
    assert t.passes(np.float32([np.nan]), np.float32([np.nan])).all()
    assert not t.passes(np.float32([np.nan]), np.float32([1.0])).any()
    one = np.float32([1.0])
    assert t.passes(np.nextafter(np.nextafter(one, 2), 2), one).all()
    assert not t.passes(np.nextafter(np.nextafter(np.nextafter(one, 2), 2), 2), one).any()
    bf = np.array([0x3F80, 0x3F82], np.uint16)  # bfloat16 1.0 and two steps up
    assert t.passes(bf[1:], bf[:1], bf16=True).all() and not ulps(1).passes(bf[1:], bf[:1], bf16=True).any()


def test_relative_tolerance_is_numpys_isclose_and_integers_are_exact():
    r = relative(1e-3, atol=1e-6)
    assert r.passes(np.float32([1.0009]), np.float32([1.0])).all()
    assert not r.passes(np.float32([1.0011]), np.float32([1.0])).any()
    assert not r.passes(np.float32([np.inf]), np.float32([3e38])).any()
    assert not r.passes(np.int32([3]), np.int32([4])).any()  # integers ignore the tolerance
    assert not ulps(9).passes(np.int8([1]), np.int64([257])).any()  # a reference value the type cannot hold


# ---------------------------------------------------------------- backends

def test_a_demanded_gpu_that_is_missing_fails(monkeypatch):
    if not NO_GPU:
        pytest.skip("a GPU is present: the switch has nothing to fail")
    monkeypatch.setenv(REQUIRE_GPU_ENV, "1")
    with pytest.raises(PropertyFailure, match="no GPU is usable"):
        check(transpose(), transpose_space(), max_examples=2)
    monkeypatch.delenv(REQUIRE_GPU_ENV)
    with pytest.raises(PropertyFailure, match="no GPU is usable"):
        check(transpose(), transpose_space(), backends=("interp", "gpu"), max_examples=2)
    assert check(transpose(), transpose_space(), max_examples=2).runs == {"interp": 2}  # auto: the interpreter


def unmodelled():
    k = KernelBuilder("add_brkpt", target="sm_80")
    x, y = k.param_ptr("x", f32), k.param_ptr("y", f32)
    v = k.ld(x, type=f32)
    k.brkpt()  # a breakpoint needs a debugger: the interpreter refuses it
    k.st(y, k.add(v, v))
    return k.module()


def test_a_kernel_the_interpreter_cannot_model():
    sp = ProblemSpace(arrays=[Array("x", (1,), np.float32), Array("y", (1,), np.float32, role="out")], block=1,
                      reference=lambda x: x + x)
    with pytest.raises(PropertyFailure, match="does not model"):
        check(unmodelled(), sp, max_examples=2, **interp_only)
    if NO_GPU:
        with pytest.raises(unittest.SkipTest, match="no backend can run"):
            check(unmodelled(), sp, max_examples=2)


# ---------------------------------------------------------------- the decorator and the mutation check

calls = []


@property_test(transpose(), transpose_space(40), max_examples=5, **interp_only)
def decorated(problem, outcome):
    calls.append(problem)
    assert np.array_equal(outcome.outputs["interp"]["dst"], problem.initial["src"].T)


def test_the_decorator_makes_an_argument_free_test():
    import inspect
    assert not inspect.signature(decorated).parameters
    calls.clear()
    decorated()
    assert len(calls) == 5


def test_check_test_is_the_decorator_too():
    sizes = []

    @check.test(transpose(), transpose_space(40), max_examples=4, **interp_only)
    def one_argument(problem):
        sizes.append(problem.sizes)
    one_argument()
    assert len(sizes) == 4


def test_mutation_check_names_the_survivors_of_a_weak_space():
    strong = mutation_check(transpose(), transpose_space(), kinds=["drop_bar_sync", "off_by_one_guard"],
                            max_per_kind=3, max_examples=40, settings=SEEDED, **interp_only)
    assert len(strong.results) == 4 and not strong.survivors, str(strong)
    # whole tiles only: no guard is ever false, so loosening one changes nothing the test sees
    weak = mutation_check(transpose(), transpose_space(64, multiple_of=32), kinds=["off_by_one_guard"],
                          max_per_kind=3, max_examples=5, **interp_only)
    assert weak.survivors and "SURVIVED" in str(weak)


def test_mutants_of_lists_every_site():
    k = transpose().kernel("transpose")
    found = mutants_of(k)
    assert {m.kind for m in found} == {"drop_bar_sync", "off_by_one_guard"}
    assert sum(m.kind == "off_by_one_guard" for m in found) == 16  # two guards per pass, 4 passes in, 4 out
    assert all("kernels.py:" in m.where for m in found)


def test_a_schedules_failure_reruns_from_its_snippet_alone():
    import textwrap
    tc = TileCopy(16, 64, "s8", tile_rows=4, tile_cols=16, threads=64, stages=3, completion="groups")
    wait = mutants_of(tc.emit().kernels[0], ["loosen_wait_group"])[0]
    e = failure_of(tc, transform=wait.apply, max_examples=30, **interp_only)
    assert "(a mutant: loosen_wait_group #0" in str(e)
    snippet = textwrap.dedent(str(e).split("reproduce:\n", 1)[1])
    assert "TileCopy(" in snippet and "Mutant(" in snippet
    with pytest.raises(PropertyFailure) as again:
        exec(snippet, {})
    assert again.value.problem.sizes == e.problem.sizes and again.value.problem.seed == e.problem.seed


@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_the_sample_kernels_and_their_mutants_assemble(target):
    from ptxforge import Module
    from ptxforge.assembler import assemble
    k = transpose(target).kernel("transpose")
    assert assemble(Module([k])).resources("transpose").registers > 0
    for m in mutants_of(k, max_per_kind=2):  # a mutant is still legal PTX: only its meaning changed
        bad = m.apply(k)
        assert assemble(Module([bad])).resources("transpose").registers > 0
    for build in (writes_its_input, unmodelled):
        assert assemble(build()).report()


def test_one_kernel_of_a_module_is_picked_by_name():
    from ptxforge import Module
    both = Module([transpose().kernel("transpose"), saxpy().kernel("saxpy")])
    assert check(both, transpose_space(), kernel="transpose", max_examples=3, **interp_only).kernel == "transpose"
    with pytest.raises(Exception, match="saxpy"):
        check(both, transpose_space(), kernel="nope", max_examples=3, **interp_only)


@given(schedule=st.one_of(gemm_schedules(), tile_copy_schedules()))
def test_a_schedules_reproducer_text_rebuilds_it(schedule):
    from ptxforge.schedules import Int4Gemm, Int8Gemm, TileCopy  # noqa: F401 (the text names them)
    assert eval(constructor_text(schedule)) == schedule


@settings(max_examples=1)
@given(data=st.data())
def test_check_inside_a_given_test_says_what_to_do_instead(data):
    with pytest.raises(RuntimeError, match="check_schedules"):
        check(transpose(), transpose_space(), max_examples=2, **interp_only)
    problem = data.draw(transpose_space().problems())  # what it suggests works
    assert check_problem(transpose(), transpose_space(), problem, **interp_only).ok


# ---------------------------------------------------------------- the GPU backend's plumbing, on the CPU

@pytest.fixture
def stand_in_device(monkeypatch):
    """A "GPU" that is the interpreter, optionally damaged after each launch: the GPU backend's
    argument wrapping, checks and comparisons run on the CPU."""
    from ptxforge import interp
    from ptxforge.testing import runner
    state = {"launches": 0, "damage": None}

    def function(plan, kernel):
        def launch(grid, block, *args, shared=0):
            state["launches"] += 1
            interp.run(kernel, grid=grid, block=block, args=list(args), shared=shared, check=False)
            if state["damage"] is not None:
                state["damage"]([a.array if hasattr(a, "array") else a for a in args])
        return launch
    monkeypatch.setattr(runner, "gpu_skip_reason", lambda: None)
    monkeypatch.setattr(runner._Plan, "gpu_function", function)
    return state


def test_the_gpu_backend_runs_beside_the_interpreter(stand_in_device):
    report = check(transpose(), transpose_space(), backends=("interp", "gpu"), max_examples=6, settings=SEEDED)
    assert report.runs == {"interp": 6, "gpu": 6} and stand_in_device["launches"] >= 6


def copies():
    """out[i] = x[i] for i < n."""
    k = KernelBuilder("copy", target="sm_80", maxntid=128)
    x, out = k.param_ptr("x", f32), k.param_ptr("out", f32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        k.st(k.add(out, off), k.ld(k.add(x, off), type=f32))
    return k.module()


def copy_space():
    return ProblemSpace(sizes=[Size("n", 1, 300, tile=128)], grid=lambda p: cdiv(p.n, 128), block=128,
                        arrays=[Array("x", ("n",), np.float32), Array("out", ("n",), np.float32, role="out")],
                        reference=lambda x: x)


def test_the_backends_must_agree_and_the_gpu_may_not_touch_inputs(stand_in_device):
    def flip_last_output(args):
        args[1].reshape(-1).view(np.uint32)[-1] ^= 1
    stand_in_device["damage"] = flip_last_output
    e = failure_of(copies(), copy_space(), backends=("interp", "gpu"), max_examples=10)
    assert "[interp vs gpu] output out differs between the backends" in str(e) and e.problem.sizes["n"] == 1

    def scribble_on_input(args):
        args[0].reshape(-1).view(np.uint8)[0] ^= 0xFF
    stand_in_device["damage"] = scribble_on_input
    e = failure_of(copies(), copy_space(), backends=("interp", "gpu"), max_examples=10)
    assert "[gpu] wrote outside the outputs: input x changed in 1 byte(s)" in str(e)


def copies16():
    """out[i] = x[i] for i < n, 16-bit elements."""
    k = KernelBuilder("copy16", target="sm_80", maxntid=128)
    x, out = k.param_ptr("x", b16), k.param_ptr("out", b16)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 2, mode="wide")
        k.st(k.add(out, off), k.ld(k.add(x, off), type=b16), type=b16)
    return k.module()


@pytest.mark.parametrize("dtype", ["bf16", np.float16])
def test_half_floats_within_a_tolerance_may_round_differently_on_the_two_backends(stand_in_device, dtype):
    def one_ulp_up(args):  # the "GPU" rounds the last element the other way
        args[1].reshape(-1)[-1:].view(np.uint16)[...] += 1

    def space(tolerance):
        return ProblemSpace(sizes=[Size("n", 1, 300, tile=128)], grid=lambda p: cdiv(p.n, 128), block=128,
                            arrays=[Array("x", ("n",), dtype, low=1, high=2),
                                    Array("out", ("n",), dtype, role="out", tolerance=tolerance)],
                            reference=lambda x: x)
    stand_in_device["damage"] = one_ulp_up
    report = check(copies16(), space(ulps(1)), backends=("interp", "gpu"), max_examples=10, settings=SEEDED)
    assert report.runs == {"interp": 10, "gpu": 10}
    e = failure_of(copies16(), space(None), backends=("interp", "gpu"), max_examples=10)
    assert "[interp vs gpu] output out differs between the backends (bit-exact)" in str(e)


def test_a_problem_with_out_of_bounds_accesses_never_reaches_the_device(stand_in_device):
    e = failure_of(transpose(), transpose_space(), backends=("interp", "gpu"), max_examples=20,
                   transform=lambda k: off_by_one_guard(k, nth=0))
    assert "gpu" in e.outcome.skipped and "out-of-bounds" in str(e)


def test_where_relates_sizes_and_shapes_follow_them():
    seen = []
    sp = transpose_space()
    sp.where = lambda s: s.rows <= s.cols
    check(transpose(), sp, max_examples=15, property=lambda p, o: seen.append((p.rows, p.cols, p.grid)),
          **interp_only)
    assert seen and all(r <= c and g == (max(1, cdiv(c, 32)), max(1, cdiv(r, 32)), 1) for r, c, g in seen)


def test_a_scalar_may_depend_on_the_sizes():
    from ptxforge.testing import Scalar
    sp = ProblemSpace(
        sizes=[Size("n", 1, 300, tile=128)], block=128, grid=lambda p: cdiv(p.n, 128),
        arrays=[Array("x", ("n",), np.float32, low=0, high=1), Array("y", ("n",), np.float32, low=0, high=1),
                Array("out", ("n",), np.float32, role="out", tolerance=ulps(1))],
        scalars=[Scalar("a", lambda s: st.sampled_from([float(s.n), 0.5]))],
        reference=lambda x, y, a: np.float32(a) * x + y)
    seen = []
    check(saxpy(out=True), sp, max_examples=10, property=lambda p, o: seen.append((p.n, p.a)), **interp_only)
    assert all(a in (float(n), 0.5) for n, a in seen)
    with pytest.raises(ValueError, match="give a value for scalar 'a'"):
        sp.make(n=3)
    assert sp.make(n=3, a=2.0).scalars == {"a": 2.0}


# ---------------------------------------------------------------- spaces that run on the device only

def test_the_hopper_gemm_space_runs_on_the_interpreter_through_host_tensor_maps():
    """The Hopper GEMM's launch needs tensor maps: on the GPU the schedule's own `run` makes them from device
    arrays (the space's device hook), on the interpreter `interp_launch` makes host ones over the numpy
    arrays (its interp_args hook), so its problems run without a GPU too, and a wrong reference fails there."""
    from ptxforge.schedules.hopper import Bf16Gemm, HopperGemm
    from ptxforge.schedules.hopper import reference as hopper_reference
    from ptxforge.testing import problem_space
    for g, dtype, k_step in ((HopperGemm("s8", block_n=64, stages=2), np.int8, 16),
                             (HopperGemm("s4", block_n=64, block_k_bytes=256, stages=2), np.uint8, 32),
                             (Bf16Gemm(block_n=64, stages=2), np.uint16, 8)):
        sp = problem_space(g, max_m=40, max_n=40, max_k=4 * k_step)
        assert sp.interpretable and sp.device is not None and sp.sizes[2].multiple_of == k_step
        p = sp.make(m=3, n=5, k=2 * k_step)
        row = 2 * k_step * g.bits // (8 * np.dtype(dtype).itemsize)  # containers per row: 32 bytes
        assert p.arrays["a"].dtype == dtype and p.arrays["a"].shape == (3, row)
        assert sp.expected(p)["c"].shape == (3, 5)
        report = check(g, sp, max_examples=3, **interp_only)
        assert report.runs == {"interp": 3}
        sp.reference = lambda a, b, g=g: hopper_reference(g, a, b) + 1
        assert "[interp] output c differs" in str(failure_of(g, sp, max_examples=3, **interp_only))
        assert eval(constructor_text(g), {"HopperGemm": HopperGemm, "Bf16Gemm": Bf16Gemm}) == g


def test_a_device_hook_replaces_the_launch(stand_in_device):
    launched = []

    def device(p, arrays):
        launched.append(p.n)
        arrays["out"][...] = arrays["x"] * 2
    sp = ProblemSpace(sizes=[Size("n", 1, 50)], arrays=[Array("x", ("n",), np.float32),
                                                       Array("out", ("n",), np.float32, role="out")],
                      reference=lambda x: x * 2, device=device, interpretable=False)
    report = check(transpose(), sp, backends=("gpu",), max_examples=5)  # the kernel is never launched
    assert report.runs == {"gpu": 5} and len(launched) == 5 and stand_in_device["launches"] == 0
    sp.reference = lambda x: x * 3
    e = failure_of(transpose(), sp, backends=("gpu",), max_examples=5)
    assert "[gpu] output out differs" in str(e) and e.problem.sizes["n"] == 1


def test_hopper_space_draws_tma_store_widths_and_refuses_16_bit_c():
    """The TMA-store epilogue needs 16-byte C rows: its space's N is a multiple of 4; M and N are drawn
    around the C tile along each; a c16 HopperGemm (C rounded once to 16 bits) has no space, with the
    reason."""
    from ptxforge.errors import ValidationError
    from ptxforge.schedules.hopper import HopperGemm
    from ptxforge.testing.schedule_problems import hopper_gemm_space
    sizes = {s.name: s for s in hopper_gemm_space(HopperGemm("s8", epilogue="tma")).sizes}
    assert sizes["n"].multiple_of == 4 and sizes["n"].low == 4
    assert hopper_gemm_space(HopperGemm("s8")).sizes[1].multiple_of == 1
    # the drawn M and N reach two C tiles and one more along each: swapped (the kernel's N tile runs along
    # M) and with the two consumers sharing the tile's rows
    from ptxforge.schedules.hopper.defaults import SKINNY_S4_32
    sizes = {s.name: s for s in hopper_gemm_space(HopperGemm("s4", **SKINNY_S4_32)).sizes}
    assert (sizes["m"].tile, sizes["m"].high, sizes["n"].tile, sizes["n"].high) == (32, 65, 64, 129)
    with pytest.raises(ValidationError, match="c16"):
        hopper_gemm_space(HopperGemm("bf16", epilogue="tma", c16=True))
