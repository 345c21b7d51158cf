"""setmaxnreg on the interpreter: the CTA's register pool (interp/exec_regpool.py) and the entry cap
it starts from (`Kernel.entry_registers`, `isa.tensor.entry_register_cap`).

A warp-specialized split that asks for more registers than the launch gave hung on the H200 (640
threads start with 96 each; 40 + 4 x 112 per thread slot is more): here the same kernel ends in a
deadlock finding that says how many registers the waiting warpgroup asks for and how many the pool
holds, in both thread orders."""

import numpy as np
import pytest

from ptxforge import interp
from ptxforge.builder import KernelBuilder
from ptxforge.isa import types as T


def split_kernel(threads, producer, consumer, *, cap=True, extra=None, sync_between=True):
    """Warpgroup 0 gives registers back (.dec producer), the others ask for more (.inc consumer), then
    optionally `extra` (action, count) after a barrier of theirs; then every thread writes its warpgroup
    index + 1, so a run that finishes shows every warpgroup went on."""
    kw = dict(maxntid=threads, minnctapersm=1) if cap else {}
    k = KernelBuilder("split", target="sm_90a", **kw)
    out = k.param_ptr("out", T.u32)
    tid = k.tid()
    wg = k.shr(tid, 7, type=T.u32)
    with k.if_(k.setp("eq", wg, 0, type=T.u32)):
        k.setmaxnreg("dec", producer)
    with k.else_():
        k.setmaxnreg("inc", consumer)
        if extra is not None:
            if sync_between:  # PTX: the warpgroup's warps synchronize between two setmaxnreg
                k.bar_sync(1, threads - 128)
            k.setmaxnreg(*extra)
    at = k.mad(k.ctaid(), threads, tid, mode="lo", type=T.u32)
    k.st(k.mad(at, 4, out, mode="wide", type=T.u32), k.add(wg, 1, type=T.u32), type=T.u32)
    return k


def _run(k, threads, order="lowest-pc", ctas=1):
    out = np.zeros(threads * ctas, np.uint32)
    rep = interp.run(k, grid=ctas, block=threads, args=[out], order=order, check=False)
    return out, rep


@pytest.mark.parametrize("order", interp.ORDERS)
@pytest.mark.parametrize("threads,producer,consumer", [(384, 40, 232), (512, 40, 152), (640, 40, 104),
                                                      (256, 24, 232)])
