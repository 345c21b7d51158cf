"""Kernel directives ptxas refuses together are refused by the builder, at the line that asked."""

import pytest

import ptxforge as pf
from ptxforge.assembler import available_backends
from support.located import assert_located

BACKENDS = available_backends()


@pytest.mark.parametrize("shape,rank", [((2, 1, 1), 2), ((4, 1, 1), 4), (2, 16), ((1, 2, 2), 1)])
def test_reqnctapercluster_with_maxclusterrank_is_refused(shape, rank):
    with pytest.raises(pf.ValidationError) as info:
        pf.KernelBuilder("k", target="sm_90", reqnctapercluster=shape, maxclusterrank=rank)  # <- both
    msg = str(info.value)
    assert ".reqnctapercluster" in msg and ".maxclusterrank" in msg and "cannot both" in msg
    assert_located(info.value, "<- both", __file__)


@pytest.mark.parametrize("kw", [dict(reqnctapercluster=(2, 1, 1)), dict(maxclusterrank=2),
                                dict(explicitcluster=True, reqnctapercluster=(2, 1, 1)),
                                dict(explicitcluster=True, maxclusterrank=2)])
def test_each_cluster_directive_alone_or_with_explicitcluster_is_kept(kw):
    k = pf.KernelBuilder("k", target="sm_90", **kw)
    m = k.module()
    for key in kw:
        assert f".{key}" in m.ptx
    if BACKENDS:
        pf.assemble(m, "sm_90")


@pytest.mark.skipif(not BACKENDS, reason="no assembler")
def test_the_refused_pair_is_what_the_assembler_refuses():
    ptx = pf.KernelBuilder("k", target="sm_90", reqnctapercluster=(2, 1, 1)).module().ptx
    ptx = ptx.replace(".reqnctapercluster 2, 1, 1", ".reqnctapercluster 2, 1, 1\n.maxclusterrank 2")
    with pytest.raises(pf.AssemblyError, match="maxclusterrank"):
        pf.assemble(ptx, "sm_90")
