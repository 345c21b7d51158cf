"""Hypothesis strategies for wgmma probes: a legal form with operand layouts it can read."""

from __future__ import annotations

from hypothesis import strategies as st

from ..isa.wgmma import WGMMA_FORMS

_PTXFORGE_INTERNAL = True


def _b_swizzles(form, major):
    if major == "K":
        return (0, 32, 64, 128)
    return tuple(s for s in (0, 32, 64, 128) if (form.n * 2) % (s or 16) == 0)


@st.composite
def wgmma_probe_specs(draw, forms=WGMMA_FORMS):
    """dict(form, rs, a_major, b_major, swizzle_a, swizzle_b, scale_d, satfinite, scale_a, scale_b)
    for `testing.wgmma_probe.wgmma_case`: any form, A from registers or shared memory, either
    major-ness where the form allows a transpose, every swizzle the tile shape admits."""
    form = draw(st.sampled_from(forms))
    rs = draw(st.booleans())
    a_major = "K" if rs or not form.transposable else draw(st.sampled_from(("K", "MN")))
    b_major = "K" if not form.transposable else draw(st.sampled_from(("K", "MN")))
    spec = dict(form=form, rs=rs, a_major=a_major, b_major=b_major,
                swizzle_a=0 if rs else draw(st.sampled_from((0, 32, 64, 128))),
                swizzle_b=draw(st.sampled_from(_b_swizzles(form, b_major))),
                scale_d=draw(st.sampled_from((0, 1))))
    if form.satfinite_ok:
        spec["satfinite"] = draw(st.booleans())
    if form.has_scale_ab:
        spec["scale_a"] = draw(st.sampled_from((1, -1)))
        spec["scale_b"] = draw(st.sampled_from((1, -1)))
    return spec
