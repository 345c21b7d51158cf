"""ptxforge.parse on hand-written PTX: the corpus (tests/data/ptx), strict errors that name the
file, line and what is legal, lenient opaque instructions, lint findings, interpreter findings
that name the PTX lines, and to-python scripts that rebuild what they read."""

import glob
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import ptxforge
from ptxforge import interp
from ptxforge.assembler import assemble, available_backends, disassembler
from ptxforge.errors import TargetError
from ptxforge.isa.opaque import is_opaque
from ptxforge.parse import ParseError, parse, read
from ptxforge.parse.equality import same_module
from ptxforge.parse.lint import has_errors, lint
from ptxforge.parse.to_python import to_python

DATA = os.path.join(os.path.dirname(__file__), "data", "ptx")
GOLDEN = os.path.join(os.path.dirname(__file__), "golden")  # the project's hand-written kernels
CORPUS = sorted(glob.glob(os.path.join(GOLDEN, "*.ptx"))) + sorted(glob.glob(os.path.join(DATA, "*.ptx")))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = pytest.mark.filterwarnings("ignore::ptxforge.EmulatedInstructionWarning")

HEAD = ".version 8.0\n.target sm_80\n.address_size 64\n"


def kernel(body: str, head: str = HEAD, decls: str = "") -> str:
    return (head + "\n.visible .entry k(.param .u64 p)\n{\n    .reg .pred %p<4>;\n    .reg .b32 %r<8>;\n"
            "    .reg .f32 %f<4>;\n    .reg .b64 %rd<4>;\n" + decls + body + "\n    ret;\n}\n")


# ---------------------------------------------------------------- the corpus

@pytest.mark.parametrize("path", CORPUS, ids=[os.path.basename(p) for p in CORPUS])
def test_corpus_parses_strictly_and_round_trips(path):
    text = open(path).read()
    module = ptxforge.parse(text, filename=path)
    assert module.instruction_count() > 0
    assert not any(is_opaque(i) for k in module.kernels for i in k.instructions)
    assert not has_errors(lint(text, filename=path))
    again = parse(module.ptx, filename="again.ptx")
    assert again.ptx == module.ptx and same_module(again, module)
    if "ptxas" in available_backends() and disassembler() is not None:
        a = assemble(text, backend="ptxas")
        b = assemble(module.ptx, backend="ptxas")
        assert a.sass_opcodes() == b.sass_opcodes()
        for k in a.kernels:
            assert a.resources(k).registers == b.resources(k).registers


