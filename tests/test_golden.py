"""The golden kernels (tests/golden/*.ptx, checked on an H200), rebuilt with the builder
(tests/golden/builders.py), must compile to the same machine code: the same SASS opcode
multiset per kernel where a disassembler exists, and the same resource report always."""

import os
import warnings

import pytest

import ptxforge as pf
from ptxforge.assembler import disassembler

from golden.builders import GOLDEN

HERE = os.path.join(os.path.dirname(__file__), "golden")


def _original(name):
    with open(os.path.join(HERE, name)) as f:
        return f.read()


@pytest.fixture(scope="module", params=sorted(GOLDEN))
def pair(request):
    name = request.param
    factory, arch = GOLDEN[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pf.EmulatedInstructionWarning)
        module = factory()
    return name, pf.assemble(_original(name), arch), pf.assemble(module), module


def test_same_kernels(pair):
    name, orig, new, module = pair
    assert set(orig.kernels) == set(new.kernels) == {k.name for k in module.kernels}
    assert f".target {module.target.name}" in _original(name)


def test_same_resources(pair):
    name, orig, new, _ = pair
    for kernel in orig.kernels:
        a, b = orig.resources(kernel), new.resources(kernel)
        assert (a.registers, a.shared, a.barriers, a.spills, a.stack) == \
            (b.registers, b.shared, b.barriers, b.spills, b.stack), kernel


def test_same_sass_instruction_mix(pair):
    if disassembler() is None:
        pytest.skip("no disassembler (nvdisasm or cuobjdump): the resource comparison stands alone")
    name, orig, new, _ = pair
    for kernel in orig.kernels:
        a, b = orig.sass_opcodes(kernel), new.sass_opcodes(kernel)
        assert a, f"{kernel}: no SASS found"
        assert a == b, f"{kernel}: only in the original {dict(a - b)}, only rebuilt {dict(b - a)}"


def test_rebuilt_text_is_deterministic():
    for name, (factory, _) in GOLDEN.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", pf.EmulatedInstructionWarning)
            assert str(factory()) == str(factory()), name


def test_int4_examples_also_match_when_built_for_sm90():
    """03/04 are sm_80 files that also run on the H200; the sm_90 rebuild warns about the s4 mma."""
    from golden.builders import module_03, module_04
    if disassembler() is None:
        pytest.skip("no disassembler here")
    for name, factory in (("03_ldmatrix_mma.ptx", module_03), ("04_s4_via_s8.ptx", module_04)):
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            module = factory("sm_90")
        emulated = [w for w in rec if issubclass(w.category, pf.EmulatedInstructionWarning)]
        assert bool(emulated) == (name == "03_ldmatrix_mma.ptx")   # 04 unpacks to s8 on purpose
        orig, new = pf.assemble(_original(name), "sm_90"), pf.assemble(module)
        for kernel in orig.kernels:
            assert orig.sass_opcodes(kernel) == new.sass_opcodes(kernel), kernel
