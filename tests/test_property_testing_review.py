"""A new user's review of ptxforge.testing: wrong arguments are refused by name, with what would be legal.

CPU only: every check here runs on the interpreter (backends=("interp",)) or fails before anything runs.
"""

import numpy as np
import pytest
from hypothesis import strategies as st

from ptxforge import KernelBuilder, s32, u16, u32
from ptxforge.testing import Array, ProblemSpace, Scalar, Size, cdiv, check, check_problem, exact, relative, ulps

INTERP = dict(backends=("interp",))


def axpy_i():
    """c = a + b * s over int32, guarded by n (a kernel written for this review)."""
    k = KernelBuilder("axpy_i", target="sm_80", maxntid=128)
    a, b, c = k.param_ptr("a", s32), k.param_ptr("b", s32), k.param_ptr("c", s32)
    n, s = k.param_value("n", u32), k.param_value("s", s32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 4, mode="wide")
        va, vb = k.ld(k.add(a, off), type=s32), k.ld(k.add(b, off), type=s32)
        k.st(k.add(c, off), k.mad(vb, s, va, mode="lo"))
    return k.module()


def axpy_space(**kw):
    options = dict(
        sizes=[Size("n", 0, 300, tile=128)],
        arrays=[Array("a", ("n",), np.int32), Array("b", ("n",), np.int32), Array("c", ("n",), np.int32, role="out")],
        scalars=[Scalar("s", st.integers(-5, 5))],
        grid=lambda p: cdiv(p.n, 128), block=128,
        reference=lambda a, b, s: (a.astype(np.int64) + b.astype(np.int64) * s).astype(np.int32))
    options.update(kw)
    return ProblemSpace(**options)


# ---------------------------------------------------------------- tolerances

@pytest.mark.parametrize("bad", [1e-5, "exact", relative, 0])
def test_array_refuses_a_tolerance_that_is_not_one(bad):
    # a float (or the function, not called) used to be kept and fail later as AttributeError 'passes'
    with pytest.raises(TypeError, match=r"Array c: tolerance must be .*exact\(\), ulps\(n\) or relative\(rtol"):
        Array("c", ("n",), np.float32, role="out", tolerance=bad)


@pytest.mark.parametrize("bad", [1.5, "2", True, None])
def test_ulps_takes_a_whole_number(bad):
    # 1.5 was truncated to 1 without a word, "2" and True accepted
    with pytest.raises(TypeError, match=r"ulps takes a whole number n >= 0"):
        ulps(bad)


def test_ulps_accepts_numpy_integers():
    assert ulps(np.int64(3)).ulps == 3


@pytest.mark.parametrize("rtol, atol", [(float("nan"), 0.0), ("1e-5", 0.0), (1e-5, float("inf")), (True, 0.0)])
def test_relative_takes_finite_numbers(rtol, atol):
    # a NaN rtol made every comparison fail; a string died on '<' with no name
    with pytest.raises((TypeError, ValueError), match=r"relative takes finite rtol, atol >= 0"):
        relative(rtol, atol)


# ---------------------------------------------------------------- sizes

@pytest.mark.parametrize("field, kw", [("low", dict(low=0.5)), ("high", dict(high=10.0)), ("low", dict(low=False)),
                                       ("high", dict(high="10")), ("multiple_of", dict(multiple_of=2.5)),
                                       ("tile", dict(tile=32.0)), ("tile", dict(tile=True))])
def test_size_bounds_are_whole_numbers(field, kw):
    # Size("n", 0.5, 2) was kept and drew 0, below its low bound; multiple_of=2.5 drew float sizes
    with pytest.raises(TypeError, match=rf"Size n: {field} must be a whole number \(an int\)"):
        Size("n", **{"low": 0, "high": 10, **kw})


@pytest.mark.parametrize("tile", [0, -3])
def test_size_tile_is_positive(tile):
    with pytest.raises(ValueError, match=r"Size n: tile must be >= 1 \(or None\)"):
        Size("n", 0, 10, tile=tile)


def test_size_numpy_integers_are_whole_numbers():
    s = Size("n", np.int64(0), np.int32(10), tile=np.int64(4))
    assert s.values_near_edges()[0] == 0


def test_size_with_only_out_of_range_edges_says_so():
    # it claimed "no multiple of 1 lies in [0, 10]", which is false: its edge values lay outside
    with pytest.raises(ValueError, match=r"Size n: none of its edge values \(50,\) lies in \[0, 10\]"):
        Size("n", 0, 10, edges=(50,), default_edges=False)


