"""Device printf: the builder's `printf` (vprintf, as nvcc writes it), the interpreter's formatting against the C
library's snprintf, the argument checks at the user's line, and the H200's output."""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import struct

import numpy as np
import pytest
from hypothesis import given, settings

import ptxforge as pf
from ptxforge import interp
from ptxforge.interp.exec_printf import format_line
from ptxforge.isa.vprintf import buffer_layout, conversions
from ptxforge.testing.interp_strategies import printf_conversions
from support.located import assert_located

HERE = __file__
_LIBC = ctypes.CDLL(ctypes.util.find_library("c"))


def _snprintf(fmt, values):
    """The C library's formatting of `fmt` with `values` (the oracle)."""
    buf = ctypes.create_string_buffer(4096)
    cargs = []
    for v, a in zip(values, conversions(fmt)):
        cargs.append(ctypes.c_double(v) if a.kind == "float" else ctypes.c_longlong(v) if a.nbytes == 8
                     else ctypes.c_int(v))
    _LIBC.snprintf(buf, len(buf), fmt.encode(), *cargs)
    return buf.value.decode()


def _format(fmt, values):
    it = iter(zip(values, conversions(fmt)))

    def read_arg(nbytes):
        v, a = next(it)
        if a.kind == "float":
            return struct.unpack("<Q", struct.pack("<d", v))[0]
        return v & ((1 << (8 * nbytes)) - 1)
    return format_line(fmt, read_arg, lambda address: "")


def _glibc_quirk(fmt, values):
    """glibc zero-pads a float whose width came from a negative `*` (a '-' flag, which the C standard says
    overrides '0'): the interpreter follows the standard."""
    return any(a.conv == "*" and v < 0 for v, a in zip(values, conversions(fmt))) and "0" in fmt


@settings(max_examples=400, deadline=None)
@given(printf_conversions())
def test_formatting_matches_the_c_library(call):
    fmt, values = call
    if _glibc_quirk(fmt, values):
        return
    text, count = _format(fmt, values)
    assert text == _snprintf(fmt, values), fmt
    assert count == len(values)


def test_hand_worked_lines():
    cases = [("%d|%5d|%-5d|%05d|%+d", [-7, 42, 42, 42, 3], "-7|   42|42   |00042|+3"),
             ("%u %x %X %#x %o %#o", [-1, 255, 255, 255, 8, 8], "4294967295 ff FF 0xff 10 010"),
             ("%lld %llx %hd %hu", [-(2 ** 40), 2 ** 40, 70000, 300], "-1099511627776 10000000000 4464 300"),
             ("%.3f %e %g %G %a", [math.pi, 12345.678, 1e-5, float("inf"), 1.5], "3.142 1.234568e+04 1e-05 INF 0x1.8p+0"),
             ("%*d|%-*.*f|%%|%c", [4, 7, 8, 2, 2.5, 65], "   7|2.50    |%|A"),
             ("%.0d|%.0x|%#.0o", [0, 0, 0], "||0")]
    for fmt, values, want in cases:
        assert _format(fmt, values)[0] == want, fmt


def test_the_abi_lays_arguments_out_at_their_alignment():
    args = conversions("%d %f %c %lld %s %p %*d")
    assert [(a.kind, a.nbytes) for a in args] == [("int", 4), ("float", 8), ("int", 4), ("int", 8),
                                                    ("string", 8), ("pointer", 8), ("int", 4), ("int", 4)]
    assert buffer_layout(args) == ((0, 8, 16, 24, 32, 40, 48, 52), 56)


def _kernel(nt=64):
    k = pf.KernelBuilder("pk", target="sm_90", reqntid=nt)
    x, out = k.param_ptr("x", pf.f32), k.param_ptr("out", pf.u32)
    t = k.tid()
    v = k.ld(k.add(x, k.mul(t, 4, mode="wide")), type=pf.f32)
    h = k.cvt(v, pf.f16)
    big = k.shl(k.cvt(t, "u64"), 40)
    small = k.cvt(t, pf.u8)
    n = k.printf("t=%d x=%.2f h=%g big=%llx %s [%3hu] %c %.1f%%\n", t, v, h, big, "tag", small, 66, 2.5,
                 pred=k.setp("lt", t, 3))
    k.st(out, n, type=pf.u32, pred=k.setp("eq", t, 0))
    k.printf("last %u of %d\n", t, nt, pred=k.setp("eq", t, nt - 1))
    return k


