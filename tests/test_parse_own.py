"""Every module ptxforge emits parses back to an equal module whose rendering is byte-equal.

Sources: the golden kernels rebuilt with the builder, the saxpy test kernel, the int4/int8 GEMM
schedules (several configurations and targets), the interpreter's pipelined int4 GEMM sample (with
planted bugs), TileCopy, the examples' modules.  Each parsed
module also keeps, per instruction, the line of the rendering it came from.
"""

import glob
import importlib.util
import os
import subprocess
import sys
import warnings

import pytest

from ptxforge.parse import parse
from ptxforge.parse.equality import first_difference, same_module

from golden.builders import GOLDEN

pytestmark = pytest.mark.filterwarnings("ignore::ptxforge.EmulatedInstructionWarning")

ROOT = os.path.dirname(os.path.dirname(__file__))


def _example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(ROOT, "examples", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _own_modules():
    out = []
    for name, (factory, _) in sorted(GOLDEN.items()):
        out.append((f"golden:{name}", factory))
    from ptxforge.testing.kernels import saxpy
    out.append(("saxpy:sm_80", lambda: saxpy("sm_80")))
    out.append(("saxpy:sm_90", lambda: saxpy("sm_90", out=True)))
    from ptxforge.schedules import Int4Gemm, Int8Gemm, TileCopy
    for target in ("sm_80", "sm_90"):
        out.append((f"int4gemm:{target}", lambda t=target: Int4Gemm(target=t).module))
        out.append((f"int8gemm:{target}", lambda t=target: Int8Gemm(target=t).module))
    out.append(("int4gemm:u4", lambda: Int4Gemm(operand="u4").module))
    from ptxforge.schedules.hopper import HopperGemm
    out.append(("hopper:s8", lambda: HopperGemm("s8").module))
    out.append(("hopper:bf16", lambda: HopperGemm("bf16").module))
    out.append(("hopper:s4", lambda: HopperGemm("s4", block_n=128, block_k_bytes=256, stages=3).module))
    out.append(("tilecopy:sm_90", lambda: TileCopy(256, 256).emit()))
    out.append(("tilecopy:groups", lambda: TileCopy(128, 512, completion="groups", target="sm_80").emit()))
    from support.samples import Int4GemmSample
    out.append(("interp-sample:s8", lambda: Int4GemmSample().module()))
    out.append(("interp-sample:s4-bugs", lambda: Int4GemmSample(path="s4", bugs=("no_wait", "no_barrier",
                                                                                 "tail_off_by_one")).module()))
    out.append(("example:saxpy", lambda: _example("saxpy").build()))
    out.append(("example:shared_reverse", lambda: _example("shared_reverse").build()))
    out.append(("example:device_functions", lambda: _example("device_functions").build()))
    return out


OWN = _own_modules()


@pytest.mark.parametrize("name,factory", OWN, ids=[n for n, _ in OWN])
def test_own_module_round_trips(name, factory):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = factory()
    text = module.ptx
    parsed = parse(text, filename=f"{name}.ptx")
    assert parsed.ptx == text, "rendering of the parsed module differs from the original"
    diff = first_difference(module, parsed)
    assert diff is None, diff
    # parsing the parsed module's own rendering is a fixed point
    again = parse(parsed.ptx, filename="again.ptx")
    assert same_module(again, parsed) and again.ptx == parsed.ptx


@pytest.mark.parametrize("name,factory", OWN[:3], ids=[n for n, _ in OWN[:3]])
def test_parsed_instructions_keep_their_ptx_line(name, factory):
    module = factory()
    text = module.ptx
    parsed = parse(text, filename="own.ptx")
    lines = text.splitlines()
    n = 0
    for k in parsed.kernels:
        for ins in k.instructions:
            assert ins.loc.filename == "own.ptx"
            assert lines[ins.loc.lineno - 1].strip() == ins.render().strip()
            n += 1
    assert n == module.instruction_count()


def test_structure_tells_different_modules_apart():
    from ptxforge.testing.kernels import saxpy
    a = parse(saxpy("sm_80").ptx)
    b = parse(saxpy("sm_80", block=128).ptx)
    c = parse(saxpy("sm_90").ptx)
    assert first_difference(a, b) is not None
    assert not same_module(a, c)


#: Test files whose emitted modules are recorded (tests/record_modules.py) and parsed back.
RECORDED = ["test_builder.py", "test_module.py", "test_int4.py", "test_tile_copy.py", "test_copy.py", "test_golden.py",
            "test_gemm.py", "test_interp_alu.py", "test_interp_warp.py", "test_interp_races.py"] + sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "tests",
                                                                                               "test_isa_*.py")))


def test_every_module_other_tests_emit_round_trips(tmp_path):
    env = dict(os.environ, PTXFORGE_RECORD_DIR=str(tmp_path), PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "record_modules",
                        *[os.path.join(ROOT, "tests", f) for f in RECORDED]],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    # those files' own verdicts are this suite's (they run in it too); here they only supply modules,
    # so a failure among them (exit 1) still leaves every module they rendered to read back
    assert p.returncode in (0, 1), p.stdout[-3000:] + p.stderr[-3000:]
    texts = sorted(glob.glob(str(tmp_path / "*.ptx")))
    assert len(texts) > 100, len(texts)
    for path in texts:
        text = open(path).read()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = parse(text, filename=path)
        assert parsed.ptx == text, path


def test_integer_arithmetic_with_a_mode_and_a_flag_reads_back():
    """mad.hi.sat.s32 (a mode and a flag) reads back as the builder wrote it; an integer modifier the table does
    not know is still refused with the flags it takes."""
    import ptxforge as pf
    from ptxforge import s32
    from ptxforge.parse.reader import ParseError
    k = pf.KernelBuilder("hisat", target="sm_80")
    a, b, c = (k.mov(v, type=s32) for v in (1, 2, 3))
    k.mad(a, b, c, mode="hi", flags=("sat",))
    text = str(k.module())
    assert "mad.hi.sat.s32" in text and str(pf.parse(text)) == text
    with pytest.raises(ParseError, match="does not take .zz"):
        pf.parse(text.replace("mad.hi.sat.s32", "mad.hi.zz.s32"))
