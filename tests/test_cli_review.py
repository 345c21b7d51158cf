"""The `ptxforge` command used the way a careful user gets it wrong: every mistake is one error line that names
the option or file at fault (no traceback, no Python line inside ptxforge), exit 1; and what it prints is true."""

import os
import re
import subprocess
import sys

import pytest

from ptxforge.cli import main

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
BASICS = os.path.join(GOLDEN, "01_module_basics.ptx")  # kernels saxpy_rev (x, y, n, a) and special_regs (out)
SAXPY_ARGS = ["--kernel", "saxpy_rev", "--arg", "f32:256", "--arg", "f32:256", "--arg", "u32=256",
              "--arg", "f32=2"]

BROKEN = """\
.version 8.0
.target sm_80
.address_size 64

.visible .entry k(
    .param .u64 p_x
)
{
    .reg .b32 %r<4>;
    .reg .f32 %f<4>;

    add.s32 %r2, %f1, 1;
    ret;
}
"""


def cli(capsys, *argv):
    """(status, stdout, stderr) of the command run in this process."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_error(status, err, *words):
    assert status == 1, err
    assert err.startswith("ptxforge: error: "), err
    assert "Traceback" not in err and not re.search(r"\.py:\d+", err), err  # no Python line of ptxforge
    for w in words:
        assert w in err, (w, err)


@pytest.mark.parametrize("target", ["/nonexistent/dir/out.py", "DIR"])
def test_to_python_into_a_path_it_cannot_write_is_one_error(capsys, tmp_path, target):
    target = str(tmp_path) if target == "DIR" else target
    status, out, err = cli(capsys, "to-python", BASICS, "-o", target)
    assert_one_error(status, err, f"-o {target}: cannot write it")


@pytest.mark.parametrize("argv,words", [
    (["--kernel", "nope"], ["no kernel 'nope'", "saxpy_rev, special_regs", "--kernel"]),
    ([], ["2 kernels", "saxpy_rev, special_regs", "--kernel"]),
    (SAXPY_ARGS + ["--grid", "0"], ["--grid"]),
    (SAXPY_ARGS + ["--block", "2048"], ["--block"]),
    (SAXPY_ARGS + ["--shared", "-1"], ["--shared"]),
])
def test_interp_errors_name_the_option_and_no_python_line(capsys, argv, words):
    status, out, err = cli(capsys, "interp", BASICS, *argv)
    assert_one_error(status, err, *words)
    assert err.count("saxpy_rev, special_regs") <= 1, err


def test_interp_says_a_device_function_is_no_kernel(capsys, tmp_path):
    path = tmp_path / "func.ptx"
    path.write_text(".version 8.0\n.target sm_80\n.address_size 64\n"
                    ".func (.reg .b32 r) f(.reg .b32 a)\n{\n    add.s32 r, a, 1;\n    ret;\n}\n")
    status, out, err = cli(capsys, "interp", str(path), "--kernel", "f")
    assert_one_error(status, err, "--kernel f: f is a device function (.func)", "the file has none")
    status, out, err = cli(capsys, "interp", str(path))
    assert_one_error(status, err, "func.ptx: no kernel (.entry) to run")


def test_interp_refuses_more_shared_memory_than_a_cta_has_before_allocating_it(capsys):
    status, out, err = cli(capsys, "interp", BASICS, *SAXPY_ARGS, "--shared", str(10 ** 11))
    assert_one_error(status, err, "--shared 100000000000", "at most")


def test_interp_refuses_an_array_too_large_to_hold(capsys):
    status, out, err = cli(capsys, "interp", BASICS, "--kernel", "special_regs", "--arg", "u32:99999999999999")
    assert_one_error(status, err, "--arg 'u32:99999999999999'", "too large")


def test_interp_labels_the_arrays_it_prints_as_their_values_after_the_run(capsys):
    status, out, err = cli(capsys, "interp", BASICS, "--kernel", "saxpy_rev", "--block", "64", "--shared", "256",
                           "--arg", "f32:64:arange", "--arg", "f32:64:arange", "--arg", "u32=64", "--arg", "f32=2")
    assert status == 0, err
    line = next(ln for ln in out.splitlines() if ln.startswith("p_y"))
    assert line.startswith("p_y (f32:64:arange) after the run: ["), line
    assert "p_n" not in out  # a scalar has nothing to show


@pytest.mark.parametrize("option", ["--block-m", "--block-n", "--block-k", "--warps-m", "--warps-n", "--stages",
                                    "--raster-group"])
def test_gemm_int4_tile_errors_name_the_option(capsys, option):
    status, out, err = cli(capsys, "gemm-int4", option, "0", "--no-run", "--arch", "")
    assert_one_error(status, err, f"{option} must be at least 1, got 0")
    assert out == ""


def test_gemm_int4_prints_its_warning_as_a_command_line_not_a_python_warning(capsys):
    status, out, err = cli(capsys, "gemm-int4", "--target", "sm_90", "--path", "native_s4", "--no-run", "--arch", "")
    assert status == 0, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("ptxforge: warning: ") and "ptxas software routine" in lines[0], err
    assert not re.search(r"\.py:\d+", err) and "Warning:" not in err, err


def test_a_parse_error_names_its_ptx_line_once(capsys, tmp_path):
    path = tmp_path / "broken.ptx"
    path.write_text(BROKEN)
    for command in ("listing", "to-python"):
        status, out, err = cli(capsys, command, str(path))
        assert_one_error(status, err, "broken.ptx:12:", "add.s32 %r2, %f1, 1;")
        assert err.count("broken.ptx:12") == 1, err


def test_assemble_without_a_target_line_says_what_the_file_lacks(capsys, tmp_path):
    path = tmp_path / "untargeted.ptx"
    path.write_text(BROKEN.replace(".target sm_80\n", "").replace("add.s32 %r2, %f1, 1;", "mov.u32 %r2, 1;"))
    status, out, err = cli(capsys, "assemble", str(path))
    assert_one_error(status, err, "no .target directive")
    assert "arch=" not in err


@pytest.mark.parametrize("command", ["assemble", "lint", "listing", "to-python", "interp"])
def test_a_file_with_nul_bytes_is_refused_as_binary(capsys, tmp_path, command):
    path = tmp_path / "bin.ptx"
    path.write_bytes(b"\x00\x01\x02binary\x00")
    status, out, err = cli(capsys, command, str(path))
    assert_one_error(status, err, "bin.ptx: a binary file (NUL byte at offset 0)")


def run_module(*args, **kw):
    return subprocess.run([sys.executable, "-m", "ptxforge", *args], capture_output=True, text=True, timeout=120,
                          **kw)


def test_a_dash_reads_the_ptx_from_stdin():
    text = open(BASICS).read()
    p = run_module("lint", "-", "--arch", "sm_90", input=text)
    assert p.returncode == 0, p.stderr
    assert "<stdin>:18: note:" in p.stdout and "<stdin>: 0 error(s)" in p.stderr
    p = run_module("listing", "-", "--no-assemble", input=text)
    assert p.returncode == 0 and "// <stdin>:39" in p.stdout, p.stderr
    p = run_module("lint", "-", input="")
    assert p.returncode == 1 and "ptxforge: error: <stdin>: the file is empty" in p.stderr


def test_to_python_dash_o_dash_writes_the_script_to_stdout(capsys, tmp_path):
    status, out, err = cli(capsys, "to-python", BASICS, "-o", "-")
    assert status == 0, err
    assert out.startswith('"""') and "KernelBuilder" in out
    assert not (tmp_path / "-").exists() and not os.path.exists("-")