def test_a_builder_kernel_prints_on_the_interpreter_and_assembles(capsys):
    k = _kernel()
    m = k.module()
    pf.assemble(m)
    x = (np.arange(64) / 3).astype(np.float32)
    out = np.zeros(1, np.uint32)
    report = interp.run(m, block=64, args=[x, out])
    want = [f"t={t} x={x[t]:.2f} h={float(np.float16(x[t])):g} big={t << 40:x} tag [{t:3d}] B 2.5%\n"
            for t in range(3)]
    assert report.printed == want + ["last 63 of 64\n"]
    assert out[0] == 8  # printf returns the number of arguments
    assert capsys.readouterr().out == "".join(report.printed)  # and the lines reach stdout, as a GPU's do
    text = m.ptx
    assert ".extern .func (.param .b32 vprintf_result) vprintf(.param .b64 vprintf_format, .param .b64 vprintf_args);" \
        in text
    assert text.count(".global .b8 printf_fmt_") == 2 and ".global .b8 printf_str_" in text


@pytest.mark.parametrize("args, text", [
    ((1,), "takes 2 argument(s) (%d, %f), got 1"),
    ((1.5, 2.0), "takes an integer"),
    (("reg64", 2.0), "use %lld"),
    ((1, "reg32"), "takes a float"),
])
def test_printf_mistakes_name_the_users_line(args, text):
    k = pf.KernelBuilder("bad", target="sm_90")
    regs = {"reg64": k.cvt(k.tid(), "u64"), "reg32": k.tid()}
    args = [regs.get(a, a) if isinstance(a, str) else a for a in args]
    with pytest.raises(pf.ValidationError) as e:
        k.printf("%d %f", *args)  # <- printf
    assert text in str(e.value)
    assert_located(e.value, "<- printf", HERE)


def test_a_stray_percent_a_modifier_cuda_lacks_and_a_32_bit_register_for_lld_are_refused():
    k = pf.KernelBuilder("bad", target="sm_90")
    with pytest.raises(pf.ValidationError, match="starts no conversion"):
        k.printf("100%")
    with pytest.raises(pf.ValidationError, match="length modifier 'hh'"):  # the H200 misprints what follows it
        k.printf("%hhu %d", 1, 2)
    with pytest.raises(pf.ValidationError, match="drop the l/ll"):
        k.printf("%lld", k.tid())


def test_nvcc_style_ptx_with_a_bad_string_pointer_is_an_out_of_bounds_finding():
    k = pf.KernelBuilder("wild", target="sm_90", reqntid=1)
    k.printf("%s\n", k.mov(0x1234_5678, type=pf.u64))  # <- wild
    with pytest.raises(interp.InterpError, match="out-of-bounds") as e:
        interp.run(k.module(), block=1)
    assert_located(e.value, "<- wild", HERE)


@pytest.mark.gpu
def test_gpu_prints_what_the_interpreter_prints(capfd):
    from ptxforge.runtime import DeviceBuffer
    k = _kernel()
    x = (np.arange(64) / 3).astype(np.float32)
    out = DeviceBuffer.from_host(np.zeros(1, np.uint32))
    pf.load(k.module())[k.name](1, 64, DeviceBuffer.from_host(x), out)
    pf.synchronize()
    gpu = capfd.readouterr().out
    cpu = interp.run(k.module(), block=64, args=[x, np.zeros(1, np.uint32)])
    capfd.readouterr()
    assert sorted(gpu.splitlines(keepends=True)) == sorted(cpu.printed)
    assert out.to_host()[0] == 8


@pytest.mark.gpu
def test_gpu_the_printf_example_prints_on_the_gpu(capfd):
    from support.examples import load_example
    ex = load_example("device_printf")
    assert ex.main([]) == 0
    out = capfd.readouterr().out
    assert "GPU: each block's maximum exact" in out
    lines = [line for line in out.splitlines() if line.startswith("block ")]
    counts = {line: lines.count(line) for line in lines}
    assert len(counts) == 4 and set(counts.values()) == {2}  # each block's line from the interpreter and the GPU


def test_length_modifiers_device_printf_lacks_are_refused_with_their_own_reason():
    import ptxforge as pf
    with pytest.raises(pf.ValidationError, match="on an H200 every argument after an hh conversion prints wrong"):
        conversions("%hhd")
    for mod in ("j", "z", "t"):
        with pytest.raises(pf.ValidationError, match=f"modifier '{mod}'.*use ll for a 64-bit integer") as info:
            conversions(f"%{mod}d")
        assert "hh" not in str(info.value)