# ---------------------------------------------------------------- arrays

@pytest.mark.parametrize("dtype, low, high", [(np.int32, 5, 1), (np.int32, 0, 2 ** 40), (np.uint8, -1, 3),
                                              ("s4", -9, 7), ("u4", 0, 16), (np.int16, 0.5, 3)])
def test_integer_array_range_is_checked_when_declared(dtype, low, high):
    # numpy said only "low > high" or "high is out of bounds for int32", at the first draw and with no array named
    with pytest.raises(ValueError, match=r"Array a: low and high must be whole numbers with .* <= low <= high <= "):
        Array("a", ("n",), dtype, low=low, high=high)


def test_integer_array_range_inside_its_type_is_kept():
    a = Array("a", ("n",), np.int8, low=-128, high=127)
    assert (a.low, a.high) == (-128, 127)


@pytest.mark.parametrize("shape, what", [((lambda p: p.n - 500,), r"-\d+"), ((lambda p: p.n / 2,), r"\d+\.\d+")])
def test_array_shape_must_be_whole_sizes(shape, what):
    # "negative dimensions are not allowed" came from numpy with no array named; a float was truncated
    space = axpy_space(arrays=[Array("a", shape, np.int32), Array("b", ("n",), np.int32),
                               Array("c", ("n",), np.int32, role="out")])
    with pytest.raises(ValueError, match=rf"Array a: shape .*{what}.* for problem n=7.*whole numbers >= 0"):
        space.make(n=7, s=1)


def copy16():
    k = KernelBuilder("copy16", target="sm_80", maxntid=64)
    x, y, n = k.param_ptr("x", u16), k.param_ptr("y", u16), k.param_value("n", u32)
    i = k.global_index()
    with k.if_(k.setp("lt", i, n)):
        off = k.mul(i, 2, mode="wide")
        k.st(k.add(y, off), k.ld(k.add(x, off), type=u16), type=u16)
    return k.module()


def test_a_bf16_output_takes_a_float_reference_rounded_to_bf16():
    # the float reference was cast to uint16 as integers (0.546875 -> 0): "got 0.546875, want 0.0 (the reference
    # gave 0.546875)" for a kernel that was right
    from ptxforge.bfloat16 import from_bf16
    space = ProblemSpace(sizes=[Size("n", 1, 100, tile=64)], grid=lambda p: cdiv(p.n, 64), block=64,
                         arrays=[Array("x", ("n",), "bf16"), Array("y", ("n",), "bf16", role="out")],
                         reference=lambda x: from_bf16(x).astype(np.float64))
    check(copy16(), space, max_examples=10, **INTERP)


# ---------------------------------------------------------------- the space: launch, make, arguments

@pytest.mark.parametrize("grid, what", [(lambda p: -1, r"-1"), (lambda p: p.n / 128, r"0\.0546875"),
                                        ((2, 0.5), r"0\.5")])
def test_a_grid_that_is_not_whole_sizes_is_refused(grid, what):
    # a negative grid was launched as 1 and the problem judged as if it had run; a float grid died on iteration
    with pytest.raises(ValueError, match=rf"grid gave .*{what}.* for problem n=7.*whole numbers >= 0"):
        axpy_space(grid=grid).make(n=7, s=1)


def test_a_grid_dimension_of_zero_still_launches_as_one():
    assert axpy_space().make(n=0, s=1).grid == (1, 1, 1)


@pytest.mark.parametrize("kw, name", [(dict(choices={"ctas": []}), "choices\\['ctas'\\]"), (dict(block=[]), "block")])
def test_an_empty_list_of_launch_choices_is_refused(kw, name):
    # IndexError from make, "Cannot sample from a length-zero sequence" from problems()
    with pytest.raises(ValueError, match=rf"ProblemSpace: {name} is an empty list"):
        axpy_space(**kw)


@pytest.mark.parametrize("n", [7.9, np.bool_(True), True, "7", -3])
def test_make_takes_whole_sizes(n):
    # n=7.9 ran n=7, n=True ran n=1 and a reproducer edited by hand silently meant another problem
    with pytest.raises((TypeError, ValueError), match=r"make: size n must be a whole number >= 0"):
        axpy_space().make(n=n, s=1)


