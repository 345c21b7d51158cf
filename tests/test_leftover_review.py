"""Small defects found in review, each pinned by a test: a huge dynamic shared size refused before it is
allocated, launch errors that name the caller's line once, the interpreter's message for an instruction it
cannot run, the CLI's refusal of a grid that would take the interpreter hours, examples that end quietly when
their reader goes away, and copy/'s integer arguments (numpy integers accepted, bools refused)."""

import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp, u32
from ptxforge.errors import LaunchError, ValidationError
from ptxforge.isa.targets import Target

ROOT = pathlib.Path(__file__).resolve().parents[1]
BASICS = str(ROOT / "tests" / "golden" / "01_module_basics.ptx")
SAXPY_ARGS = ["--kernel", "saxpy_rev", "--arg", "f32:256", "--arg", "f32:256", "--arg", "u32=256", "--arg", "f32=2"]


def store_kernel(name="k", target="sm_90", shared=0):
    """A kernel of one pointer parameter (out) that stores its thread index, with `shared` static shared bytes."""
    k = pf.KernelBuilder(name, target=target)
    out = k.param_ptr("out", u32)
    if shared:
        k.shared("buf", shared)
    i = k.global_index()
    k.st(k.add(out, k.mul(i, 4, mode="wide")), i, type=u32)
    return k


# ---------------------------------------------------------------- 1. shared memory checked before allocating it
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
def test_a_huge_dynamic_shared_size_is_refused_before_it_is_allocated(target):
    limit = Target.parse(target).limits.shared_per_cta
    with pytest.raises(LaunchError) as info:
        interp.run(store_kernel(target=target), block=32, args=[np.zeros(32, np.uint32)], shared=2 ** 40)
    message = info.value.message
    assert str(2 ** 40) in message and f"{target} allows {limit}" in message, message


def test_static_and_dynamic_shared_memory_count_together_against_the_limit():
    limit = Target.parse("sm_90").limits.shared_per_cta
    k = store_kernel(shared=1024)
    with pytest.raises(LaunchError) as info:
        interp.run(k, block=32, args=[np.zeros(32, np.uint32)], shared=limit - 1023)
    assert (f"needs {limit + 1} bytes of shared memory per CTA (1024 static + {limit - 1023} dynamic, shared=); "
            f"sm_90 allows {limit}") in info.value.message, info.value.message
    out = np.zeros(32, np.uint32)
    interp.run(k, block=32, args=[out], shared=limit - 1024)  # exactly the limit runs
    np.testing.assert_array_equal(out, np.arange(32))


# ---------------------------------------------------------------- 2. the caller's line, once
FUNC_ONLY = """.version 8.0
.target sm_90
.address_size 64

.visible .func f()
{
    ret;
}
"""


def _launch_error(module, kernel=None):
    with pytest.raises(LaunchError) as info:
        interp.run(module, kernel, block=32, args=[np.zeros(32, np.uint32)])
    return str(info.value)


@pytest.mark.parametrize("case", ["wrong name", "several kernels", "no kernel", "a kernel of another module",
                                  "another kernel", "text"])
def test_a_kernel_that_cannot_be_resolved_names_the_callers_line_once(case):
    one = store_kernel("a").module()
    if case == "wrong name":
        text = _launch_error(one, "nope")
        assert "no kernel 'nope'" in text and "a" in text
    elif case == "several kernels":
        text = _launch_error(pf.Module([store_kernel("a"), store_kernel("b")]))
        assert "2 kernels" in text and "a, b" in text
    elif case == "no kernel":
        text = _launch_error(pf.parse(FUNC_ONLY))
        assert "no kernel (.entry)" in text and "device functions (.func): f" in text, text
    elif case == "a kernel of another module":
        text = _launch_error(one, store_kernel("other").finish())
        assert "'other' is not a kernel of the module given" in text and "its kernels: a" in text, text
    elif case == "another kernel":
        text = _launch_error(store_kernel("a").finish(), "b")
        assert "kernel 'b' asked for, but 'a' was given" in text
    else:
        text = _launch_error("not a module")
        assert "read PTX text with ptxforge.parse first" in text
    here = f"{os.path.basename(__file__)}:"
    assert text.count(here) == 1 and text.count("\n  at ") == 1, text


