"""The examples no other test file runs, run as a user would on a machine without a GPU: each must finish and
report what it checks (they hold their own assertions against numpy)."""

import pytest

from support.examples import load_example


def test_the_interpreter_example_runs_its_kernel_and_finds_the_planted_bug(capsys):
    load_example("interpret").main()
    out = capsys.readouterr().out
    assert "C == A @ B.T exactly" in out and "race" in out


def test_the_tile_copy_example_is_exact_on_the_interpreter(capsys):
    ex = load_example("tile_copy")
    for argv in ([], ["--dtype", "s4", "--completion", "mbarrier"], ["--packed", "--dtype", "f32"]):
        assert ex.main(["--interpret", *argv]) == 0, argv
    assert "interpreter:" in capsys.readouterr().out


def test_the_wmma_example_is_exact_on_the_interpreter_and_assembles(capsys):
    import ptxforge as pf
    ex = load_example("wmma_gemm")
    assert ex.main(["--size", "32", "64", "48"]) == 0
    assert "interpreter: C (32 x 64) == 0.5 * A @ B exactly" in capsys.readouterr().out
    for target in ("sm_80", "sm_90"):
        pf.assemble(ex.wmma_gemm_kernel(target))


def test_the_printf_example_prints_each_blocks_maximum(capsys):
    import ptxforge as pf
    ex = load_example("device_printf")
    assert ex.main([]) == 0
    out = capsys.readouterr().out
    assert out.count("block ") == 4 and "interpreter: 4 lines, each block's maximum exact" in out
    for target in ("sm_80", "sm_90"):
        pf.assemble(ex.block_max_kernel(target).module())


@pytest.mark.parametrize("name,argv", [("device_printf", []), ("wmma_gemm", ["--size", "32", "32", "16"])])
def test_an_example_without_a_gpu_run_says_why(monkeypatch, capsys, name, argv):
    import ptxforge as pf

    def no_driver(*a, **kw):
        raise pf.ToolchainMissing("no CUDA driver on this machine (the reason the example must show)")
    monkeypatch.setattr(pf, "load", no_driver)
    assert load_example(name).main(argv) == 0
    out = capsys.readouterr().out
    assert "no GPU run (ToolchainMissing: no CUDA driver on this machine (the reason the example must show))" in out


@pytest.mark.parametrize("argv,why", [
    (["--k", "2561"], "K=2561 gives 1280.5-byte operand rows"), (["--k", "48"], "K=48 gives 24-byte operand rows"),
    (["--m", "-3"], "M must be an int >= 1, got -3"), (["--n", "0"], "N must be an int >= 1, got 0"),
    (["--config", "NOPE"], "argument --config: invalid choice: 'NOPE'"),
])
def test_the_hopper_interpreter_example_refuses_what_its_kernel_cannot_run(capsys, argv, why):
    ex = load_example("hopper_gemm_interp")
    with pytest.raises(SystemExit) as info:
        ex.main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and why in err, err
    if "--config" in argv:
        assert all(repr(name) in err for name in ex.s4_configurations()), err


def test_the_read_ptx_example_runs_parsed_ptx_and_catches_its_race_and_typo(capsys):
    assert load_example("read_ptx").main([]) == 0
    out = capsys.readouterr().out
    assert "interpreter: 8 block sums == numpy" in out
    assert "[race] read-after-write race on shared memory" in out and "emitted at racy.ptx:44" in out
    assert "typo.ptx:30: mul.f32 does not take .wide" in out
    assert "block_sum.ptx:38" in out  # the listing names the input's lines
