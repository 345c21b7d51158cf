"""mbarrier.arrive.noComplete / arrive_drop.noComplete and mbarrier.pending_count: the ISA forms (checked with
ptxas) and the interpreter's semantics (the count pending before the arrival, as the PTX ISA defines it),
against hand-worked expectations and the H200."""

from __future__ import annotations

import numpy as np
import pytest

import ptxforge as pf
from ptxforge import interp
from support.located import assert_located

HERE = __file__


def _one_thread_kernel(target="sm_90", expected=6, arrivals=(1, 1, 2)):
    """Thread 0 arrives .noComplete with each count in turn, recording pending_count of each token, tests the
    phase of its first token, arrives plainly with the rest and tests again; out = [counts..., before, after]."""
    k = pf.KernelBuilder("pc", target=target, reqntid=1)
    out = k.param_ptr("out", pf.u32)
    mb = k.shared_base(k.shared("bar", 8, 8))
    k.mbarrier_init(mb, expected)
    tokens = [k.mbarrier_arrive(mb, count=n, no_complete=True) for n in arrivals]
    for i, tok in enumerate(tokens):
        k.st(out, k.mbarrier_pending_count(tok), type=pf.u32, offset=4 * i)
    before = k.mbarrier_test_wait(mb, tokens[0], parity=False)
    rest = expected - sum(arrivals)
    k.mbarrier_arrive(mb, count=rest, state="_") if rest > 1 else k.mbarrier_arrive(mb, state="_")
    after = k.mbarrier_test_wait(mb, tokens[0], parity=False)
    for j, done in enumerate((before, after)):
        k.st(out, k.selp(1, 0, done, type=pf.u32), type=pf.u32, offset=4 * (len(arrivals) + j))
    return k


def test_pending_count_is_the_count_before_each_arrival():
    out = np.zeros(5, np.uint32)
    interp.run(_one_thread_kernel().module(), block=1, args=[out])
    # the token of a .noComplete arrival still names its phase: not complete before the last arrival, then complete
    assert out.tolist() == [6, 5, 4, 0, 1]
    out = np.zeros(5, np.uint32)
    interp.run(_one_thread_kernel(expected=5).module(), block=1, args=[out])
    assert out.tolist() == [5, 4, 3, 0, 1]


def test_threads_of_one_instruction_arrive_in_thread_order():
    k = pf.KernelBuilder("many", target="sm_90", reqntid=32)
    out = k.param_ptr("out", pf.u32)
    mb = k.shared_base(k.shared("bar", 8, 8))
    k.mbarrier_init(mb, 100, pred=k.setp("eq", k.tid(), 0))
    k.bar_sync()
    tok = k.mbarrier_arrive(mb, count=2, no_complete=True)
    k.st(k.add(out, k.mul(k.tid(), 4, mode="wide")), k.mbarrier_pending_count(tok), type=pf.u32)
    got = np.zeros(32, np.uint32)
    interp.run(k.module(), block=32, args=[got])
    assert got.tolist() == [100 - 2 * i for i in range(32)]


def test_arrive_drop_no_complete_counts_and_drops():
    k = pf.KernelBuilder("drop", target="sm_80", reqntid=1)
    out = k.param_ptr("out", pf.u32)
    mb = k.shared_base(k.shared("bar", 8, 8))
    k.mbarrier_init(mb, 3)
    tok = k.mbarrier_arrive_drop(mb, count=1, no_complete=True)
    k.st(out, k.mbarrier_pending_count(tok), type=pf.u32)
    k.mbarrier_arrive(mb, count=1, no_complete=True, state="_")
    k.mbarrier_arrive(mb, state="_")  # completes phase 0 (3 expected)
    # phase 1 expects 2: one .noComplete arrival sees 2 pending
    k.st(out, k.mbarrier_pending_count(k.mbarrier_arrive(mb, count=1, no_complete=True)), type=pf.u32, offset=4)
    got = np.zeros(2, np.uint32)
    pf.assemble(k.module())
    interp.run(k.module(), block=1, args=[got])
    assert got.tolist() == [3, 2]


