"""mbarrier operations with their memory semantics and scope written out (`.release.cluster`, `.relaxed.cta`,
`.acquire.cluster`, ...), the one-sided fences, and what each needs; every form as libcu++'s cuda::ptx spells it
for sm_90 is built, assembled, read back from its text, and refused where it does not exist."""

import pytest

import ptxforge as pf
from ptxforge import interp, u32
from ptxforge.errors import TargetError, ValidationError
from ptxforge.interp.findings import InterpUnsupported
from ptxforge.isa.sync import FENCES


def _forms(k):
    """Every scoped mbarrier form on one barrier of this CTA and one of the cluster's (sm_90)."""
    bar = k.shared("bar", 8, align=8)
    a = k.shared_base(bar)
    n = k.mov(1, type=u32)
    for sem in ("release", "relaxed"):
        for scope in ("cta", "cluster"):
            k.mbarrier_arrive(a, sem=sem, scope=scope, space="shared::cta")
            k.mbarrier_arrive(a, sem=sem, scope=scope, space="shared::cta", count=n)
            k.mbarrier_arrive(a, sem=sem, scope=scope, space="shared::cta", expect_tx=n)
            k.mbarrier_arrive(a, sem=sem, scope=scope, space="shared::cluster")
    for scope in ("cta", "cluster"):
        k.mbarrier_expect_tx(a, 128, scope=scope)
    token = k.mbarrier_arrive(a, space="shared::cta")
    for sem in ("acquire", "relaxed"):
        for scope in ("cta", "cluster"):
            k.mbarrier_test_wait(a, 0, sem=sem, scope=scope)
            k.mbarrier_test_wait(a, token, parity=False, sem=sem, scope=scope)
            k.mbarrier_try_wait(a, 1, sem=sem, scope=scope, suspend_ns=1000)
    for kind in sorted(f for f in FENCES if f.startswith(("fence.acquire", "fence.release"))):
        k.fence(kind)


def test_scoped_mbarrier_forms_and_one_sided_fences_assemble_and_read_back():
    k = pf.KernelBuilder("scoped", target="sm_90")
    _forms(k)
    m = k.module()
    text = m.ptx
    for spelled in ("mbarrier.arrive.relaxed.cluster.shared::cta.b64", "mbarrier.arrive.release.cta.shared::cluster.b64",
                    "mbarrier.arrive.expect_tx.release.cluster.shared::cta.b64", "mbarrier.expect_tx.relaxed.cluster",
                    "mbarrier.try_wait.parity.relaxed.cluster.shared::cta.b64", "mbarrier.test_wait.acquire.cta",
                    "fence.release.sync_restrict::shared::cta.cluster;", "fence.acquire.gpu;"):
        assert spelled in text, spelled
    assert str(m.version) == "8.6"  # .relaxed and the one-sided fences
    pf.assemble(m)
    again = pf.parse(text)
    assert again.ptx == text


@pytest.mark.parametrize("build,error,match", [
    (lambda k, a: k.mbarrier_arrive(a, sem="relaxed", scope="cta"), TargetError, "sm_90"),
    (lambda k, a: k.mbarrier_arrive(a, sem="release", scope="cluster"), TargetError, "sm_90"),
    (lambda k, a: k.mbarrier_test_wait(a, 0, sem="acquire"), ValidationError, "semantics and scope together"),
    (lambda k, a: k.mbarrier_test_wait(a, 0, sem="release", scope="cta"), ValidationError, "sem one of acquire"),
    (lambda k, a: k.mbarrier_arrive(a, sem="acquire", scope="cta"), ValidationError, "sem one of release"),
    (lambda k, a: k.mbarrier_arrive(a, count=2, no_complete=True, sem="relaxed", scope="cta"), ValidationError,
     "noComplete takes no .relaxed"),
    (lambda k, a: k.fence("fence.release.gpu"), TargetError, "sm_90"),
])
def test_forms_that_do_not_exist_are_refused_by_name(build, error, match):
    k = pf.KernelBuilder("no", target="sm_80")
    a = k.shared_base(k.shared("bar", 8, align=8))
    with pytest.raises(error, match=match):
        build(k, a)


def test_sm80_takes_release_and_acquire_at_cta_scope():
    k = pf.KernelBuilder("ok", target="sm_80")
    a = k.shared_base(k.shared("bar", 8, align=8))
    k.mbarrier_init(a, 1)
    tok = k.mbarrier_arrive(a, sem="release", scope="cta")
    k.mbarrier_test_wait(a, tok, parity=False, sem="acquire", scope="cta")
    m = k.module()
    assert str(m.version) == "8.0"
    pf.assemble(m)


def test_the_interpreter_refuses_a_relaxed_arrival_rather_than_ordering_by_it():
    """Its race checks take every arrival as a release: a .relaxed one, which orders nothing, is refused by
    name instead of being run as if it ordered memory."""
    k = pf.KernelBuilder("relaxed", target="sm_90", reqntid=32)
    a = k.shared_base(k.shared("bar", 8, align=8))
    k.mbarrier_init(a, 32)
    k.mbarrier_arrive(a, sem="relaxed", scope="cta")
    with pytest.raises(InterpUnsupported, match="relaxed"):
        interp.run(k.module(), block=32, args=[])