def test_a_device_function_asked_for_by_name_is_no_kernel_to_launch():
    text = _launch_error(pf.parse(FUNC_ONLY), "f")
    assert "f is a device function (.func)" in text and "no kernel (.entry)" in text, text


# ---------------------------------------------------------------- 3. what the interpreter says of what it cannot run
UNKNOWN_LINE = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<4>;
    frobnicate.b32 %r1, %r2;
    ret;
}
"""


def test_an_instruction_without_semantics_claims_nothing_about_assembling():
    module = pf.parse(UNKNOWN_LINE, strict=False)
    with pytest.raises(interp.InterpUnsupported) as info:
        interp.run(module, block=32, args=[np.zeros(32, np.uint32)])
    message = info.value.message
    assert "frobnicate.b32" in message and "no semantics" in message, message
    assert "assembles" not in message, message


# ---------------------------------------------------------------- 4. a grid that would take the interpreter hours
def cli(capsys, *argv):
    """(status, stdout, stderr) of the `ptxforge` command run in this process."""
    from ptxforge.cli import main
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def test_interp_refuses_a_grid_that_would_take_hours_and_says_how_to_shrink_it(capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(interp, "run", lambda *a, **kw: ran.append(a))
    status, out, err = cli(capsys, "interp", BASICS, *SAXPY_ARGS, "--grid", "100000000")
    assert status == 1 and not ran, err
    assert err.startswith("ptxforge: error: --grid 100000000 --block 32: 3200000000 threads"), err
    assert "--grid" in err and "--max-threads" in err and "Traceback" not in err, err


def test_interp_runs_a_large_grid_when_max_threads_allows_it(capsys, monkeypatch):
    from ptxforge.cli.ptx_in import DEFAULT_MAX_THREADS
    seen = {}

    class Clean:
        ok = True

        def __str__(self):
            return "ran"
    monkeypatch.setattr(interp, "run", lambda *a, grid, block, **kw: seen.update(grid=grid) or Clean())
    grid = DEFAULT_MAX_THREADS // 32 + 1
    status, out, err = cli(capsys, "interp", BASICS, *SAXPY_ARGS, "--grid", str(grid))
    assert status == 1 and not seen and f"{grid * 32} threads" in err, err
    status, out, err = cli(capsys, "interp", BASICS, *SAXPY_ARGS, "--grid", str(grid),
                           "--max-threads", str(grid * 32))
    assert status == 0 and seen["grid"] == (grid,), err


# ---------------------------------------------------------------- 5. examples whose reader goes away
def _examples_with_listings():
    return sorted(p.stem for p in (ROOT / "examples").glob("*.py") if "--listing" in p.read_text())


@pytest.mark.parametrize("name", _examples_with_listings())
def test_an_example_whose_reader_goes_away_ends_without_a_traceback(name):
    proc = subprocess.Popen([sys.executable, str(ROOT / "examples" / f"{name}.py"), "--listing"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])})
    proc.stdout.close()  # like `| head -0`: gone before the first line
    err = proc.stderr.read().decode()
    proc.wait(timeout=300)
    proc.stderr.close()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 1, err


def test_every_example_ends_through_the_shared_helper():
    for path in sorted((ROOT / "examples").glob("*.py")):
        text = path.read_text()
        assert re.search(r"SystemExit\(run_main\(main\b|sys\.exit\(run_main\(main\b", text), path.name


# ---------------------------------------------------------------- 6. copy/'s integer arguments
def test_copy_integer_arguments_take_numpy_integers():
    from ptxforge.copy.completion import mbarrier_arrival_count
    from ptxforge.copy.elems import bits_to_bytes, cp_async_bytes
    from ptxforge.copy.layout import SmemLayout
    from ptxforge.copy.plan import plan_tile_copy
    from ptxforge.isa import types as T
    assert mbarrier_arrival_count(np.int32(128)) == 128 and type(mbarrier_arrival_count(np.int64(4))) is int
    assert cp_async_bytes(T.f32, np.int64(4)) == 16
    assert bits_to_bytes(T.u4, np.uint8(6)) == 3
    assert SmemLayout(np.int16(8), np.int64(64)).rows == 8
    assert plan_tile_copy(np.int32(8), np.int32(64), T.f32, np.int32(128)).rows == 8


@pytest.mark.parametrize("bad", [True, np.bool_(True), 4.0])
def test_copy_integer_arguments_refuse_bools_and_floats_with_their_messages(bad):
    from ptxforge.copy.completion import mbarrier_arrival_count
    from ptxforge.copy.elems import bits_to_bytes, cp_async_bytes
    from ptxforge.isa import types as T
    with pytest.raises(ValidationError, match="an mbarrier needs at least one arriving thread"):
        mbarrier_arrival_count(bad)
    with pytest.raises(ValidationError, match="cp.async element count must be a positive int"):
        cp_async_bytes(T.f32, bad)
    with pytest.raises(ValidationError, match="an element count must be an int of 0 or more"):
        bits_to_bytes(T.f32, bad)


def test_cp_async_alignments_and_valid_counts_take_numpy_integers_and_refuse_bools():
    from ptxforge.copy.elems import cp_async_elems
    k = pf.KernelBuilder("c", target="sm_80", maxntid=32)
    src = k.param_ptr("src")
    dst = k.shared_base(k.shared("buf", 64, 16))
    assert cp_async_elems(k, dst, src, u32, np.int64(4), valid=np.int32(2), src_align=np.int64(16),
                          dst_align=np.uint32(16)) == 16
    (ins,) = [i for i in k.finish().instructions if i.opcode == "cp.async"]
    assert ins.info.cp_size == 16 and ins.info.src_size.value == 8 and type(ins.info.src_size.value) is int
    with pytest.raises(ValidationError, match="the source alignment must be a positive number of bytes"):
        cp_async_elems(k, dst, src, u32, 4, src_align=True)
    with pytest.raises(ValidationError, match=r"valid element count must be an int in 0\.\.4"):
        cp_async_elems(k, dst, src, u32, 4, valid=np.bool_(True))


def test_the_wait_for_copy_groups_takes_a_numpy_integer_and_refuses_a_bool():
    from ptxforge.copy.completion import emit_copy_wait
    k = pf.KernelBuilder("w", target="sm_80", maxntid=32)
    emit_copy_wait(k, "groups", pending=np.int64(2))
    assert "cp.async.wait_group 2;" in k.module().render().text
    with pytest.raises(ValidationError, match="pending groups must be a non-negative int"):
        emit_copy_wait(k, "groups", pending=False)


def test_host_im2col_map_takes_a_single_corner_for_rank_3_as_the_gpu_map_does():
    """A rank-3 (NWC) map has one W corner: TensorMap.im2col takes it as a number, and the interpreter's host map
    raised TypeError ('int' object is not iterable) on the same call."""
    from ptxforge.interp.tensormaps import host_im2col_map
    x = np.zeros((2, 16, 8), np.float32)
    m = host_im2col_map(x, lower_corner=-1, upper_corner=0, channels_per_pixel=8, pixels_per_column=4)
    assert m.tmap.lower_corner == (-1,) and m.tmap.upper_corner == (0,)
    with pytest.raises(ValidationError, match="lower_corner"):
        host_im2col_map(x, lower_corner=(-1, 0), upper_corner=0, channels_per_pixel=8, pixels_per_column=4)


def test_module_kernel_lookups_say_which_names_are_kernels_and_which_device_functions():
    """Module.kernel listed a device function among the kernels when a name was not found, and for a module without
    kernels said 'module has 0 kernels; name one: ' with nothing to name."""
    from ptxforge import f32
    f = pf.FunctionBuilder("poly")
    x = f.param_value("x", f32)
    f.result("y", f32)
    f.set_result(f.mul(x, x))
    k = pf.KernelBuilder("apply", target="sm_80")
    k.st(k.param_ptr("dst", f32), k.call(f, args=[2.0]))
    m = k.module()
    with pytest.raises(ValidationError, match=r"no kernel 'nope' in module\. Kernels \(\.entry\): apply; "
                                              r"device functions \(\.func\): poly"):
        m.kernel("nope")
    g = pf.FunctionBuilder("visible_poly", visible=True)
    gx = g.param_value("x", f32)
    g.result("y", f32)
    g.set_result(g.mul(gx, 2.0))
    functions_only = pf.Module([g], target="sm_80")
    with pytest.raises(ValidationError, match=r"module has no kernel \(\.entry\)\. Kernels \(\.entry\): none; "
                                              r"device functions \(\.func\): visible_poly"):
        functions_only.kernel()


def test_a_star_import_gives_every_public_name_dir_lists():
    """`dir(ptxforge)` lists the schedules (loaded on first use) but `__all__` left them out, so
    `from ptxforge import *` gave no Int4Gemm; every public name but the submodules is in `__all__`."""
    import types as pytypes
    import ptxforge
    public = {n for n in dir(ptxforge) if not n.startswith("_")
              and not isinstance(getattr(ptxforge, n), pytypes.ModuleType)}
    assert public - set(ptxforge.__all__) == set()
    namespace = {}
    exec("from ptxforge import *", namespace)
    assert {"Int4Gemm", "HopperGemm", "TileCopy", "load"} <= set(namespace)


def test_an_interpreter_refusal_of_a_call_or_brx_shows_that_instruction():
    """A brx.idx whose register index runs past its list stops the interpreter; the report named the stand-in
    it runs as ("instruction: call;") instead of the brx.idx line."""
    import numpy as np
    from ptxforge import interp
    from ptxforge.interp.findings import InterpUnsupported
    k = pf.KernelBuilder("brx_past", target="sm_80")
    g = k.param_ptr("g", pf.u32)
    a, b = k.label("a"), k.label("b")
    k.brx_idx(k.ld(g, type=pf.u32), [a, b])
    k.place(a)
    k.place(b)
    k.ret()
    with pytest.raises(InterpUnsupported) as info:
        interp.run(k, grid=1, block=1, args=[np.array([5], np.uint32)])
    assert "instruction: brx.idx" in str(info.value) and "instruction: call;" not in str(info.value)


def test_a_shared_array_of_a_device_function_runs_on_the_interpreter():
    """nvcc puts a __shared__ array of a __noinline__ function into the .func's body; the interpreter laid out only
    the kernel's own arrays, so the run stopped with a Python KeyError (launch.symbol_address)."""
    ptx = """
.version 8.0
.target sm_80
.address_size 64
.func (.param .b32 r) f(.param .b32 x)
{
    .reg .b32 %r<6>;
    .shared .align 4 .b8 fbuf[128];
    ld.param.b32 %r1, [x];
    mov.u32 %r2, %tid.x;
    shl.b32 %r3, %r2, 2;
    mov.u32 %r4, fbuf;
    add.s32 %r4, %r4, %r3;
    st.shared.u32 [%r4], %r1;
    bar.sync 0;
    xor.b32 %r3, %r3, 4;
    mov.u32 %r4, fbuf;
    add.s32 %r4, %r4, %r3;
    ld.shared.u32 %r5, [%r4];
    st.param.b32 [r], %r5;
    ret;
}
.visible .entry k(.param .u64 out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mul.lo.s32 %r2, %r1, 3;
    {
    .param .b32 a0;
    .param .b32 r0;
    st.param.b32 [a0], %r2;
    call (r0), f, (a0);
    ld.param.b32 %r3, [r0];
    }
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd2, %rd1, %rd2;
    st.global.u32 [%rd2], %r3;
    ret;
}
"""
    out = np.zeros(32, np.int32)
    interp.run(pf.parse(ptx), grid=1, block=32, args=[out], kernel="k")
    assert out.tolist() == [3 * (t ^ 1) for t in range(32)]