def test_corpus_kernel_runs_on_the_interpreter():
    path = os.path.join(GOLDEN, "01_module_basics.ptx")
    module = parse(open(path).read(), filename=path)
    n, block = 200, 64
    x = np.arange(n, dtype=np.float32)
    y = np.ones(n, dtype=np.float32)
    want = y.copy()
    for i in range(n):  # y[i] = a * x[mirror(i)] + y[i], mirror inside the CTA
        base, t = (i // block) * block, i % block
        j = base + block - 1 - t
        want[i] = 2.0 * (x[j] if j < n else 0.0) + y[i]
    interp.run(module, "saxpy_rev", grid=4, block=block, args=[x, y, n, np.float32(2.0)], shared=4 * block)
    assert np.allclose(y, want)


def test_llvm_style_kernel_runs_on_the_interpreter():
    path = os.path.join(DATA, "llvm_style.ptx")
    module = parse(open(path).read(), filename=path)
    n = 1000
    a = np.arange(n, dtype=np.float32)
    b = np.full(n, 0.5, np.float32)
    c = np.zeros(n, np.float32)
    interp.run(module, "vec_add", grid=2, block=128, args=[a, b, c, n], shared=16)
    assert np.array_equal(c, a + b)


def test_every_directive_spelling_is_kept():
    path = os.path.join(DATA, "directives.ptx")
    module = parse(open(path).read(), filename=path)
    out = module.ptx
    for piece in (".param .u64 .ptr .global .align 8 kern_param_0", ".param .align 8 .b8 kern_param_2[16]",
                  ".param .b32 b[2]", ".global .align 8 .u64 table[4] = {1, 2, 0x30, 4};",
                  ".const .align 8 .f64 third = 0d3FD5555555555555;", '.file 1 "directives.cu"',
                  ".extern .func (.param .b32 func_retval0) ext_helper(.param .b32 ext_helper_param_0);",
                  ".weak .func (.param .b32 ret) twice(", ".noreturn", ".maxnreg 64", ".minnctapersm 2",
                  '.pragma "nounroll";', ".loc 1 12 3", ".local .align 8 .b8 __local_depot0[16];",
                  "call.uni        (retval0), twice, (param0);", "@%p1 bra        DONE;", "[%rd4+-8]",
                  ".extern .shared .align 16 .b8 dyn[];"):
        assert piece in out, piece
    kinds = {k.name: getattr(k, "kind", "entry") for k in module.kernels}
    assert kinds == {"die": "func", "twice": "func", "pack4": "func", "kern": "entry"}


# ---------------------------------------------------------------- strict errors

def _strict_error(text, filename="bad.ptx"):
    with pytest.raises(ptxforge.PtxforgeError) as e:
        parse(text, filename=filename)
    return e.value


def _line_of(text, needle):
    return next(i for i, l in enumerate(text.splitlines(), 1) if needle in l)


@pytest.mark.parametrize("line,expect", [
    ("add.u8 %r1, %r2, %r3;", "legal types"),
    ("add.s32 %f1, %f2, 1;", "cannot be used as .s32"),
    ("mul.wide.s64 %rd1, %rd2, %rd3;", "16- or 32-bit"),
    ("setp.lo.s32 %p1, %r1, %r2;", "legal comparisons"),
    ("cp.async.cg.shared.global [%r1], [%rd1], 8;", "exactly 16 bytes"),
    ("shfl.sync.bfly.b32 %r1, %r2, 40, 31, -1;", "outside 0..31"),
    ("mov.u32 %r1, %r9;", "%r9 is not declared"),
    ("bra NOWHERE;", "NOWHERE"),
    ("frobnicate.b32 %r1;", "no instruction 'frobnicate'"),
    ("ld.global.f32 %f1, [%r1];", "64-bit"),
])
def test_strict_errors_name_file_line_and_what_is_legal(line, expect):
    text = kernel("    " + line)
    err = _strict_error(text)
    n = _line_of(text, line.split()[0]) if "NOWHERE" not in line else _line_of(text, "NOWHERE")
    assert f"bad.ptx:{n}:" in str(err), str(err)
    assert expect in str(err), str(err)
    assert err.loc is not None and err.loc.lineno == n


def test_target_and_version_rules_of_the_tables():
    text = kernel("    stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r2};")
    err = _strict_error(text)
    assert isinstance(err, TargetError) and "sm_90" in str(err) and f"bad.ptx:{_line_of(text, 'stmatrix')}" in str(err)
    head = ".version 7.8\n.target sm_90\n.address_size 64\n"
    text = kernel("    cp.async.bulk.commit_group;", head)
    err = _strict_error(text)
    assert "needs PTX ISA 8.0" in str(err) and "7.8" in str(err)
    text = kernel("    wgmma.fence.sync.aligned;", head.replace("7.8", "8.0"))
    assert "sm_90a" in str(_strict_error(text))


def test_lenient_keeps_rejected_lines_verbatim_and_the_interpreter_refuses_them():
    text = kernel("    mov.u32 %r1, %tid.x;\n    frobnicate.b32 %r2, %r1;\n    add.u32 %r3, %r1, 1;")
    reading = read(text, filename="len.ptx", strict=False)
    assert [t for _, t, _ in reading.opaque] == ["frobnicate.b32 %r2, %r1"]
    module = reading.module
    assert "    frobnicate.b32  %r2, %r1;" in module.ptx
    assert ".reg .b32 %r1, %r2, %r3;" in module.ptx  # the opaque line's registers stay declared
    assert "[opaque:" in module.listing()
    with pytest.raises(interp.InterpUnsupported) as e:
        interp.run(module, "k", grid=1, block=32, args=[np.zeros(4, np.uint32)])
    assert "frobnicate" in str(e.value) and "len.ptx" in str(e.value)


def test_lenient_keeps_unknown_directives_verbatim():
    text = kernel("    .branchtargets_demo 1, 2;\n    mov.u32 %r1, %tid.x;")
    with pytest.raises(ParseError, match="branchtargets_demo"):
        parse(text, filename="d.ptx")
    reading = read(text, filename="d.ptx", strict=False)
    assert "    .branchtargets_demo 1, 2;" in reading.module.ptx
    assert [line for line, _, _ in reading.opaque] == [_line_of(text, "branchtargets_demo")]


def test_emulated_s4_mma_warns_with_the_ptx_line():
    path = os.path.join(GOLDEN, "03_ldmatrix_mma.ptx")
    text = open(path).read().replace(".target sm_80", ".target sm_90")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        parse(text, filename="s4.ptx")
    hits = [x for x in w if issubclass(x.category, ptxforge.EmulatedInstructionWarning)]
    assert hits and all(x.filename == "s4.ptx" for x in hits)
    assert {x.lineno for x in hits} == {i for i, l in enumerate(text.splitlines(), 1)
                                        if l.lstrip().startswith("mma.sync") and (".s4.s4" in l or ".u4.u4" in l)}


# ---------------------------------------------------------------- lint

def test_lint_findings():
    path = os.path.join(GOLDEN, "03_ldmatrix_mma.ptx")
    text = open(path).read()
    assert not has_errors(lint(text, filename=path))
    on90 = lint(text, filename=path, arch="sm_90")
    s4_lines = {i for i, l in enumerate(text.splitlines(), 1)
                if "mma.sync" in l and (".s4.s4" in l or ".u4.u4" in l) and not l.lstrip().startswith("//")}
    assert {f.line for f in on90 if f.severity == "warning"} == s4_lines
    bad = kernel("    add.s32 %f1, %f2, 1;\n    stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r2};")
    found = lint(bad, filename="bad.ptx")
    assert [f.line for f in found if f.severity == "error"] == [_line_of(bad, "add.s32"), _line_of(bad, "stmatrix")]
    assert all(str(f).startswith(f"bad.ptx:{f.line}: ") for f in found)
    assert has_errors(found)


# ---------------------------------------------------------------- interpreter findings name PTX lines

RACE = kernel("""    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, buf;
    shl.b32 %r3, %r1, 2;
    add.u32 %r4, %r2, %r3;
    st.shared.u32 [%r4], %r1;
    xor.b32 %r5, %r3, 4;
    add.u32 %r6, %r2, %r5;
    ld.shared.u32 %r7, [%r6];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r7;""", decls="    .shared .align 4 .b8 buf[256];\n")


def test_interpreter_findings_name_the_ptx_file_and_line():
    module = parse(RACE, filename="race.ptx")
    out = np.zeros(64, np.uint32)
    report = interp.run(module, "k", grid=1, block=64, args=[out], check=False)
    races = report.by_kind("race")
    assert races, str(report)
    lines = {f.loc.lineno for f in races}
    assert lines <= {_line_of(RACE, "st.shared"), _line_of(RACE, "ld.shared")}
    assert all(f.loc.filename == "race.ptx" for f in races)
    fixed = parse(RACE.replace("    xor.b32", "    bar.sync 0;\n    xor.b32"), filename="fixed.ptx")
    out[:] = 0
    assert interp.run(fixed, "k", grid=1, block=64, args=[out]).ok
    assert np.array_equal(out, np.arange(64, dtype=np.uint32) ^ 1)


BAD_CALL = """.version 8.0
.target sm_80
.address_size 64

.func (.param .b32 ret) twice(.param .b32 x)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [x];
    shl.b32 %r2, %r1, 1;
    st.param.b32 [ret], %r2;
    ret;
}

.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<4>;
    mov.u32 %r1, 3;
    {
    .param .b64 a0;
    st.param.b32 [a0], %r1;
    .param .b32 r0;
    call (r0), twice, (a0);
    ld.param.b32 %r2, [r0];
    }
    ret;
}
"""


def test_calls_must_match_the_callee():
    bad = BAD_CALL.replace("call (r0), twice, (a0);", "call (r0), twice, (a0, a0);")
    err = _strict_error(bad)
    assert "takes 1 argument(s)" in str(err) and f"bad.ptx:{_line_of(bad, 'call (r0)')}" in str(err)


def test_assembler_errors_name_the_ptx_input_line(tmp_path):
    if "ptxas" not in available_backends():
        pytest.skip("needs ptxas")
    path = tmp_path / "badcall.ptx"
    path.write_text(BAD_CALL)
    module = parse(BAD_CALL, filename=str(path))  # the tables accept it; ptxas checks the call's types
    with pytest.raises(ptxforge.AssemblyError) as e:
        assemble(module, backend="ptxas")
    assert f"emitted at {path}:{_line_of(BAD_CALL, 'call (r0)')}" in str(e.value)
    n = next(i for i, l in enumerate(module.ptx.splitlines(), 1) if "st.param.b32    [a0]" in l)
    assert f"{path}:{_line_of(BAD_CALL, 'st.param.b32 [a0]')}" in module.describe_line(n)


# ---------------------------------------------------------------- to-python

def _run_script(source: str, tmp_path) -> str:
    path = tmp_path / "rebuilt.py"
    path.write_text(source)
    env = dict(os.environ, PYTHONPATH=ROOT)
    p = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("name", ["01_module_basics.ptx", "02_cp_async.ptx", "03_ldmatrix_mma.ptx",
                                  "05_mbarrier_bulk_tma_sm90.ptx", "06_wgmma_s8_sm90a.ptx"])
def test_to_python_rebuilds_the_module(name, tmp_path):
    text = open(os.path.join(GOLDEN, name)).read()
    module = parse(text, filename=name)
    script = to_python(module, source=name)
    assert script.count("k.emit(") == module.instruction_count()
    assert 'r1 = k.reg(T.b32, "r1", exact=True)' in script  # the PTX register names are kept
    assert _run_script(script, tmp_path) == module.ptx


def test_to_python_on_a_ptxforge_module(tmp_path):
    from ptxforge.schedules import Int8Gemm
    module = parse(Int8Gemm(target="sm_90").module.ptx)
    assert _run_script(to_python(module), tmp_path) == module.ptx


def test_to_python_refuses_what_has_no_builder_call():
    module = parse(open(os.path.join(DATA, "directives.ptx")).read())
    assert 'FunctionBuilder("twice", "sm_90", weak=True)' in to_python(module)  # .weak .func twice has one now
    odd = parse(HEAD + "\n.file 1 \"a.cu\"\n.visible .entry g()\n{\n    .loc 1 2 3, inlined_at 1 9 1\n"
                       "    ret;\n}\n")  # inlined_at without function_name: no builder call writes it
    with pytest.raises(ptxforge.ValidationError, match="no builder call"):
        to_python(odd)


def test_to_python_keeps_loc_lines(tmp_path):
    """`.loc file line column` (what nvcc -lineinfo and Triton write, tabs and all) becomes k.debug_loc()."""
    locs = parse(HEAD + "\n.file 1 \"a.cu\"\n.visible .entry g()\n{\n    .loc\t1 2 3\n    ret;\n}\n")
    script = to_python(locs)
    assert "k.debug_loc(1, 2, 3)" in script
    assert _run_script(script, tmp_path) == locs.ptx
    assert ".loc 1 2 3" in locs.ptx
    inl = parse(HEAD + "\n.file 1 \"a.cu\"\n.visible .entry g()\n{\n    .loc\t1 2 3, function_name $L__info_string0, "
                       "inlined_at 1 9 1\n    ret;\n}\n")
    script = to_python(inl)
    assert "function_name='$L__info_string0', inlined_at=(1, 9, 1)" in script
    assert _run_script(script, tmp_path) == inl.ptx


def test_debug_loc_lines_assemble_with_their_source_file():
    k = ptxforge.KernelBuilder("g", target="sm_80")
    k.debug_loc(1, 12, 4)
    m = ptxforge.Module([k.finish()], declarations=[ptxforge.source_file(1, "k.cu")])
    assert '.file 1 "k.cu"' in m.ptx and ".loc 1 12 4" in m.ptx
    if available_backends():
        ptxforge.assemble(m)
    with pytest.raises(ptxforge.ValidationError, match="source_file"):
        ptxforge.source_file(0, "k.cu")


def test_loc_refuses_what_is_not_a_source_position():
    k = ptxforge.KernelBuilder("g", target="sm_80")
    for bad in ((0, 1, 0), (1, -2, 0), (1, 2, 1.5), (True, 1, 0)):
        with pytest.raises(ptxforge.ValidationError, match="debug_loc"):
            k.debug_loc(*bad)
    for kw in (dict(function_name="$L__s"), dict(inlined_at=(1, 2, 3)),
               dict(function_name="no spaces", inlined_at=(1, 2, 3)), dict(function_name="$L__s", inlined_at=(1, 2))):
        with pytest.raises(ptxforge.ValidationError, match="debug_loc"):
            k.debug_loc(1, 2, 3, **kw)


def test_to_python_rebuilds_device_functions(tmp_path):
    funcs = parse(HEAD + "\n.func f()\n{\n    ret;\n}\n\n.visible .entry g()\n{\n    call f;\n    ret;\n}\n")
    script = to_python(funcs)
    assert 'FunctionBuilder("f", "sm_80")' in script
    assert _run_script(script, tmp_path) == funcs.ptx


# ---------------------------------------------------------------- the command line

def _cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "ptxforge", *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_cli_lint_exit_status(tmp_path):
    good = os.path.join(GOLDEN, "01_module_basics.ptx")
    p = _cli("lint", good)
    assert p.returncode == 0, p.stdout + p.stderr
    bad = tmp_path / "bad.ptx"
    bad.write_text(kernel("    add.s32 %f1, %f2, 1;"))
    p = _cli("lint", str(bad))
    assert p.returncode == 1 and f"{bad}:{_line_of(bad.read_text(), 'add.s32')}: error:" in p.stdout
    p = _cli("lint", os.path.join(GOLDEN, "03_ldmatrix_mma.ptx"), "--arch", "sm_90")
    assert p.returncode == 0 and "warning" in p.stdout and "emulates" in p.stdout


def test_cli_listing_to_python_and_interp(tmp_path):
    path = os.path.join(GOLDEN, "01_module_basics.ptx")
    p = _cli("listing", path)
    assert p.returncode == 0 and "01_module_basics.ptx:44" in p.stdout
    if available_backends():
        assert "registers" in p.stdout
    out = tmp_path / "k.py"
    p = _cli("to-python", path, "-o", str(out))
    assert p.returncode == 0
    assert _run_script(out.read_text(), tmp_path) == parse(open(path).read()).ptx
    p = _cli("interp", path, "--kernel", "special_regs", "--grid", "1", "--block", "128", "--arg", "u32:1024")
    assert p.returncode == 0 and "no findings" in p.stdout


def test_a_bulk_copy_the_tables_lack_is_named_as_such_not_checked_as_the_global_load():
    """A cp.async.bulk between spaces the tables lack was read as the global -> shared load and refused for its
    registers; it is named as a form the tables lack, and a lenient read keeps it.  The copy of this CTA's
    shared memory into a cluster CTA's (32-bit addresses) reads and renders as it is."""
    line = "cp.async.bulk.shared::cta.shared::cta.mbarrier::complete_tx::bytes [%r1], [%r2], 16, [%r3];"
    text = kernel("    mov.u32 %r3, 128;\n    " + line, HEAD.replace("sm_80", "sm_90"))
    err = _strict_error(text)
    assert "not a bulk copy the tables have" in str(err)
    assert [t for _, t, _ in read(text, filename="b.ptx", strict=False).opaque] == [line.rstrip(";")]
    s2s = "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%r1], [%r2], 16, [%r3];"
    text = kernel("    mov.u32 %r1, 0;\n    mov.u32 %r2, 64;\n    mov.u32 %r3, 128;\n    " + s2s,
                  HEAD.replace("sm_80", "sm_90"))
    assert s2s.split()[0] in parse(text, filename="s2s.ptx").ptx


@pytest.mark.parametrize("tensor", [False, True], ids=["bulk", "tensor"])
def test_a_multicast_mask_beyond_the_declared_cluster_is_refused_at_its_line(tensor):
    """The builder's check of an immediate ctaMask against the kernel's declared cluster holds for a read file
    too: refused at the copy's line (strict), kept opaque with the reason (lenient); a mask inside the cluster
    reads as it is."""
    k = ptxforge.KernelBuilder("mc", target="sm_90a", reqntid=32, reqnctapercluster=(2, 1, 1))
    buf, bar = k.shared_base(k.shared("t", 128, align=128)), k.shared_base(k.shared("b", 8, align=8))
    if tensor:
        k.tensor_load(buf, k.param_tensormap("tm"), (0, 0), bar, multicast=3)
    else:
        k.bulk_copy(buf, k.param_ptr("src", ptxforge.u32), 128, bar, multicast=3)
    good = k.module().ptx
    assert parse(good).ptx == good
    bad = good.replace("], 3;", "], 7;")
    line = _line_of(bad, "], 7;")
    err = _strict_error(bad)
    assert f":{line}: multicast ctaMask 0x7 names rank 2, but the kernel's clusters have 2 CTAs" in str(err)
    reading = read(bad, filename="mc.ptx", strict=False)
    assert [n for n, _, _ in reading.opaque] == [line]