def test_make_takes_numpy_integer_sizes():
    p = axpy_space().make(n=np.int64(7), s=np.int32(2))
    assert p.sizes == {"n": 7} and type(p.sizes["n"]) is int


@pytest.mark.parametrize("seed", [-1, 2 ** 32, 1.5, True])
def test_make_takes_a_seed_of_the_drawn_range(seed):
    with pytest.raises((TypeError, ValueError), match=r"make: seed must be a whole number in \[0, 2\*\*32 - 1\]"):
        axpy_space().make(n=3, s=1, seed=seed)


@pytest.mark.parametrize("args", [("a", "b", "c", "n", "s", "n"), ("a", "b", "c", "n")])
def test_args_of_the_wrong_length_name_args(args):
    # the launcher's "takes 5 arguments, got 6" pointed at a line of the runner
    with pytest.raises(ValueError, match=r"the space's args= lists \d arguments; kernel axpy_i takes 5 \(a, b, c, n, s\)"):
        check_problem(axpy_i(), axpy_space(args=args), n=3, s=1, **INTERP)


def test_a_kernel_parameter_the_space_lacks_is_named():
    with pytest.raises(KeyError, match=r"kernel argument 's' is not a size, array, scalar or launch choice"):
        check_problem(axpy_i(), axpy_space(scalars=[], reference=lambda a, b: a + b), n=3, **INTERP)


# ---------------------------------------------------------------- the reference

def _positional_only(a, /):
    return a


@pytest.mark.parametrize("ref", [lambda *arrays: arrays[0], _positional_only])
def test_a_reference_taking_positional_arguments_is_refused(ref):
    # *arrays got nothing (IndexError inside the user's lambda); a positional-only parameter a TypeError of Python's
    with pytest.raises(TypeError, match=r"the reference is called with names .*: take them as parameters"):
        axpy_space(reference=ref)


def test_a_reference_that_is_not_a_function_is_refused():
    with pytest.raises(TypeError, match=r"ProblemSpace: reference must be a function"):
        axpy_space(reference=np.zeros(3))


def test_a_reference_returning_none_says_so():
    # "the reference gave output c shape ()" hid that it returned nothing (a forgotten return)
    with pytest.raises(ValueError, match=r"the reference returned None for output c"):
        check_problem(axpy_i(), axpy_space(reference=lambda a: None), n=3, s=1, **INTERP)


# ---------------------------------------------------------------- without a GPU

def test_a_check_without_a_gpu_says_the_gpu_was_not_used(monkeypatch):
    # "axpy_i: 5 problems passed (5 on interp)" read like a full pass; nothing said the GPU was missing, or why
    from ptxforge.runtime.device import gpu_skip_reason
    if gpu_skip_reason() is None:
        pytest.skip("a GPU is present: the report counts its runs instead")
    monkeypatch.delenv("PTXFORGE_REQUIRE_GPU", raising=False)
    report = check(axpy_i(), axpy_space(), max_examples=5)
    assert report.runs == {"interp": 5} and report.skipped["gpu"].startswith("no usable GPU (")
    assert gpu_skip_reason() in report.skipped["gpu"] and "PTXFORGE_REQUIRE_GPU=1" in report.skipped["gpu"]
    assert str(report).startswith("axpy_i: 5 problems passed (5 on interp; gpu not used: no usable GPU); largest {")


# ---------------------------------------------------------------- the public strategies

def test_strategies_work_under_given_as_the_docstring_shows():
    from hypothesis import given, settings

    import ptxforge
    from ptxforge.testing import strategies as pst

    @settings(max_examples=3, database=None, deadline=None)
    @given(pst.kernels(families=("arith",)))
    def test_assembles(drawn):
        target, specs = drawn
        assert ".entry prop" in pst.build_module(target, specs).ptx

    test_assembles()


