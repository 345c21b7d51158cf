"""The property-test API at its edges: a wrong kernel or a wrong reference never passes, drawn values
stay within what was asked for, and reports, reproducers and settings say what really happened."""

import textwrap
import unittest

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ptxforge import KernelBuilder, f32, u32
from ptxforge.testing import (Array, ProblemSpace, PropertyFailure, Scalar, Size, cdiv, check, exact, mutation_check,
                              relative, ulps)
from ptxforge.testing.copy_strategies import tile_copy_schedules
from ptxforge.testing.gemm_strategies import gemm_schedules
from ptxforge.testing.problem import poison_of

SEEDED = settings(derandomize=True, database=None)
interp_only = dict(backends=("interp",))


def elementwise(name, body, *, block=128):
    """A one-thread-per-element kernel over x -> y (f32, n elements); `body(k, v, py)` stores y from v = x[i]."""
    k = KernelBuilder(name, target="sm_80", maxntid=block)
    x, y = k.param_ptr("x", f32), k.param_ptr("y", f32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        body(k, k.ld(k.add(x, off), type=f32), k.add(y, off))
    return k.module()


def elementwise_space(reference, tolerance, *, high=1000, **array):
    return ProblemSpace(sizes=[Size("n", 1, high, tile=128)],
                        arrays=[Array("x", ("n",), np.float32, **array),
                                Array("y", ("n",), np.float32, role="out", tolerance=tolerance)],
                        grid=lambda p: cdiv(p.n, 128), block=128, reference=reference)


def root(x):
    """numpy's square root, NaN for negative x (quietly)."""
    with np.errstate(invalid="ignore"):
        return np.sqrt(x)


def positive_only(k, v, py):  # y is written only where x > 0
    with k.if_(k.setp("gt", v, k.mov(0.0, type=f32))):
        k.st(py, v)


def square_root(k, v, py):  # NaN for negative x
    k.st(py, k.sqrt(v, mode="rn"))


def square_root_of_non_negatives(k, v, py):  # y never written where the root is NaN
    with k.if_(k.setp("ge", v, k.mov(0.0, type=f32))):
        k.st(py, k.sqrt(v, mode="rn"))


# ---------------------------------------------------------------- unwritten outputs under a tolerance

@pytest.mark.parametrize("tolerance", [relative(1e-5, atol=1e-7), relative(0.5, atol=1.0), ulps(4)],
                         ids=["small_atol", "large_atol", "ulps"])
def test_an_unwritten_float_element_fails_under_any_tolerance(tolerance):
    space = elementwise_space(lambda x: np.maximum(x, 0), tolerance)
    with pytest.raises(PropertyFailure, match=r"poison: never written"):
        check(elementwise("relu", positive_only), space, max_examples=20, settings=SEEDED, **interp_only)


def test_an_unwritten_element_fails_where_the_reference_expects_nan():
    space = elementwise_space(root, ulps(1))
    with pytest.raises(PropertyFailure, match=r"poison: never written"):
        check(elementwise("root", square_root_of_non_negatives), space, max_examples=20, settings=SEEDED,
              **interp_only)


def test_a_kernel_that_writes_nan_where_the_reference_has_nan_passes():
    space = elementwise_space(root, ulps(1))
    seen_nan = []
    report = check(elementwise("root", square_root), space, max_examples=20, settings=SEEDED,
                   property=lambda p, o: seen_nan.append(np.isnan(o.outputs["interp"]["y"]).any()), **interp_only)
    assert report.problems == 20 and any(seen_nan)


def test_elements_the_reference_leaves_unwritten_pass_when_the_kernel_leaves_them_too():
    space = elementwise_space(lambda x, y: np.where(x > 0, x, y), relative(1e-5, atol=1e-3))
    assert check(elementwise("relu", positive_only), space, max_examples=20, settings=SEEDED,
                 **interp_only).problems == 20


def test_a_written_nan_where_the_reference_expects_the_poison_fails():
    space = elementwise_space(lambda x, y: np.where(x >= 0, root(x), y), ulps(1))
    with pytest.raises(PropertyFailure, match=r"differs from the reference \(within 1 ulp\)"):
        check(elementwise("root", square_root), space, max_examples=20, settings=SEEDED, **interp_only)


@pytest.mark.parametrize("dtype, bits", [(np.float32, "7fe7a7a7"), (np.float16, "7fa7"), (np.float64, "7fffa7a7a7a7a7a7"),
                                         ("bf16", "7fe7"), (np.int32, "a7a7a7a7"), ("s4", "a7")])
def test_outputs_start_as_the_poison_of_their_type(dtype, bits):
    a = Array("y", (3,), dtype, role="out")
    y = ProblemSpace(arrays=[a]).make().arrays["y"]
    assert y.tobytes() == a.poison.tobytes() * len(y) and a.poison.tobytes()[::-1].hex() == bits
    if a.container.kind == "f" or a.bf16:
        as_float = (a.poison.astype(np.uint32) << 16).view(np.float32) if a.bf16 else a.poison
        assert np.isnan(as_float)


def test_the_poison_compares_bit_for_bit_under_a_tolerance():
    p = poison_of(np.float32)
    got = np.array([p, p, np.nan, 1.0], np.float32)
    want = np.array([0.0, p, p, 1.0 + 1e-7], np.float32)
    assert list(relative(0.1, atol=1.0).passes(got, want, poison=p)) == [False, True, False, True]
    assert list(relative(0.1, atol=1.0).passes(got, want)) == [False, True, True, True]  # NaN matches any NaN
    assert list(exact().passes(got, want, poison=p)) == [False, True, False, False]


# ---------------------------------------------------------------- what the reference must give

def two_outputs():
    """a = 2x; b is never written."""
    k = KernelBuilder("two", target="sm_80", maxntid=128)
    x, a = k.param_ptr("x", f32), k.param_ptr("a", f32)
    k.param_ptr("b", f32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        v = k.ld(k.add(x, off), type=f32)
        k.st(k.add(a, off), k.add(v, v))
    return k.module()


def test_an_output_the_reference_leaves_out_is_an_error():
    space = ProblemSpace(sizes=[Size("n", 1, 500, tile=128)],
                         arrays=[Array("x", ("n",)), Array("a", ("n",), role="out"), Array("b", ("n",), role="out")],
                         grid=lambda p: cdiv(p.n, 128), block=128, reference=lambda x: {"a": x + x})
    with pytest.raises(ValueError, match=r"the reference returned no value for output\(s\) \['b'\]"):
        check(two_outputs(), space, max_examples=5, settings=SEEDED, **interp_only)


def copies_in_memory_order():
    """dst gets src's elements in src's order: a copy, not a transpose."""
    k = KernelBuilder("transpose", target="sm_80", maxntid=256)
    src, dst = k.param_ptr("src", f32), k.param_ptr("dst", f32)
    rows, cols = k.param_value("rows", u32), k.param_value("cols", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, k.mul(rows, cols))):
        off = k.mul(i, 4, mode="wide")
        k.st(k.add(dst, off), k.ld(k.add(src, off), type=f32))
    return k.module()


def test_a_reference_of_another_shape_is_an_error_even_with_as_many_elements():
    space = ProblemSpace(sizes=[Size("rows", 0, 96, tile=32), Size("cols", 1, 96, tile=32)],
                         arrays=[Array("src", ("rows", "cols")), Array("dst", ("cols", "rows"), role="out")],
                         grid=lambda p: cdiv(p.rows * p.cols, 256), block=256,
                         reference=lambda src: src)  # forgot .T: (rows, cols), dst is (cols, rows)
    with pytest.raises(ValueError, match=r"the reference gave output dst shape \(2, 3\); the array has shape \(3, 2\)"):
        space.expected(space.make(rows=2, cols=3))
    with pytest.raises(ValueError, match=r"the reference gave output dst shape"):
        check(copies_in_memory_order(), space, max_examples=30, settings=SEEDED, **interp_only)


# ---------------------------------------------------------------- mutation check

def vadd(*, wrong: bool):
    """z = x + y (or, wrong, x - y), then three barriers that protect nothing."""
    k = KernelBuilder("vadd", target="sm_80", maxntid=64)
    x, y, z = k.param_ptr("x", f32), k.param_ptr("y", f32), k.param_ptr("z", f32)
    n = k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        a, b = k.ld(k.add(x, off), type=f32), k.ld(k.add(y, off), type=f32)
        k.st(k.add(z, off), k.sub(a, b) if wrong else k.add(a, b))
    for _ in range(3):
        k.bar_sync(0)
    return k.module()


def test_a_mutant_is_not_killed_by_a_bug_of_the_unmutated_kernel():
    # the kernel is wrong on every problem but the first few it is asked for (the base check's): a bug the
    # base check misses and the mutants' problems hit
    right, wrong, first = vadd(wrong=False), vadd(wrong=True), {}

    def kernel(p):
        key = (p.n, p.seed)
        first.setdefault(key, len(first) >= 12)
        return wrong if first[key] else right

    space = ProblemSpace(sizes=[Size("n", 1, 128, tile=64)],
                         arrays=[Array("x", ("n",)), Array("y", ("n",)), Array("z", ("n",), role="out")],
                         grid=lambda p: cdiv(p.n, 64), block=64, reference=lambda x, y: x + y, kernel=kernel)
    with pytest.raises(PropertyFailure, match=r"(?s)the unmutated kernel fails a problem drawn for a mutant.*"
                                              r"output z differs from the reference") as info:
        mutation_check(None, space, kinds=["drop_bar_sync"], max_examples=10, settings=settings(database=None))
    assert "transform" not in str(info.value)  # its reproducer runs the kernel itself


def saxpy_with_a_drawn_scalar():
    from ptxforge.testing.kernels import saxpy
    return saxpy(block=128), ProblemSpace(
        sizes=[Size("n", 1, 600, tile=128)],
        arrays=[Array("x", ("n",)), Array("y", ("n",), role="inout", tolerance=relative(1e-5, atol=1e-6))],
        scalars=[Scalar("a", st.floats(-2, 2, width=32))],
        grid=lambda p: cdiv(p.n, 128), block=128, reference=lambda x, y, a: np.float32(a) * x + y)


def test_mutation_check_takes_a_space_with_a_drawn_scalar():
    module, space = saxpy_with_a_drawn_scalar()
    report = mutation_check(module, space, max_examples=10, settings=SEEDED)
    assert report.results and not report.survivors, str(report)


# ---------------------------------------------------------------- drawn data and sizes

def as_float64(a, dtype):
    """An array of `dtype` ("bf16": bits in uint16) as float64 values."""
    return ((a.astype(np.uint32) << 16).view(np.float32) if dtype == "bf16" else a).astype(np.float64)


@pytest.mark.parametrize("dtype, low, high", [(np.float16, 0.0, 1.0), (np.float16, None, None), ("bf16", 0.3, 1.0),
                                              ("bf16", -4.0, -0.3), (np.float32, 0.3, 1.0)])
def test_float_data_lies_in_low_high_after_rounding(dtype, low, high):
    x = Array("x", (200_000,), dtype, low=low, high=high)
    data = as_float64(ProblemSpace(arrays=[x, Array("y", (1,), role="out")]).make(seed=1).arrays["x"], dtype)
    lo, hi = (-4.0 if low is None else low), (4.0 if high is None else high)
    assert lo <= data.min() and data.max() < hi
    least, most = x.float_range()
    assert lo <= least <= data.min() and data.max() <= most < hi


def has_a_value_in(dtype, low, high) -> bool:
    """Whether some value of the float type lies in [low, high): every bit pattern of a 16-bit type,
    and the least value >= low of a wider one."""
    if dtype in ("bf16", np.float16):
        with np.errstate(invalid="ignore"):  # the signalling NaNs among the patterns
            every = as_float64(np.arange(1 << 16, dtype=np.uint16).view(np.uint16 if dtype == "bf16" else dtype),
                               dtype)
        return bool(((every >= low) & (every < high)).any())
    least = dtype(low)
    if least < low:
        least = np.nextafter(least, dtype(np.inf))
    return bool(least < high)


@settings(max_examples=60, database=None)
@given(st.data())
def test_every_drawn_float_lies_in_low_high(data):
    dtype = data.draw(st.sampled_from([np.float16, "bf16", np.float32, np.float64]), label="dtype")
    low = data.draw(st.floats(-70000, 70000), label="low")
    high = data.draw(st.floats(low, 70000).filter(lambda h: h > low), label="high")
    try:
        x = Array("x", ("n",), dtype, low=low, high=high)
    except ValueError as e:  # only when the type has no value in the range
        assert "value lies in [low, high)" in str(e) and not has_a_value_in(dtype, low, high)
        return
    space = ProblemSpace(sizes=[Size("n", 1, 64)], arrays=[x, Array("y", (1,), role="out")])
    values = as_float64(data.draw(space.problems(), label="problem").arrays["x"], dtype)
    assert (values >= low).all() and (values < high).all()


def test_a_float_range_the_type_has_no_value_in_is_refused():
    with pytest.raises(ValueError, match=r"Array x: no float16 value lies in \[low, high\) = \[0.3, 0.30001\)"):
        Array("x", ("n",), np.float16, low=0.3, high=0.30001)


# ---------------------------------------------------------------- reproducers

def clamp_below():
    """y = max(x, a) over f32 (max.f32 drops a NaN operand, numpy's maximum keeps it)."""
    k = KernelBuilder("clamp_below", target="sm_80", maxntid=32)
    x, y = k.param_ptr("x", f32), k.param_ptr("y", f32)
    n, a = k.param_value("n", u32), k.param_value("a", f32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        k.st(k.add(y, off), k.max(k.ld(k.add(x, off), type=f32), a))
    return k.module()


@pytest.mark.parametrize("a", [float("nan"), -float("nan"), np.float32("nan")], ids=["nan", "-nan", "float32_nan"])
def test_the_reproducer_of_a_non_finite_scalar_is_python_that_fails_the_same_way(a):
    space = ProblemSpace(sizes=[Size("n", 1, 100, tile=32)],
                         arrays=[Array("x", ("n",)), Array("y", ("n",), role="out")],
                         scalars=[Scalar("a", st.just(a))], grid=lambda p: cdiv(p.n, 32), block=32,
                         reference=lambda x, a: np.maximum(x, np.float32(a)) if a == a else np.full_like(x, a))
    kernel = clamp_below()
    with pytest.raises(PropertyFailure) as info:
        check(kernel, space, max_examples=10, settings=SEEDED, **interp_only)
    text = str(info.value)
    code = textwrap.dedent(text.split("reproduce:\n", 1)[1])
    ns = {"kernel": kernel, "space": space}
    with pytest.raises(PropertyFailure) as again:
        exec(code.replace("check_problem(kernel, space,", "check_problem(kernel, space, backends=('interp',),"), ns)
    assert again.value.problem.call_args() == info.value.problem.call_args()
    assert np.array(again.value.problem.scalars["a"]).tobytes() == np.array(a).tobytes()


@given(st.one_of(st.floats(), st.floats(width=32).map(np.float32), st.floats(width=16).map(np.float16),
                 st.integers(), st.tuples(st.integers(), st.floats())))
def test_a_literal_evaluates_to_the_same_value_and_bits(v):
    from ptxforge.testing.problem import float_from_bits, literal
    assert same_value(eval(literal(v), {"float_from_bits": float_from_bits}), v)


def same_value(back, v) -> bool:
    """`back` is `v`: tuples element by element, floats by their bits (a finite numpy float may come
    back as the Python float of the same value)."""
    if isinstance(v, tuple):
        return type(back) is tuple and len(back) == len(v) and all(map(same_value, back, v))
    if isinstance(v, np.floating) and np.isfinite(v):
        return type(back) is float and back == v and np.signbit(back) == np.signbit(v)
    if isinstance(v, (float, np.floating)):
        return type(back) is type(v) and np.array(back).tobytes() == np.array(v).tobytes()
    return type(back) is type(v) and back == v


def first_40_only(k, v, py):  # y[i] is written only for i < 40: every n > 40 fails, n <= 40 passes
    with k.if_(k.setp("lt", k.global_index(), 40)):
        k.st(py, v)


@pytest.mark.parametrize("runs", [SEEDED, settings(database=None)], ids=["derandomized", "random"])
def test_a_failure_shrinks_to_the_least_failing_size_between_the_edges(runs):
    space = elementwise_space(lambda x: x, None, high=300)  # tile 128: edges 127, 129, 255, 257...
    assert 41 not in Size("n", 1, 300, tile=128).values_near_edges()
    with pytest.raises(PropertyFailure) as info:
        check(elementwise("first_40", first_40_only), space, max_examples=40, settings=runs, **interp_only)
    assert info.value.problem.sizes == {"n": 41}


# ---------------------------------------------------------------- schedule strategies

@settings(max_examples=300, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
@given(gemm_schedules(max_acc=128, targets=("sm_86",)))
def test_every_drawn_gemm_schedule_fits_its_targets_shared_memory(g):
    from ptxforge.isa.targets import Target
    assert 2 <= g.stages and g.shared_bytes <= Target.parse(g.target).limits.shared_per_cta


@pytest.mark.parametrize("options, says", [(dict(max_acc=4), "max_acc=4 leaves no warp tile"),
                                           (dict(max_threads=16), "max_threads=16 leaves no warp"),
                                           (dict(targets=()), "need at least one value")])
def test_gemm_options_that_leave_nothing_to_draw_are_an_invalid_argument(options, says):
    from hypothesis import find
    from hypothesis.errors import InvalidArgument
    with pytest.raises(InvalidArgument, match=says):
        find(gemm_schedules(**options), lambda _: True)


def test_a_small_thread_budget_still_draws():
    from hypothesis import find
    assert find(gemm_schedules(max_threads=32), lambda _: True).threads == 32


@settings(max_examples=100, deadline=None, database=None)
@given(tile_copy_schedules(threads=(32, 96), completions=("mbarrier", "groups")))
def test_tile_copies_draw_only_the_thread_counts_given(tc):
    assert tc.threads in (32, 96) and tc.completion == "groups"  # mbarrier needs a multiple of 64 threads


def test_mbarrier_completion_without_a_thread_count_it_can_take_is_an_invalid_argument():
    from hypothesis import find
    from hypothesis.errors import InvalidArgument
    with pytest.raises(InvalidArgument, match=r"mbarrier completion .* multiple of 64 threads; threads \(32, 96\)"):
        find(tile_copy_schedules(threads=(32, 96), completions=("mbarrier",)), lambda _: True,
             settings=settings(database=None))


# ---------------------------------------------------------------- failure reports

def times_three_rounded_toward_zero(k, v, py):
    k.st(py, k.mul(v, k.mov(3.0, type=f32), mode="rz"))


def test_a_float64_reference_is_shown_as_the_float32_value_it_was_compared_as():
    space = elementwise_space(lambda x: x.astype(np.float64) * 3, None)
    with pytest.raises(PropertyFailure) as info:
        check(elementwise("times3", times_three_rounded_toward_zero), space, max_examples=10, settings=SEEDED,
              **interp_only)
    e = info.value
    line = next(ln for ln in str(e).splitlines() if ln.strip().startswith("y["))
    i = int(line.split("[", 1)[1].split("]", 1)[0])
    want64 = e.problem.initial["x"].astype(np.float64)[i] * 3
    want32 = np.float32(want64)
    assert f"want {want32} (0x{int(np.array(want32).view(np.uint32)):08x}) (the reference gave {float(want64)!r})" in line


# ---------------------------------------------------------------- settings and spaces

def test_a_loaded_profiles_phases_are_kept():
    from hypothesis import Phase
    from ptxforge.testing.kernels import transpose
    space = ProblemSpace(sizes=[Size("rows", 0, 40, tile=32), Size("cols", 1, 40, tile=32)],
                         arrays=[Array("src", ("rows", "cols")), Array("dst", ("cols", "rows"), role="out")],
                         grid=lambda p: (cdiv(p.cols, 32), cdiv(p.rows, 32)), block=(32, 8),
                         reference=lambda src: src.T)
    settings.register_profile("explicit_only", settings(phases=[Phase.explicit], database=None))
    previous = settings.get_current_profile_name()
    settings.load_profile("explicit_only")
    try:  # Hypothesis skips a test that its phases let draw nothing
        with pytest.raises(unittest.SkipTest, match="run no test cases"):
            check(transpose(), space, **interp_only)
    finally:
        settings.load_profile(previous)
    assert check(transpose(), space, max_examples=3, settings=SEEDED, **interp_only).problems == 3


def test_a_shape_naming_an_unknown_size_is_refused_when_the_space_is_made():
    with pytest.raises(ValueError, match=r"Array x: shape names 'm', which is not a size of the space \(sizes: \['n'\]\)"):
        ProblemSpace(sizes=[Size("n")], arrays=[Array("x", ("n", "m")), Array("y", ("n",), role="out")])
    with pytest.raises(ValueError, match=r"Array y: shape names 'k'"):
        ProblemSpace(sizes=[Size("n")], arrays=[Array("y", "k", role="out")])


def test_a_tiles_quarters_are_edges():
    assert {8, 9, 16, 17, 24, 25} <= set(Size("cols", 1, 96, tile=32).values_near_edges())