def test_pending_count_of_a_plain_token_is_a_finding():
    k = pf.KernelBuilder("plain", target="sm_90", reqntid=1)
    mb = k.shared_base(k.shared("bar", 8, 8))
    k.mbarrier_init(mb, 2)
    tok = k.mbarrier_arrive(mb)
    k.mbarrier_pending_count(tok)  # <- plain-token
    with pytest.raises(interp.InterpError, match="no arrive.noComplete") as e:
        interp.run(k.module(), block=1)
    assert e.value.findings[0].kind == "barrier"
    assert_located(e.value, "<- plain-token", HERE)


def test_a_no_complete_arrival_that_completes_the_phase_is_a_finding():
    k = pf.KernelBuilder("completes", target="sm_90", reqntid=1)
    mb = k.shared_base(k.shared("bar", 8, 8))
    k.mbarrier_init(mb, 2)
    k.mbarrier_arrive(mb, count=2, no_complete=True)  # <- completes
    with pytest.raises(interp.InterpError, match="completes the phase") as e:
        interp.run(k.module(), block=1)
    assert_located(e.value, "<- completes", HERE)


def test_the_forms_render_and_assemble_and_wrong_ones_are_refused():
    k = _one_thread_kernel(target="sm_80", expected=5)
    text = k.module().ptx
    assert "mbarrier.arrive.noComplete.shared.b64" in text and "mbarrier.pending_count.b64" in text
    assert ".target sm_80" in text
    pf.assemble(k.module())
    k2 = pf.KernelBuilder("bad", target="sm_90")
    mb = k2.shared_base(k2.shared("bar", 8, 8))
    with pytest.raises(pf.ValidationError, match="needs a count"):
        k2.mbarrier_arrive(mb, no_complete=True)
    with pytest.raises(pf.ValidationError, match="no .expect_tx"):
        k2.mbarrier_arrive(mb, count=1, expect_tx=64, no_complete=True)
    with pytest.raises(pf.ValidationError, match="shared::cluster"):
        k2.mbarrier_arrive(mb, count=1, space="shared::cluster", no_complete=True)
    k3 = pf.KernelBuilder("rel", target="sm_90")
    mb3 = k3.shared_base(k3.shared("bar", 8, 8))
    k3.mbarrier_arrive(mb3, count=1, release=True, no_complete=True)
    assert "mbarrier.arrive.noComplete.release.cta.shared.b64" in k3.module().ptx
    pf.assemble(k3.module())


@pytest.mark.gpu
def test_gpu_pending_counts_match_the_interpreter():
    from ptxforge.runtime import DeviceBuffer
    for expected, arrivals in ((6, (1, 1, 2)), (5, (1, 1, 2)), (9, (3, 2, 1))):
        k = _one_thread_kernel(expected=expected, arrivals=arrivals)
        gpu = DeviceBuffer.from_host(np.zeros(5, np.uint32))
        pf.load(k.module())[k.name](1, 1, gpu)
        cpu = np.zeros(5, np.uint32)
        interp.run(k.module(), block=1, args=[cpu])
        assert gpu.to_host().tolist() == cpu.tolist(), (expected, arrivals)


def test_the_forms_parse_back_and_run_the_same():
    k = _one_thread_kernel(target="sm_80", expected=5)
    parsed = pf.parse(k.module().ptx)
    assert parsed.ptx == k.module().ptx
    a, b = np.zeros(5, np.uint32), np.zeros(5, np.uint32)
    interp.run(k.module(), block=1, args=[a])
    interp.run(parsed, block=1, args=[b])
    assert a.tolist() == b.tolist() == [5, 4, 3, 0, 1]
    drop = "mbarrier.arrive_drop.noComplete.shared.b64 %rd1, [%r1], 1;"
    text = f""".version 7.0
.target sm_80
.address_size 64
.visible .entry k()
{{
.reg .b32 %r<2>;
.reg .b64 %rd<2>;
.shared .align 8 .b64 bar;
mov.u32 %r1, bar;
{drop}
ret;
}}
"""
    assert drop.split()[0] in pf.parse(text).ptx
