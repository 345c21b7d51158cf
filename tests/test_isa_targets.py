"""Per-target device limits: one table on `Target`, read by the builder, the interpreter and the runtime."""

import pytest

import ptxforge as pf
from ptxforge import interp
from ptxforge.errors import LaunchError
from ptxforge.isa.targets import SUPPORTED_TARGETS, DeviceLimits, Target
from ptxforge.runtime.launch import LaunchLimits

KB = 1024

# (shared per CTA after opt-in, shared per SM) in KB, as the CUDA programming guide lists them.
GUIDE_KB = {
    "sm_80": (163, 164), "sm_86": (99, 100), "sm_87": (163, 164), "sm_89": (99, 100),
    "sm_90": (227, 228), "sm_90a": (227, 228), "sm_100": (227, 228), "sm_100a": (227, 228),
    "sm_120": (99, 100), "sm_120a": (99, 100),
}


def test_every_supported_target_has_limits_and_the_guide_figures():
    assert set(GUIDE_KB) == set(SUPPORTED_TARGETS)
    for name, (cta_kb, sm_kb) in GUIDE_KB.items():
        lim = Target.parse(name).limits
        assert isinstance(lim, DeviceLimits)
        assert (lim.shared_per_cta, lim.shared_per_sm) == (cta_kb * KB, sm_kb * KB), name
        assert lim.shared_per_cta == lim.shared_per_sm - lim.reserved_shared_per_cta
        assert lim.static_shared == 48 * KB and lim.registers_per_thread == 255
        assert lim.registers_per_sm == 65536 and lim.threads_per_cta == 1024
        assert lim.threads_per_sm % 32 == 0 and lim.max_ctas_per_sm >= 16


def test_resident_ctas_is_bounded_by_each_resource():
    lim = Target.parse("sm_90").limits
    assert lim.resident_ctas(128, 32, 0) == 16                  # threads: 2048 / 128
    assert lim.resident_ctas(256, 128, 0) == 2                  # registers: 65536 / (256 * 128)
    assert lim.resident_ctas(128, 32, 100 * KB) == 2            # shared: 228 KB / (100 KB + 1 KB)
    assert lim.resident_ctas(32, 8, 0) == lim.max_ctas_per_sm   # the CTA cap


def test_builder_static_shared_limit_reads_the_table():
    k = pf.KernelBuilder("k", target="sm_90")
    k.shared("a", Target.parse("sm_90").limits.static_shared)
    with pytest.raises(pf.ValidationError, match="at most 49152"):
        k.shared("b", 1)


def _dyn_kernel(target):
    k = pf.KernelBuilder("dyn", target=target, maxntid=32)
    k.dynamic_shared("smem")
    k.ret()
    return k


@pytest.mark.parametrize("target", ["sm_80", "sm_89", "sm_90a", "sm_120"])
def test_interpreter_shared_limit_is_the_per_cta_figure(target):
    limit = Target.parse(target).limits.shared_per_cta
    interp.run(_dyn_kernel(target), block=32, shared=limit, races=False)
    with pytest.raises(LaunchError, match=f"allows {limit}"):
        interp.run(_dyn_kernel(target), block=32, shared=limit + 1, races=False)


def test_runtime_default_limits_are_the_static_limit():
    d = LaunchLimits()
    assert d.max_shared_default == d.max_shared_optin == Target.parse("sm_80").limits.static_shared


def test_an_arch_specific_feature_of_several_a_targets():
    """setmaxnreg is an arch-specific feature of sm_90a, sm_100a and sm_120a: the builder takes it on each (and ptxas
    assembles it there, at each target's least .version), and refuses it on the plain targets and below sm_90,
    naming the targets that have it.  Merging with another arch-specific requirement keeps the targets both
    have; with a plain one, those at or above its sm."""
    import pytest
    import ptxforge as pf
    from ptxforge.errors import TargetError
    from ptxforge.isa.targets import Requirement, V
    for t in ("sm_90a", "sm_100a", "sm_120a"):  # (a register cap at entry, so ptxas honours it: no warning)
        k = pf.KernelBuilder("t", target=t, maxntid=256, minnctapersm=1)
        k.setmaxnreg("dec", 40)
        r = pf.assemble(k.module(), t)
        assert "C7508" not in r.log, r.log
    for t in ("sm_90", "sm_100", "sm_120", "sm_89"):  # (on sm_89 too: "sm_90 or newer" would point at sm_100)
        k = pf.KernelBuilder("t", target=t, maxntid=256)
        with pytest.raises(TargetError, match="arch-specific feature: it needs .target sm_90a or sm_100a or sm_120a; "
                                              f"the kernel targets {t}"):
            k.setmaxnreg("dec", 40)
    r = Requirement(90, V("8.0"), arch_specific=True, also_arch=(100, 120))
    only90 = Requirement(90, V("8.0"), arch_specific=True)
    assert (r.merge(only90).min_sm, r.merge(only90).also_arch) == (90, ())
    at100 = r.merge(Requirement(100, V("8.6")))
    assert (at100.min_sm, at100.also_arch, at100.arch_specific) == (100, (120,), True)
