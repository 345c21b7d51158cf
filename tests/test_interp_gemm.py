"""A complete pipelined int4 GEMM (tests/support/samples.py) under the interpreter: exact results on
drawn ragged shapes for both compute paths, and the planted bugs it exists to catch — a removed
cp.async.wait_group, a removed bar.sync, an off-by-one tail bound — each reported precisely."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from ptxforge import interp
from ptxforge.int4 import pack_int4
from ptxforge.testing.interp_strategies import check_against_reference, poison, seeds

from support.samples import Int4GemmSample


def operands(seed, m, n, k):
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 8, size=(m, k))
    b = rng.integers(-8, 8, size=(n, k))
    return a, b, pack_int4(a), pack_int4(b)


@given(m=st.integers(1, 130), n=st.integers(1, 130), k=st.sampled_from([32, 96, 128, 160, 256]),
       path=st.sampled_from(["s8", "s4"]), seed=seeds())
def test_int4_gemm_matches_numpy(m, n, k, path, seed):
    cfg = Int4GemmSample(path=path)
    a, b, pa, pb = operands(seed, m, n, k)
    c = poison(np.empty((m, n), np.int32))
    check_against_reference(cfg.module(), grid=cfg.grid(m, n), block=cfg.threads, args=[pa, pb, c, m, n, k],
                            expected={2: a @ b.T})


def test_int4_gemm_64x64x128_extreme_values():
    cfg = Int4GemmSample()
    a = np.full((64, 128), -8)
    b = np.full((64, 128), -8)
    c = poison(np.empty((64, 64), np.int32))
    report = check_against_reference(cfg.module(), grid=cfg.grid(64, 64), block=128,
                                     args=[pack_int4(a), pack_int4(b), c, 64, 64, 128], expected={2: a @ b.T})
    assert report.ok and report.warp_instructions > 0


BUGS = {
    # planted bug: (finding kind, instruction that is reported, the other access it names)
    "no_wait": ("async", "ldmatrix", "cp.async"),
    "no_barrier": ("race", "ldmatrix", "cp.async"),
    "tail_off_by_one": ("oob", "cp.async", None),
}


@pytest.mark.parametrize("bug", sorted(BUGS))
def test_planted_bugs_are_caught(bug):
    kind, opcode, other = BUGS[bug]
    cfg = Int4GemmSample(bugs=(bug,))
    m, n, k = 50, 70, 256  # ragged in M and N: the tail bug reads one row past the end
    _, _, pa, pb = operands(1, m, n, k)
    c = poison(np.empty((m, n), np.int32))
    with pytest.raises(interp.InterpError) as e:
        interp.run(cfg.module(), grid=cfg.grid(m, n), block=128, args=[pa, pb, c, m, n, k])
    f = e.value.findings[0]
    assert f.kind == kind and f.instruction.opcode == opcode
    assert f.loc is not None and f.loc.filename.endswith("samples.py")
    if other:
        assert f.other.opcode == other and f.other.loc.filename.endswith("samples.py")
    if bug == "tail_off_by_one":
        assert "past the end" in f.message or "which has" in f.message


def test_clean_kernel_has_no_findings_in_collect_mode():
    cfg = Int4GemmSample()
    m, n, k = 70, 50, 96
    a, b, pa, pb = operands(2, m, n, k)
    c = poison(np.empty((m, n), np.int32))
    r = interp.run(cfg.module(), grid=cfg.grid(m, n), block=128, args=[pa, pb, c, m, n, k], check=False)
    assert r.ok, r
    np.testing.assert_array_equal(c, a @ b.T)


def test_check_against_reference_reports_mismatches():
    cfg = Int4GemmSample()
    m, n, k = 20, 30, 64
    a, b, pa, pb = operands(3, m, n, k)
    c = poison(np.empty((m, n), np.int32))
    wrong = a @ b.T
    wrong[3, 4] += 1
    with pytest.raises(AssertionError, match=r"1 of 600 elements differ.*\(3, 4\)"):
        check_against_reference(cfg.module(), grid=cfg.grid(m, n), block=128, args=[pa, pb, c, m, n, k],
                                expected={2: wrong})


def test_check_against_reference_refuses_a_reference_of_another_shape():
    """A reference of the output's size in another shape (a transpose forgotten) is an error, not reshaped into
    a pass."""
    import ptxforge as pf
    from ptxforge.testing.interp_strategies import check_against_reference
    k = pf.KernelBuilder("copy", target="sm_80")
    src, dst = k.param_ptr("src", pf.u32), k.param_ptr("dst", pf.u32)
    off = k.mul(k.tid(), 4, mode="wide")
    k.st(k.add(dst, off), k.ld(k.add(src, off), type=pf.u32))
    a = np.arange(6, dtype=np.uint32).reshape(2, 3)
    out = np.zeros((2, 3), np.uint32)
    with pytest.raises(ValueError, match=r"expected value for argument 1 has shape \(3, 2\); the output has \(2, 3\)"):
        check_against_reference(k.module(), grid=1, block=6, args=[a, out], expected={1: a.T})
    check_against_reference(k.module(), grid=1, block=6, args=[a, out], expected={1: a})