def _bad_strategies():
    from ptxforge.testing import interp_strategies as ist
    from ptxforge.testing import launch_strategies as lst
    from ptxforge.testing import strategies as pst
    return [
        (lambda: ist.float_arrays("f8"), r"float_arrays: fmt must be one of 'f16', 'bf16', 'f32', 'f64', got 'f8'"),
        (lambda: ist.packed_words(3), r"packed_words: lanes must be 2 \(half-words\) or 4 \(bytes\), got 3"),
        (lambda: ist.mma_forms(max_sm=10), r"mma_forms: no mma.sync form .*max_sm=10"),
        (lambda: ist.launch_shapes(0), r"launch_shapes: max_threads and max_ctas must be >= 1, got 0 and 4"),
        (lambda: pst.instruction_specs("sm_80", families=("nope",)),
         r"instruction_specs: unknown families \['nope'\]; the families are arith, bits"),
        (lambda: pst.targets(()), r"targets: names is empty; give some of sm_80"),
        (lambda: pst.targets(("sm_99",)), r"target sm_99 is not supported"),  # drawn, then refused by each use
        (lambda: lst.element_counts(0), r"element_counts: max_n must be >= 1, got 0"),
        (lambda: lst.block_sizes(16), r"block_sizes: max_threads=16 holds no whole warp"),
    ]


@pytest.mark.parametrize("case", range(len(_bad_strategies())))
def test_strategies_with_impossible_bounds_say_which(case):
    # each used to fail at the first draw with KeyError 'f8', "Cannot sample from a length-zero sequence" and the like
    make, message = _bad_strategies()[case]
    with pytest.raises(Exception, match=message):
        make()


def test_instruction_specs_takes_one_family_as_a_string():
    # families="tensor" was read letter by letter: KeyError 't'
    from ptxforge.testing import strategies as pst
    from hypothesis import find, settings
    drawn = find(pst.instruction_specs("sm_80", families="arith"), lambda _: True, settings=settings(database=None))
    assert drawn.family == "arith"


def test_a_failing_drawn_instruction_is_shown_as_its_spec():
    # Hypothesis printed the call that built it, "s.with_params(imm=None, guard='p')", which names no instruction
    from hypothesis import given, settings
    from ptxforge.testing import strategies as pst

    @settings(max_examples=1, database=None)
    @given(pst.instruction_specs("sm_80", families="arith"))
    def fails(spec):
        raise AssertionError("planted")

    with pytest.raises(AssertionError, match="planted") as info:
        fails()
    shown = "\n".join(getattr(info.value, "__notes__", []))
    assert "Spec(family='arith'" in shown and "with_params" not in shown, shown


# ---------------------------------------------------------------- the decorator

def test_property_test_passes_problem_and_outcome_to_a_star_args_function():
    # a function taking *args counted as one parameter and got the problem alone
    from ptxforge.testing import property_test
    seen = []

    @property_test(axpy_i(), axpy_space(), max_examples=2, **INTERP)
    def test_it(*args):
        seen.append(len(args))

    test_it()
    assert seen and set(seen) == {2}


# ---------------------------------------------------------------- mutants and the mutation check

def test_mutants_of_takes_one_kind_as_a_string():
    # kinds="off_by_one_guard" was read letter by letter: "unknown mutant kind 'o'"
    from ptxforge.testing.mutants import mutants_of
    assert [m.kind for m in mutants_of(axpy_i().kernel("axpy_i"), "off_by_one_guard")] == ["off_by_one_guard"]


@pytest.mark.parametrize("bad", [0, -1, 1.5])
def test_mutants_of_refuses_a_max_per_kind_below_one(bad):
    # 0 or -1 tried no mutant, and mutation_check reported "0 of 0 mutants killed, 0 survived": a vacuous pass
    from ptxforge.testing.mutants import mutants_of
    with pytest.raises(ValueError, match=r"max_per_kind must be a whole number >= 1, or None for every site"):
        mutants_of(axpy_i().kernel("axpy_i"), max_per_kind=bad)


def test_a_mutant_of_a_module_asks_for_its_kernel():
    # AttributeError: 'Module' object has no attribute 'body'
    from ptxforge.testing.mutants import off_by_one_guard
    with pytest.raises(TypeError, match=r"off_by_one_guard takes a finished Kernel \(module.kernel\('axpy_i'\)\)"):
        off_by_one_guard(axpy_i())


def test_a_mutation_check_that_tried_no_mutant_says_it_proves_nothing():
    from ptxforge.testing import mutation_check
    report = mutation_check(axpy_i(), axpy_space(), kinds=("drop_bar_sync",), max_examples=3)
    assert not report.results
    assert "no mutant of these kinds applies" in str(report) and "says nothing" in str(report)


# ---------------------------------------------------------------- more wrong arguments