def test_a_split_the_launch_can_give_runs(threads, producer, consumer, order):
    out, rep = _run(split_kernel(threads, producer, consumer), threads, order, ctas=2)
    assert not rep.findings, rep.findings
    np.testing.assert_array_equal(out, np.tile(np.arange(threads) // 128 + 1, 2))


@pytest.mark.parametrize("order", interp.ORDERS)
def test_four_consumers_at_112_wait_forever(order):
    """640 threads x 96 at entry: the .dec frees 56 x 128 = 7168, three .inc's to 112 take 2048 each and
    the fourth waits for 2048 with 1024 left (what the H200 did: it hung)."""
    out, rep = _run(split_kernel(640, 40, 112), 640, order)
    dead = [f for f in rep.findings if f.kind == "barrier"]
    assert len(dead) == 1, rep.findings
    msg = dead[0].message
    assert "deadlock" in msg and "setmaxnreg.inc.sync.aligned.u32 112" in msg
    assert "for 2048 registers, and its CTA's pool holds 1024" in msg
    assert "640 threads x 96 registers (61440)" in msg
    assert dead[0].nthreads == 128  # one warpgroup is stuck; the other three went on
    assert (out != 0).sum() == 512


def test_the_pool_is_per_cta():
    """Two CTAs in one batch: each pool serves its own warpgroups (a shared pool would let CTA 0's
    producer feed CTA 1's consumers, or starve them)."""
    out, rep = _run(split_kernel(384, 40, 232), 384, ctas=3)
    assert not rep.findings
    out, rep = _run(split_kernel(384, 40, 240), 384, ctas=3)  # 40 + 2 x 240 > 3 x 168
    stuck = [f for f in rep.findings if f.kind == "barrier"]
    assert len(stuck) == 1 and stuck[0].nthreads == 3 * 128  # one consumer per CTA waits


def test_an_inc_to_fewer_and_a_dec_to_more_move_nothing():
    """256 threads start with 255 registers: the consumers' .inc 232 keeps what they hold (the 1-consumer
    Hopper kernels do this and run on the H200), so a later .inc 248 needs nothing from the pool; at 384
    threads (168 each) a .dec 200 gives nothing back, so the consumers' .inc 232 waits."""
    out, rep = _run(split_kernel(256, 40, 232, extra=("inc", 248)), 256)
    assert not rep.findings and (out != 0).all()
    _, rep = _run(split_kernel(384, 200, 232), 384)
    assert [f.kind for f in rep.findings] == ["barrier"]
    assert "for 8192 registers, and its CTA's pool holds 0" in rep.findings[0].message


def test_a_second_inc_takes_what_is_left():
    """The counts move: 384 threads start with 168 each; the .dec 40 frees 128 x 128 = 16384, the two
    consumers' .inc 200 take 2 x 4096 of it.  A second .inc to 232 takes the other 2 x 4096: it runs.
    To 240 the first consumer takes 5120 and the second waits for 5120 with 3072 left."""
    _, rep = _run(split_kernel(384, 40, 200, extra=("inc", 232)), 384)
    assert not rep.findings
    _, rep = _run(split_kernel(384, 40, 200, extra=("inc", 240)), 384)
    assert [f.kind for f in rep.findings] == ["barrier"]
    assert "for 5120 registers, and its CTA's pool holds 3072" in rep.findings[0].message


def test_without_an_entry_cap_setmaxnreg_is_ignored():
    """ptxas ignores setmaxnreg in a kernel without a cap (C7508): nothing to move, nothing waits."""
    import ptxforge as pf
    with pytest.warns(pf.IgnoredInstructionWarning):  # the builder says so too, at the line that asked
        k = split_kernel(640, 40, 112, cap=False)
    assert k.finish().entry_registers is None
    out, rep = _run(k, 640)
    assert not rep.findings
    assert (out != 0).all()


@pytest.mark.parametrize("kw,want", [
    (dict(maxntid=384, minnctapersm=1), 168), (dict(maxntid=640, minnctapersm=1), 96),
    (dict(maxntid=256, minnctapersm=1), 255), (dict(maxntid=256, minnctapersm=2), 128),
    (dict(maxntid=(100, 1, 1), minnctapersm=3), 168),  # whole warps: 3 x 128 threads, not 300 (216)
    (dict(maxnreg=128), 128), (dict(maxntid=384, minnctapersm=1, maxnreg=96), 96),
    (dict(maxntid=384), None), (dict(), None)])
def test_entry_registers(kw, want):
    k = KernelBuilder("cap", target="sm_90a", **kw)
    k.ret()
    assert k.finish().entry_registers == want


def test_ptx_text_read_in_reports_the_hang_at_its_own_line():
    """The same kernel as PTX text (what nvcc or another tool wrote): read in, run, and the deadlock names the
    line of the text that waits for registers."""
    import ptxforge as pf
    text = split_kernel(640, 40, 112).module().render().text
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "setmaxnreg.inc" in t)
    out = np.zeros(640, np.uint32)
    rep = interp.run(pf.parse(text, filename="split.ptx"), "split", grid=1, block=640, args=[out], check=False)
    dead = [f for f in rep.findings if f.kind == "barrier"]
    assert len(dead) == 1 and "for 2048 registers, and its CTA's pool holds 1024" in dead[0].message
    assert str(dead[0].instruction.loc) == f"split.ptx:{line}"


def test_ptx_text_without_an_entry_cap_is_warned_at_its_line():
    """Read-in PTX whose kernel has setmaxnreg but no register cap: ptxas would drop it, and the reader says so
    at the line of the instruction (a warning, and a note in the reading)."""
    import ptxforge as pf
    with pytest.warns(pf.IgnoredInstructionWarning):
        text = split_kernel(640, 40, 112, cap=False).module().render().text
    lines = [i for i, t in enumerate(text.splitlines(), 1) if "setmaxnreg" in t]
    with pytest.warns(pf.IgnoredInstructionWarning) as got:
        pf.parse(text, filename="nocap.ptx")
    assert sorted(w.lineno for w in got) == lines and {w.filename for w in got} == {"nocap.ptx"}


def test_a_second_setmaxnreg_without_a_synchronization_is_reported():
    """PTX: after a setmaxnreg the warpgroup's warps synchronize explicitly before the next one."""
    _, rep = _run(split_kernel(384, 40, 200, extra=("inc", 232), sync_between=False), 384)
    assert [f.kind for f in rep.findings] == ["registers"] and rep.findings[0].count == 2  # both consumers
    assert "have not synchronized since its last one" in rep.findings[0].message


def test_lint_names_the_arch_specific_target_and_the_ignored_setmaxnreg():
    """`ptxforge lint`: setmaxnreg needs sm_90a (not sm_90), and without an entry cap it is a warning at its line."""
    import warnings
    from ptxforge.parse.lint import lint
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = split_kernel(640, 40, 112, cap=False).module().render().text
    found = lint(text, filename="nocap.ptx")
    lines = [i for i, t in enumerate(text.splitlines(), 1) if "setmaxnreg" in t]
    assert [f.line for f in found if f.severity == "warning"] == lines
    assert any("the least target the module needs is sm_90a (" in f.message for f in found)
    capped = lint(split_kernel(640, 40, 112).module().render().text, filename="cap.ptx")
    assert not [f for f in capped if f.severity in ("warning", "error")]
