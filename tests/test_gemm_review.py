"""The GEMM schedules as a user calls them, without a GPU: what `reference`, `interpret`, `run`, `plan` and
`for_shape` take and refuse (before any driver call), what they say about it, and what `ptxforge gemm-int4`
prints and returns."""

import numpy as np
import pytest

import ptxforge as pf
from ptxforge.int4 import pack_int4, random_int4
from ptxforge.schedules import Bf16Gemm, HopperGemm, Int4Gemm, Int8Gemm

#: small mma.sync schedules (one tile covers the ragged shapes below)
G4 = Int4Gemm(block_m=64, block_n=64, warps_m=2, warps_n=2, stages=2, target="sm_80")
G8 = Int8Gemm(block_m=64, block_n=64, warps_m=2, warps_n=2, stages=2, target="sm_80")
U8 = Int8Gemm(block_m=64, block_n=64, warps_m=2, warps_n=2, stages=2, target="sm_80", operand="u8")


def _s8(shape, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, shape, dtype=np.int8)


def _packed(shape, seed=0):
    return pack_int4(random_int4(shape, np.random.default_rng(seed)))


# ---------------------------------------------------------------- the numpy reference agrees with the kernel

@pytest.mark.parametrize("g, view", [(G8, np.uint8), (U8, np.int8)], ids=["s8-as-uint8", "u8-as-int8"])
def test_the_mma_sync_reference_reads_bytes_as_the_kernel_does(g, view):
    a, b = _s8((5, 64), 1).view(view), _s8((7, 64), 2).view(view)
    c, report = g.interpret(a, b)
    assert report.ok
    assert np.array_equal(g.reference(a, b), c.astype(np.int64))


def test_the_mma_sync_reference_checks_its_operands_as_run_does():
    a, b = _packed((5, 64)), _packed((7, 64), 1)
    for k in (62, True, "64"):
        with pytest.raises(pf.ValidationError, match="K"):
            G4.reference(a, b, k=k)
    with pytest.raises(pf.ValidationError, match="8-bit integers"):
        G8.reference(_s8((5, 64)).astype(np.float32), _s8((7, 64)))
    with pytest.raises(pf.ValidationError, match="8-bit integers"):
        G8.reference(_s8((5, 64)).astype(bool), _s8((7, 64)).astype(bool))


def test_the_f16_reference_reads_int16_bit_patterns_as_the_kernel_does():
    rng = np.random.default_rng(3)
    h = Bf16Gemm.for_shape(40, 72, 64, operand="f16")
    a = rng.standard_normal((5, 64)).astype(np.float16)
    b = rng.standard_normal((7, 64)).astype(np.float16)
    want = h.reference(a, b)
    got = h.reference(a.view(np.int16), b.view(np.int16))
    assert np.allclose(got, want, rtol=0, atol=1e-9), np.abs(got - want).max()


# ---------------------------------------------------------------- host operands refused before anything runs

@pytest.mark.parametrize("operand, dtype", [("bf16", ">u2"), ("f16", ">f2"), ("f16", ">i2")])
def test_big_endian_host_operands_are_refused(operand, dtype):
    h = Bf16Gemm.for_shape(40, 72, 64, operand=operand)
    a = np.ones((5, 64), dtype)
    b = np.ones((7, 64), dtype)
    for call in (lambda: h.interpret(a, b), lambda: h.reference(a, b), lambda: h.run(a, b)):
        with pytest.raises(pf.ValidationError, match="big-endian"):
            call()


@pytest.mark.parametrize("k", ["64", 64.0, True, [64]])
def test_a_k_that_is_not_an_int_is_refused_as_such(k):
    a, b = _packed((5, 256)), _packed((7, 256), 1)
    h = Int4Gemm.for_shape(40, 72, 256, target="sm_90a")
    for call in (lambda: G4.interpret(a, b, k=k), lambda: G4.run(a, b, k=k), lambda: h.interpret(a, b, k=k),
                 lambda: h.run(a, b, k=k), lambda: h.reference(a, b, k=k)):
        with pytest.raises(pf.ValidationError, match="K must be an int"):
            call()