@pytest.mark.parametrize("dtype", ["f33", "int4", object])
def test_an_array_of_an_unknown_dtype_is_refused_by_name(dtype):
    # numpy's "data type 'f33' not understood" named no array; object arrays failed at the first draw
    with pytest.raises(TypeError, match=r"Array a: dtype must be a numpy number or bool type, 's4', 'u4' or 'bf16'"):
        Array("a", ("n",), dtype)


@pytest.mark.parametrize("bad", [True, 2.5, "5", 0])
def test_max_examples_is_a_whole_number(bad):
    # True ran one example, 2.5 two, "5" five, without a word
    with pytest.raises((TypeError, ValueError), match=r"max_examples must be a whole number >= 1"):
        check(axpy_i(), axpy_space(), max_examples=bad, **INTERP)


# ---------------------------------------------------------------- check_against_reference

def test_check_against_reference_does_not_take_float_poison_for_a_value():
    # poison() fills floats with 0xA7 bytes, about -4.7e-15 in float32: within atol of a zero reference, so an
    # output the kernel never wrote passed
    from ptxforge import f32
    from ptxforge.testing.interp_strategies import check_against_reference, poison
    k = KernelBuilder("writes_nothing", target="sm_80")
    k.param_ptr("y", f32)
    y = poison(np.empty(4, np.float32))
    with pytest.raises(AssertionError, match=r"argument 0: 4 of 4 elements differ"):
        check_against_reference(k.module(), grid=1, block=32, args=[y], expected={0: np.zeros(4)}, atol=1e-6)


def test_check_against_reference_refuses_an_integer_reference_out_of_the_type():
    # 256 cast to uint8 is 0 and matched a kernel that wrote 0
    from ptxforge import u8
    from ptxforge.testing.interp_strategies import check_against_reference
    k = KernelBuilder("zero_byte", target="sm_80")
    y = k.param_ptr("y", u8)
    with k.if_(k.setp("eq", k.tid(), 0)):
        k.st(y, k.mov(0, type=u32), type=u8)
    with pytest.raises(AssertionError, match=r"argument 0: 1 of 1 elements differ"):
        check_against_reference(k.module(), grid=1, block=32, args=[np.ones(1, np.uint8)],
                                expected={0: np.array([256])})


@pytest.mark.parametrize("values, message", [
    (lambda sizes: sizes.n % 3, r"Scalar s: values called on the sizes must return a Hypothesis strategy, got int"),
    ([1, 2], r"Scalar s: values is a list; a scalar takes one number: for one of several, pass "
             r"st.sampled_from\(\[1, 2\]\)")])
def test_a_scalar_of_the_wrong_kind_is_refused_by_name(values, message):
    # AttributeError 'int' object has no attribute 'validate'; a list reached the reference as an array
    from hypothesis import find
    with pytest.raises(TypeError, match=message):
        find(axpy_space(scalars=[Scalar("s", values)]).problems(), lambda _: True)


def test_settings_must_be_hypothesis_settings():
    # a dict died as AttributeError 'phases'
    with pytest.raises(TypeError, match=r"settings must be a hypothesis.settings \(e.g. settings\(max_examples=20"):
        check(axpy_i(), axpy_space(), settings={"max_examples": 3}, **INTERP)


@pytest.mark.parametrize("shared", [1.5, -4, lambda p: p.n / 2])
def test_shared_memory_must_be_whole_bytes(shared):
    # 1.5 was launched as 1 byte without a word
    with pytest.raises(ValueError, match=r"ProblemSpace: shared gave .* for problem n=7.*whole number of bytes >= 0"):
        axpy_space(shared=shared).make(n=7, s=1)


def test_where_reading_a_value_that_is_not_a_size_names_the_sizes():
    # AttributeError: '_SizesView' object has no attribute 'a'
    from hypothesis import find
    space = axpy_space(where=lambda p: p.a is not None)
    with pytest.raises(AttributeError, match=r"where= and scalar functions see the sizes only \(n\), not 'a'"):
        find(space.problems(), lambda _: True)


def test_check_problem_without_a_gpu_says_the_gpu_was_not_used(monkeypatch):
    from ptxforge.runtime.device import gpu_skip_reason
    if gpu_skip_reason() is None:
        pytest.skip("a GPU is present: the problem runs there too")
    monkeypatch.delenv("PTXFORGE_REQUIRE_GPU", raising=False)
    out = check_problem(axpy_i(), axpy_space(), n=5, s=2)
    assert set(out.outputs) == {"interp"} and out.skipped["gpu"].startswith("no usable GPU (")