def test_a_reader_that_goes_away_is_no_traceback():
    proc = subprocess.Popen([sys.executable, "-m", "ptxforge", "listing", os.path.join(GOLDEN, "03_ldmatrix_mma.ptx"),
                             "--no-assemble"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    proc.stdout.close()  # like `| head -0`: gone before the first line
    err = proc.stderr.read().decode()
    proc.wait(timeout=120)
    proc.stderr.close()
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 1


@pytest.mark.parametrize("name,argv,why", [
    ("saxpy", ["--block", "0"], "argument --block: must be at least 1, got 0"),
    ("saxpy", ["--block", "2048"], "argument --block: must be at most 1024, got 2048"),
    ("saxpy", ["--n", "-5"], "argument --n: must be at least 1, got -5"),
    ("shared_reverse", ["--block", "2048"], "argument --block: must be at most 256, got 2048"),
    ("shared_reverse", ["--n", "0"], "argument --n: must be at least 1, got 0"),
    ("dependent_launch", ["--n", "-1"], "argument --n: must be at least 1, got -1"),
    ("dependent_launch", ["--steps", "0"], "argument --steps: must be at least 1, got 0"),
    ("device_functions", ["--n", "0"], "argument --n: must be at least 1, got 0"),
    ("hopper_cluster_multicast", ["--n", "0"], "argument --n: must be at least 1, got 0"),
    ("hopper_cluster_multicast", ["--n", "40"], "N must be one of"),
    ("hopper_cluster_multicast", ["--k", "100"], "K = 100 must be a multiple of 128"),
    ("hopper_tma_copy", ["--stages", "1"], "argument --stages: must be at least 2, got 1"),
    ("hopper_tma_copy", ["--rows", "0"], "argument --rows: must be at least 1, got 0"),
    ("hopper_wgmma_tile", ["--n", "0"], "argument --n: must be at least 1, got 0"),
    ("hopper_wgmma_tile", ["--k", "5"], "K = 5 must be a multiple of 128"),
    ("int4_gemm", ["--path", "bogus"], "unknown compute path 'bogus'"),
    ("property_test", ["--examples", "0"], "argument --examples: must be at least 1, got 0"),
    ("tensormap_edit", ["--groups", "0"], "argument --groups: must be at least 1, got 0"),
    ("tile_copy", ["--interpret", "--rows", "0"], "argument --rows: must be at least 1, got 0"),
    ("tile_copy", ["--interpret", "--threads", "100"], "threads"),
    ("tma_reduce", ["--slices", "0"], "argument --slices: must be at least 1, got 0"),
    ("tma_reduce", ["--rows", "-1"], "argument --rows: must be at least 1, got -1"),
    ("decode_gemms", ["--k", "3"], "K=3 is odd"),
    ("decode_gemms", ["--k", "4100"], "K=4100 gives 8200-byte operand rows"),
])
def test_an_example_refuses_a_bad_flag_with_a_usage_error(capsys, name, argv, why):
    from support.examples import load_example
    with pytest.raises(SystemExit) as info:
        load_example(name).main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and why in err, err
    assert "Traceback" not in err


def test_an_interrupted_command_is_one_line_and_status_130(capsys, monkeypatch):
    import ptxforge.cli as cli_module

    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli_module, "_cmd_targets", interrupted)
    status, out, err = cli(capsys, "targets")
    assert status == 130 and err == "ptxforge: interrupted\n", err


@pytest.mark.parametrize("k,checked", [(2050, 770), (1030, 774), (4096, 768), (1024, 1024), (66, 66)])
def test_gemm_int4_checks_the_asked_k_tail_on_the_interpreter(capsys, monkeypatch, k, checked):
    import ptxforge.cli.gemm as gemm_cli
    seen = {}

    def interpret(g, args):  # the shape the check runs at, without running it
        seen["shape"] = gemm_cli.interpreter_shape(args.m, args.n, args.k)
        return 0
    monkeypatch.setattr(gemm_cli, "_run_on_interpreter", interpret)
    status, out, err = cli(capsys, "gemm-int4", "--mma-sync", "--k", str(k), "--arch", "")
    assert status == 0, err
    assert seen["shape"] == (130, 200, checked)
    assert checked % 256 == k % 256 or k <= 1024


@pytest.mark.parametrize("name", ["interpret", "device_printf"])
def test_an_example_without_options_answers_help_and_refuses_an_unknown_flag(capsys, name):
    from support.examples import load_example
    ex = load_example(name)
    with pytest.raises(SystemExit) as info:
        ex.main(["--help"])
    assert info.value.code == 0 and "usage:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as info:
        ex.main(["--bogus"])
    assert info.value.code == 2 and "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_read_ptx_gpu_without_a_gpu_says_why_in_one_line(capsys, monkeypatch):
    import ptxforge as pf
    from support.examples import load_example

    def no_driver(*a, **kw):
        raise pf.ToolchainMissing("no CUDA driver on this machine")
    monkeypatch.setattr(pf, "load", no_driver)
    assert load_example("read_ptx").main(["--gpu"]) == 1
    out, err = capsys.readouterr()
    assert "interpreter: 8 block sums == numpy" in out
    assert err == "read_ptx: --gpu: no GPU run (ToolchainMissing: no CUDA driver on this machine)\n", err


def test_interp_fills_4_bit_and_bf16_arrays_with_values_of_their_type():
    import numpy as np

    from ptxforge.bfloat16 import from_bf16, to_bf16
    from ptxforge.cli.ptx_in import _arg
    from ptxforge.int4 import unpack_int4
    for name, signed in (("s4", True), ("u4", False)):
        low, high = (-8, 7) if signed else (0, 15)
        packed = _arg(f"{name}:64:rand")
        assert packed.dtype == np.uint8 and packed.shape == (32,)  # 64 values, two to a byte
        values = unpack_int4(packed, signed=signed)
        assert values.min() >= low and values.max() <= high and len(set(values.tolist())) > 8
        ramp = unpack_int4(_arg(f"{name}:32:arange"), signed=signed)
        assert ramp.tolist() == [low + (i - low) % 16 for i in range(32)]
        assert not _arg(f"{name}:6").any() and _arg(f"{name}:6").shape == (3,)
    assert from_bf16(_arg("bf16:5:arange")).tolist() == [0, 1, 2, 3, 4]
    rand = from_bf16(_arg("bf16:64:rand"))
    assert rand.min() >= 0 and rand.max() < 100 and len(set(rand.tolist())) > 8
    assert _arg("bf16=1.5") == to_bf16(np.float32(1.5))


def test_interp_refuses_an_odd_count_of_4_bit_values(capsys):
    status, out, err = cli(capsys, "interp", BASICS, "--kernel", "special_regs", "--arg", "s4:7")
    assert_one_error(status, err, "--arg 's4:7'", "two to a byte", "an even count")


@pytest.mark.parametrize("m", ["1024", "16"])
def test_gemm_int4_auto_with_mma_sync_chooses_mma_sync_tiles(capsys, m):
    status, out, err = cli(capsys, "gemm-int4", "--mma-sync", "--auto", "--m", m, "--no-run", "--arch", "")
    assert status == 0, err
    assert out.startswith("schedule: Int4Gemm ") and "mma.sync" in out.splitlines()[0], out


def test_gemm_int4_listing_prints_the_tma_wgmma_kernel_too(capsys):
    status, out, err = cli(capsys, "gemm-int4", "--listing", "--no-run", "--arch", "")
    assert status == 0, err
    assert out.startswith("schedule: HopperGemm")
    assert "wgmma.mma_async" in out and len(out.splitlines()) > 500