def test_a_read_only_or_strided_numpy_c_is_refused_by_the_mma_sync_run_before_launching():
    a, b = _packed((5, 64)), _packed((7, 64), 1)
    ro = np.zeros((5, 7), np.int32)
    ro.flags.writeable = False
    with pytest.raises(pf.ValidationError, match="read-only"):
        G4.run(a, b, ro)
    with pytest.raises(pf.ValidationError, match="C-contiguous"):
        G4.run(a, b, np.zeros((7, 5), np.int32).T)


@pytest.mark.parametrize("splits", [0, -1, True, 2.0, "2", None])
def test_splits_that_are_not_a_count_are_refused_before_the_driver(splits):
    h = Int4Gemm.for_shape(40, 72, 256, target="sm_90a")
    a, b = _packed((5, 256)), _packed((7, 256), 1)
    calls = [lambda: h.plan(5, 7, 256, splits=splits), lambda: h.interpret(a, b, splits=splits)]
    if splits is not None:  # (run and plan choose the split themselves for None)
        calls.append(lambda: h.run(a, b, splits=splits))
    else:
        calls = calls[1:]
    for call in calls:
        with pytest.raises(pf.ValidationError, match="splits must be an int >= 1"):
            call()


def test_a_c_over_the_memory_of_a_or_b_is_refused_naming_them():
    h = Int8Gemm.for_shape(40, 72, 128, target="sm_90a")
    for g, k in ((G8, 64), (h, 128)):
        a, b = _s8((5, k)), _s8((k // 4, k), 1)
        with pytest.raises(pf.ValidationError, match="C overlaps A"):
            g.interpret(a, b, a.view(np.int32))
        with pytest.raises(pf.ValidationError, match="C overlaps A"):
            g.run(a, b, a.view(np.int32))
        bb = _s8((k // 4, k), 1)
        with pytest.raises(pf.ValidationError, match="C overlaps B"):
            g.interpret(a, bb, bb[:5].view(np.int32))


# ---------------------------------------------------------------- the fast reader

def test_the_fast_reader_learns_nothing_from_an_array_whose_interface_raises():
    from ptxforge.schedules.operands import _FastReader

    class Raising:
        """An array whose interface raises something other than AttributeError (torch does for a tensor that
        requires grad, and for element types it has no type string for)."""
        shape = (4, 4)
        dtype = np.dtype(np.int8)

        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("cannot describe this tensor")

        def data_ptr(self):
            return 0x10000

        def is_contiguous(self):
            return True

        def get_device(self):
            return 0

    r = _FastReader()
    r.learn(Raising(), 0x10000)
    assert r.read(Raising()) is None


# ---------------------------------------------------------------- for_shape and what it says

def test_for_shape_with_hopper_true_takes_hopper_options_and_refuses_the_others():
    g = Int8Gemm.for_shape(1024, 1024, 1024, target="sm_90a", hopper=True, stages=3)
    assert isinstance(g, HopperGemm) and g.stages == 3
    with pytest.raises(pf.ValidationError, match="block_m"):
        Int8Gemm.for_shape(1024, 1024, 1024, target="sm_90a", hopper=True, block_m=64)


@pytest.mark.parametrize("cls, operand", [(Int4Gemm, "s8"), (Int8Gemm, "s4"), (Int8Gemm, "u4")])
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_for_shape_refuses_an_operand_its_class_does_not_take(cls, operand, target):
    with pytest.raises(pf.ValidationError, match=f"{cls.__name__} takes operand"):
        cls.for_shape(1024, 1024, 1024, target=target, operand=operand)


def test_the_path_taken_for_a_large_k_says_why():
    for g in (Int4Gemm.for_shape(64, 64, 262144, target="sm_90"), Int4Gemm(target="sm_90").for_problem(262144)):
        assert g.path_name == "s8_signext"
        assert "chosen by the caller" not in g.path_reason and "262144" in g.path_reason, g.path_reason
    assert Int4Gemm(target="sm_90", path="s8_signext").path_reason.startswith("chosen by the caller")


@pytest.mark.parametrize("operand", ["bf16", "f16"])
def test_a_16_bit_k_the_tensor_maps_cannot_take_is_not_sent_to_the_mma_sync_schedules(operand):
    with pytest.raises(pf.ValidationError, match="K % 8 == 0") as e:
        Bf16Gemm.for_shape(8, 8, 63, operand=operand)
    assert "mma.sync" not in str(e.value)
    with pytest.raises(pf.ValidationError, match="mma.sync"):  # (the integer operands have them)
        HopperGemm("s8").check_problem(8, 8, 40)


# ---------------------------------------------------------------- ptxforge gemm-int4 without a GPU

@pytest.fixture
def no_gpu(monkeypatch):
    """The command as it runs on a machine without a GPU."""
    from ptxforge.runtime import device
    monkeypatch.setattr(device, "gpu_available", lambda: False)


@pytest.mark.parametrize("argv", [["--k", str(2 ** 31)], ["--m", str(3 * 10 ** 9)], ["--n", str(2 ** 31)],
                                  ["--k", str(2 ** 31), "--target", "sm_90"], ["--m", str(2 ** 31), "--mma-sync"]])
@pytest.mark.parametrize("run", [[], ["--no-run"]], ids=["interp", "no-run"])
def test_gemm_int4_refuses_a_problem_its_kernel_cannot_compute(no_gpu, capsys, argv, run):
    from ptxforge.cli import main
    assert main(["gemm-int4", "--arch", "", *argv, *run]) == 1
    err = capsys.readouterr().err
    assert "below 2**31" in err or "< 2^31" in err, err


def test_gemm_int4_says_why_a_large_k_takes_the_exact_path(no_gpu, capsys):
    from ptxforge.cli import main
    assert main(["gemm-int4", "--target", "sm_90", "--arch", "", "--no-run", "--k", "262144"]) == 0
    out = capsys.readouterr().out
    path = [ln for ln in out.splitlines() if ln.startswith("path:")]
    assert path and "s8_signext" in path[0] and "chosen by the caller" not in path[0], out


# ---------------------------------------------------------------- the mma.sync schedules' own parameters

def test_schedule_parameters_take_numpy_integers_as_for_shape_and_hopper_do():
    g = Int8Gemm(block_m=np.int64(64), block_n=64, warps_m=np.int32(2), warps_n=2, stages=np.int64(3),
                 target="sm_80")
    assert g == Int8Gemm(block_m=64, block_n=64, warps_m=2, warps_n=2, stages=3, target="sm_80")
    assert type(g.stages) is int and g.kernel_name == Int8Gemm(block_m=64, block_n=64, stages=3,
                                                               target="sm_80").kernel_name
    with pytest.raises(pf.ValidationError, match="stages must be an int"):
        Int8Gemm(stages=np.float64(3), target="sm_80")


@pytest.mark.parametrize("align", [0, -16, 3, True, 16.0, "16", None])
def test_an_alignment_that_is_not_a_power_of_two_count_of_bytes_is_refused(align):
    for kw in (dict(align=align), dict(c_align=align)):
        with pytest.raises(pf.ValidationError, match="power of two"):
            G8.for_problem(64, 8, **kw)
        with pytest.raises(pf.ValidationError, match="power of two"):
            G8.plan(5, 8, 64, **kw)


class _RequiresGrad:
    """A CUDA tensor that requires grad as torch describes it: its array interface raises RuntimeError and its
    DLPack export BufferError."""
    shape = (5, 64)
    dtype = np.dtype(np.int8)

    @property
    def __cuda_array_interface__(self):
        raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")

    def __dlpack__(self, *args, **kwargs):
        raise BufferError("Can't export tensors that require gradient, use tensor.detach()")

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0


def test_an_operand_its_producer_cannot_describe_is_a_ptxforge_error_naming_it():
    from ptxforge.schedules.hopper.operands import gpu_view
    b = _s8((7, 64))
    with pytest.raises(pf.LaunchError, match=r"A: _RequiresGrad cannot be read as a GPU array.*BufferError.*detach") as e:
        G8.run(_RequiresGrad(), b, np.zeros((5, 7), np.int32))
    assert isinstance(e.value.__cause__, BufferError)
    with pytest.raises(pf.LaunchError, match=r"B: _RequiresGrad cannot be read"):
        gpu_view(_RequiresGrad(), "B")


def test_a_hopper_path_reason_describes_its_own_configuration():
    skinny = Int4Gemm.for_shape(16, 4096, 4096, target="sm_90a")  # the weights widened in registers
    assert skinny.swap_ab
    why = skinny.path_reason
    assert "swapped" in why and "B (the weights) in registers" in why and "A in shared memory" in why, why
    large = Int4Gemm.for_shape(1024, 1024, 1024, target="sm_90a")
    assert "A in registers" in large.path_reason and "16 v" in large.path_reason, large.path_reason
    biased = HopperGemm("s4", block_n=128, block_k_bytes=256, stages=2, biased=True)
    assert "v + 8" in biased.path_reason and "16 v" not in biased.path_reason, biased.path_reason
    shared = HopperGemm("s4", block_n=128, block_k_bytes=256, stages=2, a_registers=False)
    assert "both operands in shared memory" in shared.path_reason, shared.path_reason
    assert "swapped" in Int8Gemm.for_shape(16, 4096, 4096, target="sm_90a").path_reason
    assert "swapped" not in HopperGemm("s8").path_reason


@pytest.mark.parametrize("argv", [["--k", "7"], ["--m", "0"], ["--n", "-3"]])
def test_the_int4_example_refuses_a_problem_as_a_usage_error(argv, capsys):
    from support.examples import load_example
    with pytest.raises(SystemExit) as e:
        load_example("int4_gemm").main(argv)
    assert e.value.code == 2
    assert "cannot run" in capsys.readouterr().err


def test_a_prepared_hopper_launch_on_numpy_operands_says_where_numpy_is_taken():
    from ptxforge.schedules.hopper import prepare
    h = Int8Gemm.for_shape(40, 72, 128, target="sm_90a")
    a, b, c = _s8((5, 128)), _s8((7, 128), 1), np.zeros((5, 7), np.int32)
    with pytest.raises(pf.ValidationError, match="A must be a GPU array") as e:
        prepare(h, a, b, c)
    assert "HopperGemm.run" in str(e.value) and "or A and B both numpy arrays" not in str(e.value)


@pytest.mark.parametrize("make", [
    lambda: Int8Gemm.for_shape(64, 64, 64, target="sm_80", epilogue="tma"),
    lambda: Int4Gemm.for_shape(64, 64, 64, target="sm_90a", hopper=False, stage=3),
    lambda: Int8Gemm.for_shape(1024, 1024, 1024, target="sm_90a", blockm=64),
    lambda: Bf16Gemm.for_shape(64, 64, 64, block_m=64),
    lambda: Bf16Gemm.for_shape(16, 4096, 4096, stagess=4),
], ids=["mma-sync-hopper-option", "mma-sync-typo", "sm90a-typo", "bf16-mma-sync-option", "bf16-skinny-typo"])
def test_for_shape_names_a_parameter_its_schedule_does_not_have(make):
    with pytest.raises(pf.ValidationError, match="no parameter"):
        make()


def test_the_skinny_s8_reason_quotes_the_measurements_the_tuning_notes_record():
    """hopper_reason's figures for the s8 decode configurations are those of tuning.py's notes and docs/hopper.md
    (M = 32 and 64: 1.26x cuBLAS int8, M = 128: 1.94x)."""
    from ptxforge.schedules.hopper import tuning
    why = tuning.hopper_reason(32, 8192, 8192, "s8")[1]
    for figure in ("1.26x", "1.94x"):
        assert figure in why and figure in tuning.__doc__, why


@pytest.mark.skipif(pf.runtime.gpu_available(), reason="what a machine without a GPU says")
@pytest.mark.parametrize("make", [lambda: G4.plan(5, 7, 64), lambda: G4.kernel(),
                                  lambda: Int4Gemm.for_shape(40, 72, 256, target="sm_90a").plan(40, 72, 256),
                                  lambda: Bf16Gemm.for_shape(16, 256, 512).plan(16, 256, 512)],
                         ids=["mma-sync-plan", "mma-sync-kernel", "hopper-plan", "bf16-plan"])
def test_without_a_gpu_a_plan_points_at_the_interpreter(make):
    with pytest.raises(pf.ToolchainMissing, match=r"interpret\(a, b\) runs this kernel on the CPU interpreter"):
        make()


@pytest.mark.parametrize("stream", ["abc", -1, 1.5])
def test_a_hopper_run_on_numpy_operands_takes_its_stream_as_the_device_path_does(stream):
    h = Int4Gemm.for_shape(40, 72, 256, target="sm_90a")
    a, b = _packed((5, 256)), _packed((7, 256), 1)
    with pytest.raises(pf.LaunchError, match="stream"):
        h.run(a, b, stream=stream)
    with pytest.raises(pf.LaunchError, match="stream"):
        G4.run(a[:, :32], b[:, :32], stream=stream)


def test_an_sm_90a_problem_the_wgmma_path_cannot_take_says_why_it_got_mma_sync():
    g = Int4Gemm.for_shape(64, 64, 1000, target="sm_90a")  # 500-byte rows: no tensor map takes them
    assert not isinstance(g, HopperGemm)
    assert "TMA + wgmma" in g.path_reason and "multiple of 16 bytes" in g.path_reason, g.path_reason
    assert "TMA + wgmma" not in Int4Gemm.for_shape(64, 64, 1000, target="sm_90").path_reason
    assert "TMA + wgmma" not in Int4Gemm.for_shape(64, 64, 1024, target="sm_90a", hopper=False).path_reason
    u8 = Int8Gemm.for_shape(64, 64, 1024, target="sm_90a", operand="u8")
    assert "no Hopper path" in u8.path_reason and "u8, f16" not in u8.path_reason, u8.path_reason


def test_bf16_for_shape_takes_a_target_as_the_integer_gemms_do():
    assert Bf16Gemm.for_shape(64, 64, 64, target="sm_90a") == Bf16Gemm.for_shape(64, 64, 64)
    with pytest.raises(pf.ValidationError, match="sm_90a"):
        Bf16Gemm.for_shape(64, 64, 64, target="sm_80")


@pytest.mark.parametrize("argv", [["--m", "0"], ["--n", "-1"], ["--k", "0"]])
def test_the_decode_example_refuses_sizes_below_one_as_a_usage_error(argv, capsys):
    from support.examples import load_example
    with pytest.raises(SystemExit) as e:
        load_example("decode_gemms").main(argv)
    assert e.value.code == 2 and "must be an int >= 1" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["0", "5", "5"], ["45", "37"], ["5", "5", "x"]])
def test_the_fused_epilogue_example_refuses_a_bad_problem_as_a_usage_error(argv, capsys):
    from support.examples import load_example
    with pytest.raises(SystemExit) as e:
        load_example("gemm_fused_epilogue").main(argv)
    assert e.value.code == 2 and "error" in capsys.readouterr().err


def test_the_fused_epilogue_example_runs_the_problem_it_is_given(capsys):
    from support.examples import load_example
    assert load_example("gemm_fused_epilogue").main(["17", "9", "40"]) == 0
    assert capsys.readouterr().out.startswith("17x9x40: exact = True")
