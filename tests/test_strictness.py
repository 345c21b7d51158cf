"""The "stricter than ptxas" table (ptxforge/isa/strictness.py): every example assembles with
ptxas, every row's refusal is reproduced through the builder with a message its pattern matches,
and docs/isa.md shows exactly this table."""

import os
import re

import pytest

import ptxforge as pf
from ptxforge.assembler import available_backends
from ptxforge.isa import types as T
from ptxforge.isa.strictness import STRICTER_THAN_PTXAS, documented, markdown_table
from tests.support.ptx_text import assembler_verdict, raw_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _k(target="sm_80"):
    k = pf.KernelBuilder("strict", target=target)
    return k, k.param_ptr("g")


def _mbar_small(k, g):
    small = k.shared("small", 64, align=4)
    k.mbarrier_init(small, 1)


def _multicast_beyond_the_cluster(k, g):
    pair = pf.KernelBuilder("pair", target="sm_90a", reqnctapercluster=(2, 1, 1))
    pair.bulk_copy(pair.shared_base(pair.shared("t", 128, align=128)), pair.param_ptr("src"), 128,
                   pair.shared_base(pair.shared("m", 8, align=8)), multicast=0b111)


def _mma_f32_int(k, g):
    k.mma([k.reg(T.f32) for _ in range(4)], [k.reg(T.b32) for _ in range(2)], [k.reg(T.s32) for _ in range(4)],
          shape="m16n8k32", a_type="s8", acc="s32")


#: One builder reproduction per table row (by name).
REPRODUCE = {
    "integer immediates wider than the type": lambda k, g: k.add(k.reg(T.u16), 70000),
    "barrier thread counts above 1024": lambda k, g: k.bar_sync(0, 2048),
    "shfl lane or offset outside 0..31": lambda k, g: k.shfl("idx", k.reg(T.b32), 32),
    "zero member masks": lambda k, g: k.bar_warp_sync(0),
    ".maxntid above 1024 threads": lambda k, g: pf.KernelBuilder("big", maxntid=1025),
    "negative nanosleep durations": lambda k, g: k.nanosleep(-5),
    "mbarrier byte and arrival counts over 20 bits": lambda k, g: k.mbarrier_expect_tx(
        k.shared("mb", 8, align=8), 1 << 20),
    "mbarriers aligned to less than 8 bytes": _mbar_small,
    "vector accesses whose constant offset breaks their alignment": lambda k, g: k.ld(g, type=T.u32, vec=4,
                                                                                       offset=8),
    "single-value accesses at a constant offset that breaks a variable's alignment":
        lambda k, g: k.ld(k.shared("buf", 64, align=16), type=T.u32, space="shared", offset=2),
    "integer mma fragments in float registers": _mma_f32_int,
    "an address of one state space used in another": lambda k, g: k.ld(g, type=T.u32, space="shared"),
    "a modifier written twice": lambda k, g: k.mul(k.reg(T.f32), k.reg(T.f32), flags=("sat", "sat")),
    "st.param in a kernel": lambda k, g: k.st(k.reg(T.u64), k.reg(T.u32), space="param"),
    "ldmatrix and stmatrix counts other than x1, x2 and x4": lambda k, g: k.ldmatrix(k.shared_base(k.shared("t", 256)), num=8),
    "mma.m8n8k4 with .bf16 operands": lambda k, g: k.mma([k.reg(T.b32)] * 2, [k.reg(T.b32)] * 2, 0, shape="m8n8k4",
                                                         a_type="bf16", acc="f32"),
    "one-sided fences below sm_90 or PTX ISA 8.6": lambda k, g: k.fence("fence.acquire.gpu"),
    "alloca sizes below 1": lambda k, g: k.alloca(-1),
    "bulk copy sizes of 0 bytes": lambda k, g: k.bulk_prefetch(g, 0),
    "multicast masks naming CTAs beyond the declared cluster": _multicast_beyond_the_cluster,
    "lop3 lookup tables above 255": lambda k, g: k.lop3(k.reg(T.b32), k.reg(T.b32), k.reg(T.b32), 256),
}


def test_every_row_has_a_reproduction():
    assert set(REPRODUCE) == {s.name for s in STRICTER_THAN_PTXAS}


@pytest.mark.parametrize("row", STRICTER_THAN_PTXAS, ids=lambda s: s.name)
def test_ptxforge_refuses_the_row(row):
    k, g = _k(row.target)
    with pytest.raises((pf.ValidationError, pf.errors.TargetError)) as info:
        REPRODUCE[row.name](k, g)
    assert row.matches(info.value.message), (row.match, info.value.message)
    assert documented(info.value.message) is row
    assert info.value.loc is not None and os.path.samefile(info.value.loc.filename, __file__)


@pytest.mark.skipif(not available_backends(), reason="needs ptxas or nvJitLink")
def test_ptxas_accepts_every_example():
    """The examples of one target share one module; directive rows get an entry of their own."""
    for target in sorted({s.target for s in STRICTER_THAN_PTXAS}):
        body = "\n".join(s.body for s in STRICTER_THAN_PTXAS if s.target == target and not s.directives)
        verdict = assembler_verdict(raw_kernel(body, target=target))
        assert verdict is None, (target, verdict)
    for s in STRICTER_THAN_PTXAS:
        if s.directives:
            assert assembler_verdict(raw_kernel(s.body, target=s.target, directives=s.directives)) is None, s.name


def test_the_docs_show_the_table():
    with open(os.path.join(ROOT, "docs", "isa.md")) as f:
        page = f.read()
    m = re.search(r"<!-- stricter-than-ptxas -->\n(.*?)<!-- /stricter-than-ptxas -->", page, re.S)
    assert m, "docs/isa.md has no stricter-than-ptxas block"
    assert m.group(1) == markdown_table(), "docs/isa.md is out of date: paste ptxforge.isa.strictness.markdown_table()"


def test_a_negative_shfl_lane_is_the_same_documented_refusal():
    """The differential lane drew `shfl.up` by -1, which ptxas takes (the low 5 bits: lane 31)."""
    from ptxforge.errors import ValidationError
    from ptxforge.isa.strictness import documented
    k = pf.KernelBuilder("neg_lane", target="sm_80")
    with pytest.raises(ValidationError) as info:
        k.shfl("up", k.reg(T.b32), -1)
    assert documented(str(info.value)).name == "shfl lane or offset outside 0..31"
