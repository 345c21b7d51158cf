"""`ptxforge interp --arg`: every argument it cannot use is one CliError line that names the argument, says what is
wrong with it and lists the accepted forms; the accepted forms make the arrays and scalars they say."""

import os

import numpy as np
import pytest

from ptxforge.cli import main

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
ONE_POINTER = os.path.join(GOLDEN, "01_module_basics.ptx")  # its kernel special_regs takes one u32 array


@pytest.mark.parametrize("spec,why", [
    ("u32=-5", "-5 is outside the range of u32 (0..4294967295)"),
    ("u8=0x100", "256 is outside the range of u8 (0..255)"),
    ("u32=1.5", "u32 takes an integer"),
    ("f32=abc", "f32 takes a number, got 'abc'"),
    ("f16=1e10", "outside the range of f16"),
    ("f32:abc", "the element count must be an integer of at least 1, got 'abc'"),
    ("f32:-5", "the element count must be an integer of at least 1, got '-5'"),
    ("f32", "neither an array (TYPE:COUNT) nor a scalar (TYPE=VALUE)"),
    ("f32:1000:bogus", "unknown fill 'bogus'; an array is filled with one of zeros|arange|rand"),
    ("f32:8:rand:more", "at most three ':'-separated fields"),
    ("bogus:8", "unknown PTX type 'bogus'"),
    ("pred=1", "no numpy dtype for .pred"),
])
def test_an_unusable_arg_is_one_error_naming_it_and_the_accepted_forms(capsys, spec, why):
    status = main(["interp", ONE_POINTER, "--kernel", "special_regs", "--block", "128", "--arg", spec])
    err = capsys.readouterr().err
    assert status == 1 and "Traceback" not in err
    assert err.startswith(f"ptxforge: error: --arg {spec!r}: ") and err.count("\n") == 1, err
    assert why in err, err
    assert "TYPE:COUNT[:zeros|arange|rand]" in err and "TYPE=VALUE" in err, err


@pytest.mark.parametrize("spec,want", [
    ("u32=7", np.uint32(7)), ("s32=-7", np.int32(-7)), ("u32=0x1f", np.uint32(31)), ("f32=-2.5", np.float32(-2.5)),
    ("u64=18446744073709551615", np.uint64(2 ** 64 - 1)),
    ("f32:4", np.zeros(4, np.float32)), ("f32:4:zeros", np.zeros(4, np.float32)),
    ("u16:5:arange", np.arange(5, dtype=np.uint16)),
])
def test_the_accepted_forms_make_what_they_say(spec, want):
    from ptxforge.cli.ptx_in import _arg
    got = _arg(spec)
    assert np.asarray(got).dtype == np.asarray(want).dtype and np.array_equal(got, want)


def test_a_random_array_is_the_same_every_run():
    from ptxforge.cli.ptx_in import _arg
    a, b = _arg("s32:64:rand"), _arg("s32:64:rand")
    assert a.dtype == np.int32 and a.shape == (64,) and np.array_equal(a, b) and len(set(a.tolist())) > 1
